import XCTest

final class CourierWorkerTestsPlaceholder: XCTestCase {}
