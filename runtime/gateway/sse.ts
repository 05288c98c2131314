// Server-Sent Events responses: one implementation for every stream the runtime
// serves (SSE response mode, execution channels, the live event stream).
// - proxy-safe headers (never stored, no buffering), a `retry` hint, heartbeats;
// - past the buffer budget the stream ends; a client that has not taken what was
//   written within the drain deadline (it stopped reading) has its connection reset;
// - the stream ends when the client leaves (the response's `close`, which fires on
//   disconnect; the request's `close` fires once its body is read);
// - every open stream is ended when the server closes, so shutdown is not held up;
// - open streams are capped (StreamSlots): per execution on each listener (429
//   execution-streams-exceeded) and per process, every listener counted (503
//   streams-exhausted), both with Retry-After; a stream's slot is taken before any work
//   is done for it (reading the execution's history) and freed once its bytes have left;
//   the slots held and the refusals are counted by listener and cap for the metrics
//   (hookgate_streams_open, hookgate_streams_refused_total).
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BoundedStore } from '../bounded.ts';
import { HttpProblem } from '../errors.ts';

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
    /** The caps on open streams: this listener's per execution, the process's. */
    sseSlots: StreamSlots;
  }
}

/** How soon a refused stream may be asked for again (Retry-After, seconds). */
export const STREAM_RETRY_AFTER_SECONDS = 5;

/** The listener a stream is opened on: the metrics' `listener` label. */
export type StreamListener = 'webhook' | 'admin';
export const STREAM_LISTENERS: readonly StreamListener[] = ['webhook', 'admin'];
/** The cap that refused a stream: the execution's on its listener, or the process's. */
export type StreamCap = 'execution' | 'process';
export const STREAM_CAPS: readonly StreamCap[] = ['execution', 'process'];

/**
 * The open streams of one process, every listener's counted: at most `max`. One object
 * shared by the listeners of a process (createServing); an app made alone has its own.
 * It also keeps, in plain numbers for the metrics (read at scrape time,
 * analytics/stream-metrics.ts), the slots each listener holds and the streams each cap
 * refused there.
 */
export class ProcessStreams {
  open = 0;
  readonly max: number;
  /** Slots held, by listener (they add up to `open`). */
  readonly openOn: Record<StreamListener, number> = { webhook: 0, admin: 0 };
  /** Streams refused since the process started, by listener and cap. */
  readonly refused: Record<StreamListener, Record<StreamCap, number>> = {
    webhook: { execution: 0, process: 0 },
    admin: { execution: 0, process: 0 },
  };

  constructor(max: number) {
    this.max = max;
  }
}

/** A taken slot: freed once (later calls do nothing). */
export interface StreamSlot {
  release(): void;
}

/**
 * The caps on one listener's open streams: `maxPerExecution` of each execution (each
 * listener its own count, so a caller's links never use up what the admin API may open
 * on the same execution), within the process's `max`.
 */
export class StreamSlots {
  readonly #perExecution = new Map<string, number>();
  readonly process: ProcessStreams;
  readonly maxPerExecution: number;
  readonly listener: StreamListener;

  constructor(process: ProcessStreams, maxPerExecution: number, listener: StreamListener) {
    this.process = process;
    this.maxPerExecution = maxPerExecution;
    this.listener = listener;
  }

  /** Streams of `executionId` open on this listener. */
  openOf(executionId: string): number {
    return this.#perExecution.get(executionId) ?? 0;
  }

  /**
   * A slot for one more stream (of `executionId`, when it follows one), or the problem:
   * 429 execution-streams-exceeded when the execution has its streams open here, 503
   * streams-exhausted when the process has its own.
   */
  take(executionId?: string): StreamSlot {
    const retry = { 'retry-after': String(STREAM_RETRY_AFTER_SECONDS) };
    const ofExecution = executionId === undefined ? 0 : this.openOf(executionId);
    const process = this.process;
    const listener = this.listener;
    if (executionId !== undefined && ofExecution >= this.maxPerExecution) {
      process.refused[listener].execution++;
      throw new HttpProblem(
        'HG_ERR_EXECUTION_STREAMS_EXCEEDED',
        `Execution ${executionId} already has ${this.maxPerExecution} event streams open here; close one first`,
        { headers: retry, extensions: { executionId, limit: this.maxPerExecution } },
      );
    }
    if (process.open >= process.max) {
      process.refused[listener].process++;
      throw new HttpProblem(
        'HG_ERR_STREAMS_EXHAUSTED',
        `This server already has its ${process.max} event streams open; retry later`,
        { headers: retry, extensions: { limit: process.max } },
      );
    }
    process.open++;
    process.openOn[listener]++;
    if (executionId !== undefined) this.#perExecution.set(executionId, ofExecution + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        process.open--;
        process.openOn[listener]--;
        if (executionId === undefined) return;
        const left = this.openOf(executionId) - 1;
        if (left > 0) this.#perExecution.set(executionId, left);
        else this.#perExecution.delete(executionId);
      },
    };
  }
}

/** A slot for a stream about to be opened on `request`'s listener (StreamSlots.take). */
export function takeStreamSlot(request: FastifyRequest, executionId?: string): StreamSlot {
  return request.server.sseSlots.take(executionId);
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

/** Keep track of open streams, cap them, and end them before the server closes. */
export function installSse(
  app: FastifyInstance,
  options: {
    bufferBytes: number;
    drainMs: number;
    maxPerExecution: number;
    /** The process's count, shared with its other listeners. */
    process: ProcessStreams;
    /** Which listener this app is (its streams' and refusals' label; default webhook). */
    listener?: StreamListener;
  },
): void {
  app.decorate('sseStreams', new Set<SseStream>());
  app.decorate('sseBufferBytes', options.bufferBytes);
  app.decorate('sseDrainMs', options.drainMs);
  app.decorate(
    'sseSlots',
    new StreamSlots(options.process, options.maxPerExecution, options.listener ?? 'webhook'),
  );
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
 * Throws the cap's problem (before anything is written) when no slot is given and the
 * process has no room.
 */
export function openSse(
  request: FastifyRequest,
  reply: FastifyReply,
  options: {
    heartbeatMs?: number;
    onEnd?: () => void;
    /**
     * The stream's slot, taken by the caller before it did any work for the stream
     * (takeStreamSlot); freed with the stream. Without one, a slot of the process is
     * taken here.
     */
    slot?: StreamSlot;
    /**
     * Keeps checking the reader's access while the stream is open (the admin
     * listener's AdminAccess.watch): told how to end the stream when it is withdrawn,
     * returns the stop function, called when the stream ends.
     */
    recheck?: (revoked: (problem: HttpProblem) => void) => () => void;
  } = {},
): { sse: SseStream; body: PassThrough } {
  const slot = options.slot ?? takeStreamSlot(request);
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
  const forget = (): void => {
    registry.delete(sse);
    slot.release();
  };
  const release = (): void => {
    if (response.writableFinished || response.destroyed) {
      forget();
      return;
    }
    const done = (): void => {
      clearTimeout(deadline);
      forget();
    };
    const deadline = setTimeout(() => {
      forget();
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
