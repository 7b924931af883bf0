// TEMPORARY: replaced by the pgconn branch's PostgresConnection.Settings at merge.
extension PostgresConnection {
    public struct Settings: Sendable, Equatable {
        public var queryTimeout: Double? = nil
        public init() {}
        public static let `default` = Settings()
        public static let worker = Settings()
    }

    public convenience init(_ conninfo: String, applicationName: String = "courier", settings: Settings) throws {
        try self.init(conninfo, applicationName: applicationName)
    }

    public func ping(timeout: Double) throws { try query("SELECT 1") }
}
