import XCTest

final class CourierCoreTestsPlaceholder: XCTestCase {}
