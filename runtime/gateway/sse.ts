// Server-Sent Events responses: one implementation for every stream the runtime
// serves (SSE response mode, execution channels, the live event stream).
// - proxy-safe headers (no caching, no buffering), a `retry` hint, heartbeats;
// - a client that stops reading has its connection reset past the buffer budget;
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
    sseStreams: Set<SseStream>;
    /** Unsent bytes a stream may hold for a slow client before it is ended. */
    sseBufferBytes: number;
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
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/** Keep track of open streams and end them before the server closes. */
export function installSse(app: FastifyInstance, bufferBytes = 1024 * 1024): void {
  app.decorate('sseStreams', new Set<SseStream>());
  app.decorate('sseBufferBytes', bufferBytes);
  app.addHook('preClose', (done) => {
    for (const stream of [...app.sseStreams]) stream.end();
    done();
  });
}

/**
 * Start an SSE answer. `onEnd` runs once, whoever ends the stream (the code, the
 * client leaving, or shutdown). Send the reply with `reply.send(...)` of the result.
 */
export function openSse(
  request: FastifyRequest,
  reply: FastifyReply,
  options: { heartbeatMs?: number; onEnd?: () => void } = {},
): { sse: SseStream; body: PassThrough } {
  const body = new PassThrough();
  const registry = request.server.sseStreams;
  const maxBuffer = request.server.sseBufferBytes;
  let ended = false;
  const sse: SseStream = {
    send(event, data, id) {
      if (ended) return;
      // Past the budget the stream ends; the client may reconnect with Last-Event-ID.
      if (body.writableLength > maxBuffer) {
        sseOverflows.count++;
        sse.end();
        // A client that stopped reading (the socket is backed up): the connection is
        // reset, since an ending left to drain would keep what is buffered, here and in
        // the kernel's send buffer, for as long as the client holds the connection. A
        // burst written before the answer started (a replay) drains to a client that
        // reads: that one gets what was written, then the end.
        const socket = reply.raw.socket;
        if (reply.raw.headersSent && socket?.writableNeedDrain) {
          body.destroy();
          resetConnection(socket);
        }
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
      registry.delete(sse);
      body.end();
      options.onEnd?.();
    },
    get ended() {
      return ended;
    },
    get buffered() {
      return body.writableLength;
    },
  };
  body.write('retry: 3000\n\n');
  const heartbeat = setInterval(() => body.write(': heartbeat\n\n'), options.heartbeatMs ?? 15_000);
  registry.add(sse);
  reply.raw.on('close', () => sse.end());
  // Gone while the route checked access or read the execution: 'close' was emitted
  // before the listener above.
  if (reply.raw.destroyed) queueMicrotask(() => sse.end());
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
export function endRevoked(sse: SseStream, problem: HttpProblem): void {
  sse.send('revoked', problem.toDocument());
  sse.end();
}
