import Postgres

extension PostgresRow {
    /// Column `index`, a number of seconds (`extract(epoch FROM interval)`), as it is stored;
    /// nil for NULL.
    func decodeStoredSeconds(_ index: Int) throws -> StoredDuration? {
        try decode(index, as: String?.self).map { StoredDuration(text: $0, scale: 1) }
    }

    /// Column `index`, a number of milliseconds, as it is stored; nil for NULL.
    func decodeStoredMilliseconds(_ index: Int) throws -> StoredDuration? {
        try decode(index, as: String?.self).map { StoredDuration(text: $0, scale: 0.001) }
    }

    /// Column `index`, a number of seconds, as a `Duration`; nil for NULL, and for a number no
    /// `Duration` holds (infinite, NaN, beyond a billion years), which a bounded column can only
    /// hold when written around its checks.
    func decodeSeconds(_ index: Int) throws -> Duration? {
        try decode(index, as: Double?.self).flatMap { Duration.stored(seconds: $0) }
    }
}

extension AdminStore {
    /// A stored schedule (`interval[]` read as seconds, in PostgreSQL's array text), or nil.
    /// An entry no `Duration` holds is left out, as an unreadable one always was.
    static func schedule(_ text: String?) -> [Duration]? {
        text.flatMap { PostgresArray.parse($0) }.map {
            $0.compactMap { $0.flatMap(Double.init).flatMap { Duration.stored(seconds: $0) } }
        }
    }
}
