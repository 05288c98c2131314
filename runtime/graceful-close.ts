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
//
// The same lingering close serves every answer that ends its connection (Connection:
// close, an HTTP/1.0 or 0.9 request) while the client may still be sending, e.g. a 413
// answered on the Content-Length before a 155 KB body has arrived. Node ends such a
// socket with `socket.destroySoon()`, which destroys it as soon as the answer is written:
// the unread body then turns the close into an RST, and a client still writing (or
// slow to read, on a loaded machine) loses the answer (RFC 9112 section 9.6). Each
// connection's destroySoon() here ends the socket with a FIN instead, keeps reading
// (and discarding) what the client still sends, and destroys the socket once the
// client has closed its side, or after `lingerMs`.
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

/** Sockets ended by a lingering close: what still arrives is drained, never answered. */
const lingering = new WeakSet<Socket>();

/** True while `socket` drains after its last answer (see lingerThenDestroy). */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket);
}

/**
 * Ends `socket` after what is queued on it is written (a FIN, not an RST), drains what
 * the client still sends, and destroys the socket when the client closes its side or
 * after `lingerMs`.
 */
function lingerThenDestroy(socket: Socket, lingerMs: number): void {
  if (socket.destroyed) return;
  lingering.add(socket);
  if (socket.readableEnded) {
    // The client has closed its side already: nothing more can arrive.
    socket.end(() => socket.destroy());
    return;
  }
  socket.end();
  socket.resume();
  setTimeout(() => socket.destroy(), lingerMs).unref();
}

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
    lingerThenDestroy(socket, options.lingerMs);
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
          if (connection.ended || lingering.has(socket)) socket.destroy();
        });
        // Node calls this after an answer that closes the connection.
        socket.destroySoon = () => lingerThenDestroy(socket, options.lingerMs);
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
