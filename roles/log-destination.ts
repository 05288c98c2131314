// Where a role's log lines go: stdout, written so that a reader that stops reading (a
// full pipe) can neither hold the process nor grow its memory, and so that a shutdown
// writes what is left within a bound (docs/availability.md, "Log lines at shutdown";
// ADR 0037).
//
// pino's own destination (sonic-boom) keeps every line while the pipe is full, without
// a bound, and at exit writes them synchronously, retrying every 100 ms for as long as
// the pipe stays full: a process whose stdout nobody reads never exits, not even on a
// second signal (its JavaScript never runs again). That exit flush also skips the chunk
// an asynchronous write was retrying, so a reader that merely paused lost lines.
//
// Here each line is written at once, in order, with one write(2) that does not block:
// libuv opens a pipe or socket behind process.stdout in non-blocking mode (the logger
// touches process.stdout before the first line), so a full pipe takes part of a line or
// nothing and says EAGAIN. What it did not take waits here, up to `maxBufferedBytes`;
// lines beyond are dropped whole and counted (`dropped`, read by the role's /metrics;
// `onDropped`, once lines get through again), and a timer offers the rest every 50 ms.
// A flush, asynchronous (`flush`, at shutdown) or synchronous (`flushSync`, at exit and
// after a fatal line, for `syncFlushMs` at most), waits while the destination takes
// bytes and gives up once it has taken nothing for `stallMs`. The three are settings
// (HOOKGATE_LOG_*, log-settings.ts); the constants below are their defaults.
// A regular file never fills; a terminal blocks a write while it is paused (Ctrl-S),
// as it does for any program.
import { writeSync } from 'node:fs';

/** What waits while stdout takes nothing; lines beyond are dropped and counted. */
export const LOG_BUFFER_BYTES = 4 * 1024 * 1024;
/** How long a flush waits on a stdout that takes nothing before it gives up. */
export const LOG_STALL_MS = 5_000;
/** The longest a synchronous flush holds the process (at exit: past the grace period). */
export const LOG_SYNC_FLUSH_MS = 1_000;
/** How often what waits is offered again. */
const RETRY_MS = 50;
/**
 * Why lines were dropped: `buffer_full`, stdout took nothing and `maxBufferedBytes`
 * waited already; `write_error`, the write failed (EPIPE: nobody will ever read).
 */
export const LOG_DROP_REASONS = ['buffer_full', 'write_error'] as const;
export type LogDropReason = (typeof LOG_DROP_REASONS)[number];

/** Lines dropped whole, and their bytes (UTF-8, as formatted). */
export interface LogDrops {
  lines: number;
  bytes: number;
}

/** At most this much in one write(2). */
const CHUNK_BYTES = 64 * 1024;
/**
 * What waits is copied into buffers of this size, the destination's own: never a slice
 * of Node's shared 8 KiB pool (a short `Buffer.from`), which would hold the whole slab
 * and whatever else shares it. Longer lines get a buffer of their own size.
 */
const SLAB_BYTES = 64 * 1024;
const OWN_BUFFER_BYTES = SLAB_BYTES / 8;

export interface LogDestinationOptions {
  /** File descriptor; 1 (stdout) by default. Must be in non-blocking mode if a pipe. */
  fd?: number;
  maxBufferedBytes?: number;
  stallMs?: number;
  syncFlushMs?: number;
  /** Turns pino's JSON line into what is written (pino-pretty's format). */
  format?: (line: string) => string;
}

