extension PostgresConnection {
    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    ///
    /// A COMMIT that gets no answer within the deadline throws a connection error: the caller
    /// cannot know whether it took effect, and must not treat it as a success.
    @discardableResult
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try transaction(settings: nil, body)
    }

    /// Ends the open transaction block with COMMIT.
    public func commit() throws {
        try simpleQuery("COMMIT")
    }

    /// Rolls back the open transaction block after an error, when the connection is still
    /// there to do it; never throws (a ROLLBACK outside a block only warns).
    public func rollbackAfterError() {
        if isOpen { try? simpleQuery("ROLLBACK") }
    }

    /// Runs `body` in a transaction whose first statements are `settings` (`SET LOCAL ...`,
    /// semicolon-separated), sent together with BEGIN: one round trip instead of two.
    /// COMMIT when `body` returns, ROLLBACK when it throws or the settings fail.
    @discardableResult
    public func transaction<T>(settings: String?, _ body: (PostgresConnection) throws -> T) throws -> T {
        // A multi-statement string runs in one transaction block that BEGIN keeps open; a
        // failing setting aborts it, so roll back before throwing.
        do {
            try simpleQuery(settings.map { "BEGIN; " + $0 } ?? "BEGIN")
        } catch {
            if settings != nil { rollbackAfterError() }
            throw error
        }
        do {
            let value = try body(self)
            try commit()
            return value
        } catch {
            rollbackAfterError()
            throw error
        }
    }
}
