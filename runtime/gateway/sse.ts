// Server-Sent Events responses: one implementation for every stream the runtime
// serves (SSE response mode, execution channels, the live event stream).
// - proxy-safe headers (never stored, no buffering), a `retry` hint, heartbeats;
// - past the buffer budget the stream ends; a client that has not taken what was
//   written within the drain deadline (it stopped reading) has its connection reset;
// - the stream ends when the client leaves (the response's `close`, which fires on
//   disconnect; the request's `close` fires once its body is read);
// - every open stream is ended when the server closes, so shutdown is not held up.
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BoundedStore } from '../bounded.ts';
import type { HttpProblem } from '../errors.ts';

export interface SseStream {
  /** Write one frame: `event`, optional `id`, JSON `data`. No-op once ended. */
  send(event: string, data: unknown, id?: number | string): void;
  end(): void;
  readonly ended: boolean;
  /** Bytes written and not yet taken by the client. */
  readonly buffered: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Open streams, and ended ones whose last bytes have not left yet. */
    sseStreams: Set<SseStream>;
    /** Unsent bytes a stream may hold for a slow client before it is ended. */
    sseBufferBytes: number;
    /** How long an ended stream's last bytes may take to leave before a reset. */
    sseDrainMs: number;
  }
}

/** Streams ended because their client did not read (all listeners of the process). */
export const sseOverflows = { count: 0 };

/** What the open streams of some apps hold, for the store metrics (store "sse-buffers"). */
export function sseBuffers(apps: FastifyInstance[]): BoundedStore {
  return {
    storeName: 'sse-buffers',
    stats() {
      let bytes = 0;
      let entries = 0;
      for (const app of apps) {
        for (const stream of app.sseStreams) {
          bytes += stream.buffered;
          entries++;
        }
      }
      return { bytes, entries, evictions: { bytes: sseOverflows.count, count: 0, expired: 0 } };
    },
  };
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  // no-store: a stream carries outputs and request headers, and an execution link's
  // URL its token; no-cache for intermediaries that look for it on event streams.
  'cache-control': 'no-store, no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/** Keep track of open streams and end them before the server closes. */
export function installSse(app: FastifyInstance, bufferBytes: number, drainMs: number): void {
  app.decorate('sseStreams', new Set<SseStream>());
  app.decorate('sseBufferBytes', bufferBytes);
  app.decorate('sseDrainMs', drainMs);
  app.addHook('preClose', (done) => {
    for (const stream of [...app.sseStreams]) stream.end();
    done();
  });
}

/** How often an open stream sends a comment line (proxies keep it open), by default. */
export const SSE_HEARTBEAT_MS = 15_000;

/**
 * Start an SSE answer. `onEnd` runs once, whoever ends the stream (the code, the
 * client leaving, or shutdown). Send the reply with `reply.send(...)` of the result.
 */
export function openSse(
  request: FastifyRequest,
  reply: FastifyReply,
  options: {
    heartbeatMs?: number;
    onEnd?: () => void;
    /**
     * Keeps checking the reader's access while the stream is open (the admin
     * listener's AdminAccess.watch): told how to end the stream when it is withdrawn,
     * returns the stop function, called when the stream ends.
     */
    recheck?: (revoked: (problem: HttpProblem) => void) => () => void;
  } = {},
): { sse: SseStream; body: PassThrough } {
  const body = new PassThrough();
  const registry = request.server.sseStreams;
  const maxBuffer = request.server.sseBufferBytes;
  const drainMs = request.server.sseDrainMs;
  const response = reply.raw;
  let ended = false;
  let stopRecheck: (() => void) | undefined;
  /**
   * After the end: what was written is still counted until it has left (the response's
   * 'finish') or the client has gone; a client that has not taken it within `drainMs`
   * (it stopped reading) has its connection reset, which frees it here and in the
   * kernel's send buffer. A client that reads gets all of it, then the end.
   */
  const release = (): void => {
    if (response.writableFinished || response.destroyed) {
      registry.delete(sse);
      return;
    }
    const done = (): void => {
      clearTimeout(deadline);
      registry.delete(sse);
    };
    const deadline = setTimeout(() => {
      registry.delete(sse);
      body.destroy();
      const socket = response.socket;
      if (socket) resetConnection(socket);
      else response.destroy();
    }, drainMs);
    deadline.unref();
    response.once('finish', done);
    response.once('close', done);
  };
  const sse: SseStream = {
    send(event, data, id) {
      if (ended) return;
      // Past the budget the stream ends (the client may reconnect with Last-Event-ID);
      // what was written drains to a client that reads, within the drain deadline.
      if (body.writableLength > maxBuffer) {
        sseOverflows.count++;
        sse.end();
        return;
      }
      body.write(
        `${id !== undefined ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`,
      );
    },
    end() {
      if (ended) return;
      ended = true;
      clearInterval(heartbeat);
      stopRecheck?.();
      body.end();
      options.onEnd?.();
      release();
    },
    get ended() {
      return ended;
    },
    get buffered() {
      return body.writableLength + (response.socket?.writableLength ?? 0);
    },
  };
  body.write('retry: 3000\n\n');
  const heartbeat = setInterval(
    () => body.write(': heartbeat\n\n'),
    options.heartbeatMs ?? SSE_HEARTBEAT_MS,
  );
  registry.add(sse);
  response.on('close', () => sse.end());
  // Gone while the route checked access or read the execution: 'close' was emitted
  // before the listener above.
  if (response.destroyed) queueMicrotask(() => sse.end());
  stopRecheck = options.recheck?.((problem) => endRevoked(sse, problem));
  reply.headers(SSE_HEADERS);
  return { sse, body };
}

/** RST, freeing the kernel's send buffer; a socket that cannot (not plain TCP) is destroyed. */
function resetConnection(socket: Socket): void {
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}

/**
 * Ends a stream whose reader's access was withdrawn: a last `revoked` event carries the
 * problem (admin-unauthenticated or admin-forbidden), so a client sees why it ended; its
 * reconnection is then refused like any request.
 */
function endRevoked(sse: SseStream, problem: HttpProblem): void {
  sse.send('revoked', problem.toDocument());
  sse.end();
}
