import NIOCore
import NIOTLS

/// Sits after the TLS handler of a new connection and completes ``handshake`` when the TLS
/// handshake is done: no request is written before, so a handshake error (a certificate for
/// another name, an unknown authority, a receiver that speaks no TLS) is reported as itself and
/// never as the failed write of a request. It fails the handshake on a TLS error, a close, or
/// when `timeout` (the connect timeout, TCP and TLS together) has passed; everything else
/// passes through.
final class TLSHandshakeWatcher: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    let handshake: EventLoopPromise<Void>
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(handshake: EventLoopPromise<Void>, timeout: TimeAmount) {
        self.handshake = handshake
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let (handshake, timeout) = (self.handshake, self.timeout)
        timer = context.eventLoop.scheduleTask(in: timeout) {
            handshake.fail(ChannelError.connectTimeout(timeout))
            channel.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent {
            timer?.cancel()
            handshake.succeed()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        timer?.cancel()
        handshake.fail(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        handshake.fail(ChannelError.eof)
        context.fireChannelInactive()
    }
}
