// GCRA (generic cell rate algorithm, as in go-redis/redis_rate) for "N requests per
// minute", and its in-memory store. The Redis store (gcra-redis.ts) runs the same
// step in Lua; keep the two in step.
//
// A limit of N per minute has an emission interval T = ceil(60 s / N) (whole
// microseconds, so every sum below is exact integer arithmetic) and a burst tolerance
// of N·T: the state is one number per endpoint, the theoretical arrival time (TAT).
// `backlog = max(0, TAT − now)` is the part of the minute already spent; a request is
// admitted when `backlog + T <= N·T`, which moves TAT to `now + backlog + T`.
// Consequences (tested in test/gateway-security/rate-limit*.test.ts):
// - a quiet endpoint takes N requests at once (of many concurrent, exactly N pass);
// - after that, one more per T: in any interval of w seconds at most N + ⌊w/T⌋ pass,
//   so there is no 2N burst at a minute boundary (a fixed window's flaw); a full
//   burst followed by a whole minute at the sustained rate is the worst case, 2N − 1
//   within any 60 s;
// - a rejection changes nothing (a client hammering a full endpoint does not push its
//   own retry further out);
// - when the limit changes, the backlog is rescaled to the new interval (the requests
//   already counted carry over, capped at the new limit).

export const WINDOW_SECONDS = 60;
export const WINDOW_US = WINDOW_SECONDS * 1_000_000;

/** The emission interval of a limit of `limit` requests per minute, in µs (rounded up). */
export function emissionIntervalUs(limit: number): number {
  return Math.ceil(WINDOW_US / limit);
}

export interface GcraResult {
  allowed: boolean;
  /** Requests that would still pass right now, after this one. */
  remaining: number;
  /** Rejected: µs until one request passes again (0 when allowed). */
  retryAfterUs: number;
  /** µs until the full limit is available again (the backlog drains). */
  resetAfterUs: number;
}

/** One endpoint's state: its TAT and the interval it was counted with (both µs). */
export interface GcraCell {
  tat: number;
  interval: number;
}

/**
 * One GCRA step at `now` (µs). Returns the outcome and the cell to store, or no cell
 * when nothing changed (a rejection at an unchanged limit).
 */
export function gcraStep(
  cell: GcraCell | undefined,
  now: number,
  limit: number,
): { result: GcraResult; next?: GcraCell } {
  const interval = emissionIntervalUs(limit);
  const tolerance = limit * interval;
  let backlog = cell ? Math.max(0, cell.tat - now) : 0;
  let rescaled = false;
  if (cell && backlog > 0 && cell.interval !== interval) {
    backlog = Math.min(Math.ceil((backlog * interval) / cell.interval), tolerance);
    rescaled = true;
  }
  const after = backlog + interval;
  if (after > tolerance) {
    const result = {
      allowed: false,
      remaining: 0,
      retryAfterUs: after - tolerance,
      resetAfterUs: backlog,
    };
    return rescaled ? { result, next: { tat: now + backlog, interval } } : { result };
  }
  return {
    result: {
      allowed: true,
      remaining: Math.floor((tolerance - after) / interval),
      retryAfterUs: 0,
      resetAfterUs: after,
    },
    next: { tat: now + after, interval },
  };
}

const SWEEP_MIN = 1024;

/**
 * In-process GCRA state: a Map of cells, O(1) per request, no timers. A drained cell
 * (TAT in the past) means the same as no cell; drained cells are swept when the map
 * has doubled since the last sweep (amortised O(1)).
 */
export class MemoryGcraStore {
  readonly #cells = new Map<string, GcraCell>();
  readonly #nowUs: () => number;
  #sweepAt = SWEEP_MIN;

  /** `now`: a monotonic clock in milliseconds (default performance.now). */
  constructor(now: () => number = () => performance.now()) {
    this.#nowUs = () => Math.floor(now() * 1000);
  }

  /** Cells held (drained ones included until the next sweep). */
  get size(): number {
    return this.#cells.size;
  }

  take(key: string, limit: number): GcraResult {
    const now = this.#nowUs();
    const cell = this.#cells.get(key);
    const { result, next } = gcraStep(cell, now, limit);
    if (next) {
      if (cell) {
        cell.tat = next.tat;
        cell.interval = next.interval;
      } else {
        this.#cells.set(key, next);
        if (this.#cells.size >= this.#sweepAt) this.#sweep(now);
      }
    }
    return result;
  }

  delete(key: string): void {
    this.#cells.delete(key);
  }

  #sweep(now: number): void {
    for (const [key, cell] of this.#cells) if (cell.tat <= now) this.#cells.delete(key);
    this.#sweepAt = Math.max(SWEEP_MIN, this.#cells.size * 2);
  }
}
