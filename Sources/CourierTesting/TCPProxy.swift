import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A loopback TCP proxy for tests that need a misbehaving network between a client and a server.
///
/// Listens on 127.0.0.1 (a free port), opens one connection to the target per accepted client
/// and copies bytes both ways. `freeze()` stops forwarding in both directions and stops
/// accepting, without closing anything: every socket stays open and the kernel keeps
/// acknowledging what arrives, which is what a hung proxy or a frozen server looks like to a
/// client (keepalives and `tcp_user_timeout` see a healthy peer). `thaw()` resumes; `stop()`
/// closes everything.
///
/// One thread runs a `poll(2)` loop over all sockets; the control calls wake it through a pipe.
/// That thread keeps the proxy alive until `stop()`, so call it (in `tearDown`).
public final class TCPProxy: @unchecked Sendable {
    /// The port the proxy listens on (127.0.0.1).
    public let port: Int
    /// Where accepted connections are forwarded.
    public let targetHost: String
    /// The target's port.
    public let targetPort: Int

    private let state = NSCondition()
    private var frozen = false
    private var blackholeRequested = false
    private var loopFrozen = false
    private var stopRequested = false
    private var accepted = 0
    private var open = 0
    private let listener: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)
    private var loopRunning = false

    /// Starts a proxy to `targetHost:targetPort`.
    ///
    /// - Throws: `TestSetupError` when the listening socket cannot be set up.
    public init(targetHost: String = "127.0.0.1", targetPort: Int) throws {
        self.targetHost = targetHost
        self.targetPort = targetPort
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw Self.failure("pipe") }
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
        Self.setNonBlocking(wakeRead)
        Self.setNonBlocking(wakeWrite)
        do {
            (listener, port) = try Self.makeListener()
        } catch {
            close(wakeRead)
            close(wakeWrite)
            throw error
        }
        loopRunning = true
        let thread = Thread { [self] in
            runLoop()
            finished.signal()
        }
        thread.name = "TCPProxy \(port)"
        thread.start()
    }

    /// Starts a proxy to the host and port of a `postgresql://` URL (default port 5432).
    public convenience init(databaseURL: String) throws {
        guard let components = URLComponents(string: databaseURL), let host = components.host, !host.isEmpty else {
            throw TestSetupError(message: "TCPProxy needs a postgresql:// URL with a host")
        }
        try self.init(targetHost: host, targetPort: components.port ?? 5432)
    }

    /// `databaseURL` with its host and port replaced by the proxy's.
    public func url(for databaseURL: String) throws -> String {
        guard var components = URLComponents(string: databaseURL), components.host != nil else {
            throw TestSetupError(message: "cannot rewrite a URL that is not postgresql://")
        }
        components.host = "127.0.0.1"
        components.port = port
        guard let url = components.string else { throw TestSetupError(message: "cannot rewrite the URL") }
        return url
    }

    /// Connections accepted so far.
    public var acceptedConnections: Int { state.withLock { accepted } }

    /// Client connections currently open through the proxy.
    public var openConnections: Int { state.withLock { open } }

    /// True between `freeze()` and `thaw()`.
    public var isFrozen: Bool { state.withLock { frozen } }

    /// Stops forwarding and accepting, closing nothing. Returns once the forwarding thread has
    /// stopped moving bytes, so nothing sent after this call gets through.
    public func freeze() { setFrozen(true) }

    /// Stops forwarding on every connection open now, closing nothing, while new connections
    /// are accepted and forwarded as usual: a peer that vanished without a FIN (a lost NAT
    /// entry, a failed-over host), which only the client's own deadlines can notice.
    public func blackholeOpenConnections() {
        state.withLock { blackholeRequested = true }
        wake()
        state.lock()
        while loopRunning && !stopRequested && blackholeRequested { state.wait() }
        state.unlock()
    }

    /// Resumes forwarding, including what arrived while frozen, and accepting.
    public func thaw() { setFrozen(false) }

    /// Closes the listener and every connection; safe to call twice.
    public func stop() {
        let wait = state.withLock { () -> Bool in
            if stopRequested { return false }
            stopRequested = true
            return loopRunning
        }
        wake()
        if wait {
            finished.wait()
            state.withLock { loopRunning = false }
        }
    }

    private func setFrozen(_ value: Bool) {
        state.lock()
        frozen = value
        state.unlock()
        wake()
        state.lock()
        // The loop reads the flag at the top of each round; wait until it has.
        while loopRunning && !stopRequested && loopFrozen != value { state.wait() }
        state.unlock()
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    // MARK: The forwarding loop

    /// One client connection and its upstream connection, with what is waiting to be written
    /// each way.
    private final class Pair {
        let client: Int32
        let upstream: Int32
        var toUpstream: [UInt8] = []
        var toClient: [UInt8] = []
        var closed = false
        var blackholed = false
        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
    }

    private func runLoop() {
        var pairs: [Pair] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            state.lock()
            let stopping = stopRequested
            let isFrozen = frozen
            loopFrozen = isFrozen
            if blackholeRequested {
                pairs.forEach { $0.blackholed = true }
                blackholeRequested = false
            }
            state.broadcast()
            state.unlock()
            if stopping { break }

            var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if !isFrozen {
                descriptors.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0))
                for pair in pairs {
                    // A blackholed pair keeps its slots (so indexes line up) but asks for nothing.
                    var outbound = interest(from: pair.client, to: pair.upstream, pending: pair.toUpstream)
                    var inbound = interest(from: pair.upstream, to: pair.client, pending: pair.toClient)
                    if pair.blackholed {
                        outbound.events = 0
                        inbound.events = 0
                    }
                    descriptors.append(outbound)
                    descriptors.append(inbound)
                }
            }
            let ready = poll(&descriptors, nfds_t(descriptors.count), -1)
            if ready < 0 { continue }  // EINTR
            if descriptors[0].revents != 0 { drainWakePipe() }
            if isFrozen { continue }
            if descriptors[1].revents & Int16(POLLIN) != 0, let pair = acceptOne() { pairs.append(pair) }
            for (index, pair) in pairs.enumerated() where index * 2 + 3 < descriptors.count {
                let outbound = descriptors[2 + index * 2].revents
                let inbound = descriptors[3 + index * 2].revents
                if pair.blackholed {
                    // Only a hang-up or an error can be reported here: let the pair go, silently.
                    if outbound != 0 || inbound != 0 { pair.closed = true }
                    continue
                }
                forward(outbound, from: pair.client, to: pair.upstream, pending: &pair.toUpstream, pair, &buffer)
                forward(inbound, from: pair.upstream, to: pair.client, pending: &pair.toClient, pair, &buffer)
            }
            let closing = pairs.filter(\.closed)
            if !closing.isEmpty {
                closing.forEach { close($0.client); close($0.upstream) }
                pairs.removeAll(where: \.closed)
                state.withLock { open -= closing.count }
            }
        }
        for pair in pairs {
            close(pair.client)
            close(pair.upstream)
        }
        close(listener)
        close(wakeRead)
        close(wakeWrite)
        state.withLock { open = 0 }
    }

    /// Read from `source` when nothing is pending for `destination`, else wait to write there.
    /// A pair's two directions share no descriptor slot: a pending write waits on its
    /// destination, which keeps each slot's meaning unambiguous.
    private func interest(from source: Int32, to destination: Int32, pending: [UInt8]) -> pollfd {
        pending.isEmpty
            ? pollfd(fd: source, events: Int16(POLLIN), revents: 0)
            : pollfd(fd: destination, events: Int16(POLLOUT), revents: 0)
    }

    private func forward(
        _ revents: Int16, from source: Int32, to destination: Int32, pending: inout [UInt8], _ pair: Pair,
        _ buffer: inout [UInt8]
    ) {
        guard revents != 0, !pair.closed else { return }
        if pending.isEmpty {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                pair.closed = true
                return
            }
            if count < 0 { return }
            pending = Array(buffer[0..<count])
        }
        let sent = pending.withUnsafeBytes { Self.sendNoSignal(destination, $0.baseAddress, $0.count) }
        if sent < 0 {
            if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR { pair.closed = true }
            return
        }
        pending.removeFirst(sent)
    }

    private func drainWakePipe() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while bytes.withUnsafeMutableBytes({ read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
    }

    private func acceptOne() -> Pair? {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return nil }
        guard let upstream = connectToTarget() else {
            close(client)
            return nil
        }
        Self.disableSigPipe(client)
        Self.setNonBlocking(client)
        Self.setNonBlocking(upstream)
        state.withLock {
            accepted += 1
            open += 1
        }
        return Pair(client: client, upstream: upstream)
    }

    /// A blocking connect to the target (loopback in tests, so it is immediate).
    private func connectToTarget() -> Int32? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Self.streamType
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(targetHost, String(targetPort), &hints, &list) == 0, let list else { return nil }
        defer { freeaddrinfo(list) }
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let info = cursor {
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd >= 0 {
                if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                    Self.disableSigPipe(fd)
                    return fd
                }
                close(fd)
            }
            cursor = info.pointee.ai_next
        }
        return nil
    }

    // MARK: Socket helpers

    private static func makeListener() throws -> (Int32, Int) {
        let fd = socket(AF_INET, streamType, 0)
        guard fd >= 0 else { throw failure("socket") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let error = failure("bind/listen")
            close(fd)
            throw error
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        setNonBlocking(fd)
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    private static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Writing to a socket the peer closed must not kill the test process with SIGPIPE.
    private static func disableSigPipe(_ fd: Int32) {
        #if canImport(Darwin)
            var yes: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    private static func sendNoSignal(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            send(fd, bytes, count, Int32(MSG_NOSIGNAL))
        #else
            send(fd, bytes, count, 0)
        #endif
    }

    #if canImport(Glibc)
        private static let streamType = Int32(SOCK_STREAM.rawValue)
    #else
        private static let streamType = SOCK_STREAM
    #endif

    private static func failure(_ call: String) -> TestSetupError {
        TestSetupError(message: "TCPProxy: \(call) failed: \(String(cString: strerror(errno)))")
    }
}

