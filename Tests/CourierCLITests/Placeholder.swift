import XCTest

final class CourierCLITestsPlaceholder: XCTestCase {}
