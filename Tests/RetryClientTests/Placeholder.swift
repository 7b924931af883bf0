import XCTest

final class RetryClientTestsPlaceholder: XCTestCase {}
