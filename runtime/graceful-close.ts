// Closing an HTTP listener without resetting a single connection (docs/availability.md,
// "Shutdown"). Node's `server.close()` (and Fastify's `forceCloseConnections: 'idle'`)
// destroys every keep-alive connection that is idle at that instant. A client that
// sends continuously has each connection idle for microseconds between an answer and
// its next request: the request it writes into that window meets a destroyed socket
// and the client sees ECONNRESET or "socket hang up".
//
// Here, once the server closes:
// 1. the listener stops accepting at once (new connections are refused: ECONNREFUSED,
//    before anything is sent);
// 2. every answer from then on carries `Connection: close` (set by the apps: onSend),
//    so a connection in use closes cleanly after its next answer, which the client
//    reads before it would reuse it;
// 3. connections still idle after `idleGraceMs` are ended with a FIN, never a reset:
//    the socket stays open for reading, a request that crosses the FIN is drained and
//    never handed to the app (nothing starts, nothing half-answers), and the socket is
//    destroyed once the client has closed its side (or after `lingerMs`), so no unread
//    byte turns the close into an RST.
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface GracefulCloseOptions {
  /** How long connections idle at close time may still bring one more request. */
  idleGraceMs: number;
  /** How long a connection ended while idle waits for the client's FIN before it is destroyed. */
  lingerMs: number;
}

interface Connection {
  socket: Socket;
  /** Requests received and not yet answered. */
  busy: number;
  /** Ended by us while idle: requests that still arrive are not served. */
  ended: boolean;
}

const kConnection = Symbol('hookgate.connection');

/** A response whose answer the connection's busy count waits for. */
type TrackedResponse = ServerResponse & { [kConnection]?: Connection | undefined };

/**
 * Wraps a request listener so that the server it is given to closes its keep-alive
 * connections gracefully; `attach(server)` must be called with that server.
 */
export function gracefulConnections(
  handler: RequestListener,
  options: GracefulCloseOptions,
): { listener: RequestListener; attach(server: Server): void; readonly closing: boolean } {
  const connections = new Map<Socket, Connection>();
  let closing = false;

  const endIdle = (socket: Socket, connection: Connection) => {
    if (connection.ended || connection.busy > 0 || socket.destroyed) return;
    connection.ended = true;
    socket.end();
    setTimeout(() => socket.destroy(), options.lingerMs).unref();
  };

  /** A response's 'close': its request is answered (or its connection gone). */
  function answered(this: TrackedResponse): void {
    const connection = this[kConnection];
    if (!connection) return;
    this[kConnection] = undefined;
    connection.busy--;
    // Answered while closing: the answer said Connection: close and Node ends the
    // socket; one whose headers went out before the close began is ended here.
    if (closing && connection.busy === 0) {
      setImmediate(() => endIdle(connection.socket, connection));
    }
  }

  const listener: RequestListener = (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    const connection = connections.get(socket);
    if (connection?.ended) {
      // It crossed our FIN: never served (the client sees its connection closed without
      // an answer, and nothing was started). Read to the end so no byte is left unread.
      request.resume();
      return;
    }
    if (connection) {
      connection.busy++;
      // One handler for every response (no closure or once-wrapper per request).
      (response as TrackedResponse)[kConnection] = connection;
      response.on('close', answered);
    }
    handler(request, response);
  };

  return {
    listener,
    get closing() {
      return closing;
    },
    attach(server: Server) {
      server.on('connection', (socket: Socket) => {
        const connection: Connection = { socket, busy: 0, ended: false };
        connections.set(socket, connection);
        socket.once('close', () => connections.delete(socket));
        // The client closed its side of a connection we ended: nothing is left unread.
        socket.once('end', () => {
          if (connection.ended) socket.destroy();
        });
      });
      // Called by Node's server.close() (before the listener closes) and by Fastify's
      // forceCloseConnections: 'idle'. Instead of destroying idle connections now, let
      // them bring one more request for idleGraceMs, then end them with a FIN.
      server.closeIdleConnections = () => {
        if (closing) return;
        closing = true;
        setTimeout(() => {
          for (const [socket, connection] of connections) endIdle(socket, connection);
        }, options.idleGraceMs).unref();
      };
    },
  };
}
