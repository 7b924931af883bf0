import XCTest

final class PostgresTestsPlaceholder: XCTestCase {}
