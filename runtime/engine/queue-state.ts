// What the execution queue holds, read from Redis in a few O(1) commands: one
// XINFO STREAM per stream (a shard's stream once queues are sharded) and one TIME.
//
// A worker acknowledges and deletes a job in one step once its execution is saved
// (worker.ts), so a stream holds exactly the jobs not yet done: waiting ones and those
// a worker is running. Its length is the depth; its first entry is the oldest job not
// done, and an entry id starts with the Redis clock (ms) when it was added, so its age
// is Redis' TIME minus that. `entries-added` (Redis 7) minus the length counts the jobs
// ever removed (done), which gives the drain rate between two reads.
//
// Readers: the gateway's QueuedEngine every second (its limit, Retry-After and gauges,
// no Redis command per request), the worker's /metrics at scrape time.
import type { RedisClient } from '../../api/records/redis-client.ts';

export interface QueueState {
  /** Jobs in the streams (waiting or running), summed over the streams. */
  depth: number;
  /** Age of the oldest job not done (0: none), the largest over the streams. */
  oldestAgeSeconds: number;
  /** Jobs ever removed from the streams (done); undefined before Redis 7. */
  removed: number | undefined;
  /** When it was read (Redis clock, ms). */
  at: number;
}

/** XINFO STREAM's reply: a flat list of field names and values. */
type InfoReply = (string | number | [string, string[]] | null | unknown[])[];

function field(reply: InfoReply, name: string): unknown {
  for (let i = 0; i + 1 < reply.length; i += 2) if (reply[i] === name) return reply[i + 1];
  return undefined;
}

/** The ms part of a stream entry id (`<ms>-<seq>`). */
export function entryTime(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

interface StreamInfo {
  length: number;
  firstMs: number | undefined;
  added: number | undefined;
}

async function streamInfo(redis: RedisClient, stream: string): Promise<StreamInfo> {
  let reply: InfoReply;
  try {
    reply = (await redis.xinfo('STREAM', stream)) as InfoReply;
  } catch (error) {
    // No stream yet (no job was ever queued, or no worker created its group): empty.
    if (error instanceof Error && /no such key/i.test(error.message)) {
      return { length: 0, firstMs: undefined, added: 0 };
    }
    throw error;
  }
  const length = Number(field(reply, 'length') ?? 0);
  const first = field(reply, 'first-entry');
  const added = field(reply, 'entries-added');
  return {
    length,
    firstMs: Array.isArray(first) && typeof first[0] === 'string' ? entryTime(first[0]) : undefined,
    added: added === undefined ? undefined : Number(added),
  };
}

/** Reads depth, oldest age and jobs removed over `streams` (one XINFO each, one TIME). */
export async function readQueueState(
  redis: RedisClient,
  streams: readonly string[],
): Promise<QueueState> {
  const [time, ...infos] = await Promise.all([
    redis.time(),
    ...streams.map((stream) => streamInfo(redis, stream)),
  ]);
  const at = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  let depth = 0;
  let oldestMs: number | undefined;
  let removed: number | undefined = 0;
  for (const info of infos) {
    depth += info.length;
    if (info.length > 0 && info.firstMs !== undefined)
      oldestMs = oldestMs === undefined ? info.firstMs : Math.min(oldestMs, info.firstMs);
    removed =
      removed === undefined || info.added === undefined
        ? undefined
        : removed + info.added - info.length;
  }
  const oldestAgeSeconds = oldestMs === undefined ? 0 : Math.max(0, at - oldestMs) / 1000;
  return { depth, oldestAgeSeconds, removed, at };
}

/**
 * The jobs per second the workers finished over the last `windowMs` of reads, from
 * the `removed` counts of successive QueueStates (undefined until two reads span some
 * time, or before Redis 7).
 */
export class DrainRate {
  readonly #windowMs: number;
  readonly #samples: { at: number; removed: number }[] = [];

  constructor(windowMs = 10_000) {
    this.#windowMs = windowMs;
  }

  observe(state: QueueState): void {
    if (state.removed === undefined) {
      this.#samples.length = 0;
      return;
    }
    const last = this.#samples.at(-1);
    // A Redis that lost its data (or another stream) starts the count again.
    if (last && (state.removed < last.removed || state.at < last.at)) this.#samples.length = 0;
    this.#samples.push({ at: state.at, removed: state.removed });
    // Keep one sample at or before the window's start, so the rate spans the window.
    while (
      this.#samples.length > 2 &&
      (this.#samples[1] as { at: number }).at <= state.at - this.#windowMs
    )
      this.#samples.shift();
  }

  /** Jobs finished per second, or undefined when not known. */
  get perSecond(): number | undefined {
    const first = this.#samples[0];
    const last = this.#samples.at(-1);
    if (!first || !last || last.at - first.at < 500) return undefined;
    return ((last.removed - first.removed) * 1000) / (last.at - first.at);
  }
}

export interface RetryAfterOptions {
  depth: number;
  bound: number;
  /** Jobs per second the workers finish now (undefined: not known). */
  drainPerSecond: number | undefined;
  /** Longest advice, also the answer when nothing drains. Default 60 s. */
  maxSeconds?: number;
}

/**
 * Seconds a refused client should wait: the time the workers, at the pace they kept
 * over the last reads, need to make room for a tenth of the bound (so refused clients
 * do not all come back for the same free slot), from 1 s up to `maxSeconds`. Nothing
 * draining (workers stopped or stuck) or a pace not known answers `maxSeconds`.
 */
export function retryAfterSeconds(options: RetryAfterOptions): number {
  const max = options.maxSeconds ?? 60;
  const rate = options.drainPerSecond;
  if (rate === undefined || !(rate > 0)) return max;
  const room = Math.max(1, Math.ceil(options.bound / 10));
  const toFree = Math.max(0, options.depth - options.bound) + room;
  return Math.min(max, Math.max(1, Math.ceil(toFree / rate)));
}
