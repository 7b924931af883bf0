import Postgres
import XCTest

/// The binary form of array parameters, with no server: the header PostgreSQL's `array_recv`
/// reads (dimensions, NULL flag, element type, length, lower bound), then each element as its
/// length and big-endian bytes.
final class BinaryArrayTests: XCTestCase {
    private func words(_ values: [UInt32]) -> [UInt8] {
        values.flatMap { value in withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    }

    func testAnIntegerArrayWithANullIsHeaderThenLengthAndBytesPerElement() {
        let array = PostgresBinaryArray([Int32(1), nil, Int32(-2)])
        XCTAssertEqual(array.postgresValue, .bytes(array.binary))
        XCTAssertEqual(
            array.binary,
            words([1, 1, 23, 3, 1]) + words([4, 1]) + words([UInt32(bitPattern: -1)]) + words([4, UInt32(bitPattern: -2)]))
    }

    func testEachElementTypeWritesItsOIDAndWidth() {
        XCTAssertEqual(
            PostgresBinaryArray([Int64(-1)]).binary,
            words([1, 0, 20, 1, 1, 8]) + Array(repeating: 0xFF, count: 8))
        XCTAssertEqual(
            PostgresBinaryArray([1.5]).binary,
            words([1, 0, 701, 1, 1, 8]) + [0x3F, 0xF8, 0, 0, 0, 0, 0, 0])
        XCTAssertEqual(PostgresBinaryArray([true, false]).binary, words([1, 0, 16, 2, 1, 1]) + [1] + words([1]) + [0])
    }

    func testAnEmptyArrayHasNoDimension() {
        XCTAssertEqual(PostgresBinaryArray([Int64]()).binary, words([0, 0, 20]))
        XCTAssertEqual(PostgresBinaryArray([Double?]()).binary, words([0, 0, 701]))
    }
}