/** A pino destination (`write`, `flush`, `flushSync`) over a file descriptor. */
export class LogDestination {
  /** Told how many lines (and bytes) were dropped, once the destination takes lines again. */
  onDropped: ((drops: LogDrops) => void) | undefined;
  readonly #fd: number;
  readonly #maxBytes: number;
  readonly #stallMs: number;
  readonly #syncFlushMs: number;
  readonly #format: ((line: string) => string) | undefined;
  /**
   * Bytes not written yet, oldest first: whole lines, the first maybe a line's rest;
   * consecutive lines copied into one slab are one buffer.
   */
  #waiting: Buffer[] = [];
  #waitingBytes = 0;
  /** Where waiting lines are copied, and how much of it is used. */
  #slab: Buffer | undefined;
  #slabUsed = 0;
  /** Dropped since the last `onDropped`. */
  #dropped: LogDrops = { lines: 0, bytes: 0 };
  /** Dropped since the start, by reason (never reset: counters for /metrics). */
  readonly #droppedTotal: Record<LogDropReason, LogDrops> = {
    buffer_full: { lines: 0, bytes: 0 },
    write_error: { lines: 0, bytes: 0 },
  };
  /**
   * While bytes wait: when the destination last took some, or first refused (the
   * monotonic clock: a wall clock stepped back during the exit flush would hold it).
   */
  #since: number | undefined;
  #retry: NodeJS.Timeout | undefined;
  /** For `Atomics.wait`, the synchronous sleep between two tries of `flushSync`. */
  readonly #sleeper = new Int32Array(new SharedArrayBuffer(4));

  constructor(options: LogDestinationOptions = {}) {
    this.#fd = options.fd ?? 1;
    this.#maxBytes = options.maxBufferedBytes ?? LOG_BUFFER_BYTES;
    this.#stallMs = options.stallMs ?? LOG_STALL_MS;
    this.#syncFlushMs = options.syncFlushMs ?? LOG_SYNC_FLUSH_MS;
    this.#format = options.format;
  }

  /** Bytes written to nobody yet. */
  get waitingBytes(): number {
    return this.#waitingBytes;
  }

  /** Lines and bytes dropped since the start, by reason. */
  get dropped(): Readonly<Record<LogDropReason, Readonly<LogDrops>>> {
    return this.#droppedTotal;
  }

  write(line: string): void {
    const text = this.#format ? this.#format(line) : line;
    if (this.#waiting.length > 0) {
      // Behind what waits, to keep the order; the timer writes it.
      this.#keep(text);
      return;
    }
    const written = this.#writeSome(text);
    const bytes = Buffer.byteLength(text);
    if (written < 0) {
      this.#drop('write_error', 1, bytes);
    } else if (written < bytes) {
      // A line's rest is kept whatever the bound: dropping it would cut the line.
      this.#append(Buffer.from(text).subarray(written));
      this.#since = performance.now();
      this.#retryLater();
    } else if (this.#dropped.lines > 0) {
      queueMicrotask(() => this.#reportDropped());
    }
  }

  /**
   * Calls back once everything waiting is written, or once the destination has taken
   * nothing for `stallMs` (pino's `logger.flush(cb)`; the shutdown awaits it).
   */
  flush(callback?: (err?: Error) => void): void {
    void this.#drained().then(() => callback?.());
  }

  /** Writes what waits now, for `syncFlushMs` at most, and gives up on a stalled one. */
  flushSync(): void {
    const deadline = performance.now() + this.#syncFlushMs;
    clearTimeout(this.#retry);
    this.#retry = undefined;
    for (;;) {
      if (this.#writeWaiting()) this.#reportDropped();
      const left = deadline - performance.now();
      if (this.#waiting.length === 0 || this.#stalled() || left <= 0) break;
      // Never past the deadline: the forced exit's write is the last thing before the
      // kubelet's SIGKILL, which the chart places syncFlushMs (whole seconds) after it.
      Atomics.wait(this.#sleeper, 0, 0, Math.min(10, left));
    }
    if (this.#waiting.length > 0) this.#retryLater();
  }

  async #drained(): Promise<void> {
    while (this.#waiting.length > 0 && !this.#stalled()) {
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  #stalled(): boolean {
    return this.#since !== undefined && performance.now() - this.#since >= this.#stallMs;
  }

  #keep(text: string): void {
    const bytes = Buffer.byteLength(text);
    if (this.#waitingBytes + bytes > this.#maxBytes) {
      this.#drop('buffer_full', 1, bytes);
      return;
    }
    this.#append(text, bytes);
  }

  /** Copies `data` behind what waits (`bytes`: its length in UTF-8). */
  #append(data: string | Buffer, bytes = data.length): void {
    this.#waitingBytes += bytes;
    if (bytes > OWN_BUFFER_BYTES) {
      const own = Buffer.allocUnsafeSlow(bytes);
      if (typeof data === 'string') own.write(data);
      else data.copy(own);
      this.#waiting.push(own);
      return;
    }
    if (!this.#slab || this.#slabUsed + bytes > SLAB_BYTES) {
      this.#slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
      this.#slabUsed = 0;
    }
    const slab = this.#slab;
    const start = this.#slabUsed;
    if (typeof data === 'string') slab.write(data, start);
    else data.copy(slab, start);
    this.#slabUsed += bytes;
    // Right behind the last waiting bytes in the same slab: one buffer for both.
    const last = this.#waiting.at(-1);
    if (last?.buffer === slab.buffer && last.byteOffset + last.length === start) {
      this.#waiting[this.#waiting.length - 1] = slab.subarray(last.byteOffset, this.#slabUsed);
    } else {
      this.#waiting.push(slab.subarray(start, this.#slabUsed));
    }
  }

  /** Nothing waits any more: the slab goes too. */
  #clear(): void {
    this.#waiting = [];
    this.#waitingBytes = 0;
    this.#slab = undefined;
    this.#slabUsed = 0;
  }

  /** How many lines (newlines) wait, the first maybe a line's rest. */
  #waitingLines(): number {
    let lines = 0;
    for (const buffer of this.#waiting) {
      for (let at = buffer.indexOf(10); at >= 0; at = buffer.indexOf(10, at + 1)) lines++;
    }
    return lines;
  }

  #retryLater(): void {
    // Unreferenced: a process with nothing else to do exits, and flushes at exit.
    this.#retry ??= setTimeout(() => {
      this.#retry = undefined;
      if (this.#writeWaiting()) this.#reportDropped();
      else if (this.#waiting.length > 0) this.#retryLater();
    }, RETRY_MS).unref();
  }

  /**
   * Writes what waits, a chunk at a time, until all is written or a write falls short:
   * true when something waited and all of it is written now.
   */
  #writeWaiting(): boolean {
    if (this.#waiting.length === 0) return false;
    while (this.#waiting.length > 0) {
      const chunk = this.#nextChunk();
      const written = this.#writeSome(chunk);
      if (written < 0) {
        this.#drop('write_error', this.#waitingLines(), this.#waitingBytes);
        this.#clear();
        this.#since = undefined;
        return false;
      }
      if (written > 0) this.#since = performance.now();
      this.#consume(written);
      if (written < chunk.length) return false;
    }
    this.#clear();
    this.#since = undefined;
    return true;
  }

  /** The first waiting buffers, joined up to CHUNK_BYTES (at least the first, whole). */
  #nextChunk(): Buffer {
    let count = 1;
    let bytes = this.#waiting[0]?.length ?? 0;
    for (; count < this.#waiting.length; count++) {
      const next = this.#waiting[count]?.length ?? 0;
      if (bytes + next > CHUNK_BYTES) break;
      bytes += next;
    }
    const first = this.#waiting[0] ?? Buffer.alloc(0);
    return count === 1 ? first : Buffer.concat(this.#waiting.slice(0, count), bytes);
  }

  /** Forgets the first `bytes` waiting bytes (written). */
  #consume(bytes: number): void {
    this.#waitingBytes -= bytes;
    let left = bytes;
    while (left > 0) {
      const first = this.#waiting[0];
      if (!first) break;
      if (first.length > left) {
        this.#waiting[0] = first.subarray(left);
        break;
      }
      left -= first.length;
      this.#waiting.shift();
    }
  }

  /**
   * One write(2): the bytes the destination took, 0 when it is full, -1 on any other
   * error (EPIPE: nobody will ever read; the caller drops and counts, and the next
   * line tries again).
   */
  #writeSome(data: string | Buffer): number {
    try {
      return typeof data === 'string' ? writeSync(this.#fd, data) : writeSync(this.#fd, data);
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EAGAIN' ? 0 : -1;
    }
  }

  #drop(reason: LogDropReason, lines: number, bytes: number): void {
    this.#dropped.lines += lines;
    this.#dropped.bytes += bytes;
    this.#droppedTotal[reason].lines += lines;
    this.#droppedTotal[reason].bytes += bytes;
  }

  #reportDropped(): void {
    const drops = this.#dropped;
    if (drops.lines === 0) return;
    this.#dropped = { lines: 0, bytes: 0 };
    this.onDropped?.(drops);
  }
}
