// Per-endpoint rate limit (spec: "integer requests per minute … shared by all enabled
// methods"; DESIGN: 429 with Retry-After and RateLimit headers; acceptance rules G9, G10).
//
// Algorithm: GCRA (gcra.ts), counted in memory (single process, `hookgate dev`) or in
// Redis (gcra-redis.ts: one atomic Lua script on Redis's clock, shared by every gateway
// replica through the same key prefix). A limit of N per minute lets a quiet endpoint
// take N requests at once, then one more every 60/N s: never twice the limit across a
// minute boundary (ADR 0011).
//
// Headers (every request on a limited endpoint): `RateLimit-Limit`, `RateLimit-Remaining`
// (requests that would pass right now), `RateLimit-Reset` (seconds until the full limit
// is available again; the widely implemented draft-polli-ratelimit-headers-02 trio) and
// `RateLimit-Policy: <n>;w=60`. A rejection adds `Retry-After` (seconds until one request
// passes again, at least 1).
//
// Shadow mode (`enforce: false`, acceptance rule E3 after Envoy's filter_enforced): the
// count is kept as when enforcing, but a request over the limit is let through, marked
// `shadowed` for the metrics, and no RateLimit header is sent (the limit is measured,
// not announced). A store failure fails open whatever `failureMode` says. A request
// GCRA refuses does not advance its state in either mode, so the shadowed count is what
// enforcing would have refused.
//
// Store failures (a Redis error, a client that is not connected, or no answer within
// timeoutMs) are told apart from a rejection. failureMode open → the request passes
// without RateLimit headers (like Kong's fault_tolerant); closed → 503
// rate-limit-unavailable.
import type { RedisClient } from '../../../api/records/redis-client.ts';
import { HttpProblem } from '../../errors.ts';
import type { RouteRecord } from '../../../api/records/records.ts';
import { MemoryGcraStore, WINDOW_SECONDS, type GcraResult } from './gcra.ts';
import { RedisGcraStore } from './gcra-redis.ts';

export { WINDOW_SECONDS } from './gcra.ts';
/** Redis keys are `<prefix>:<route key>` (not the fixed-window limiter's hookgate:rl). */
export const RATE_LIMIT_KEY_PREFIX = 'hookgate:gcra';
export const DEFAULT_STORE_TIMEOUT_MS = 250;

/**
 * What became of a request on a limited endpoint, for metrics: `shadowed` when shadow
 * mode let a request over the limit through; `failed_open` and `failed_closed` when the
 * store failed (or did not answer in time) and the endpoint's failureMode let the
 * request through without a limit, or refused it (503 rate-limit-unavailable).
 */
export type RateLimitOutcome =
  'allowed' | 'rejected' | 'shadowed' | 'failed_open' | 'failed_closed';

export interface RateLimitDecision {
  /** Headers to add to the answer (empty when the endpoint has no limit or the store failed open). */
  headers: Record<string, string>;
  /** True when the limiter store failed and failureMode open let the request through. */
  degraded: boolean;
  /** True when the request was over the limit and shadow mode let it through. */
  shadowed?: boolean;
}

export interface EndpointRateLimiterOptions {
  /**
   * Shared Redis client; without it the counts are kept in this process. Recommended
   * client options: `enableOfflineQueue: false` and a small `maxRetriesPerRequest`.
   */
  redis?: RedisClient;
  /** Key prefix shared by every gateway replica (default hookgate:gcra). */
  keyPrefix?: string;
  /** A store call slower than this counts as a store failure (default 250 ms). */
  timeoutMs?: number;
  /** The in-memory store's clock: monotonic milliseconds (default performance.now; tests). */
  now?: () => number;
}

export class EndpointRateLimiter {
  readonly #store: MemoryGcraStore | RedisGcraStore;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;

  constructor(opts: EndpointRateLimiterOptions = {}) {
    this.#store = opts.redis ? new RedisGcraStore(opts.redis) : new MemoryGcraStore(opts.now);
    this.#keyPrefix = `${opts.keyPrefix ?? RATE_LIMIT_KEY_PREFIX}:`;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  }

  /** Drops a removed route's in-memory state (Redis state expires on its own). */
  forget(routeKey: string): void {
    if (this.#store instanceof MemoryGcraStore) this.#store.delete(routeKey);
  }

  /**
   * Counts one request against the route's limit. Resolves with the headers to send;
   * rejects with 429 rate-limited (with Retry-After) over the limit, or 503
   * rate-limit-unavailable when the store fails and failureMode is closed.
   */
  async check(route: RouteRecord): Promise<RateLimitDecision> {
    return await this.consume(route);
  }

  /**
   * `check` without a promise where none is needed: the in-memory store answers (or
   * throws the HttpProblem) synchronously; the Redis store returns a promise.
   */
  consume(route: RouteRecord): RateLimitDecision | Promise<RateLimitDecision> {
    const config = route.spec.rateLimit;
    if (!config) return { headers: {}, degraded: false };
    const limit = config.requestsPerMinute;
    const shadow = config.enforce === false;
    const store = this.#store;
    if (store instanceof MemoryGcraStore)
      return decide(limit, store.take(route.key, limit), shadow);
    // Shadow mode refuses nothing, a store failure included.
    const closed = config.failureMode === 'closed' && !shadow;
    return this.#decideWithin(
      store.take(this.#keyPrefix + route.key, limit),
      limit,
      closed,
      shadow,
    );
  }

  /**
   * The decision on the store's answer, or the store failure when it errs or does not
   * answer within timeoutMs. One promise and one timer per call: this runs for every
   * request to a limited endpoint (a race against a timeout promise made five).
   */
  #decideWithin(
    answer: Promise<GcraResult>,
    limit: number,
    closed: boolean,
    shadow: boolean,
  ): Promise<RateLimitDecision> {
    return new Promise<RateLimitDecision>((resolve, reject) => {
      let settled = false;
      const settle = (result: GcraResult | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        try {
          resolve(result ? decide(limit, result, shadow) : storeFailed(closed));
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      };
      const timer = setTimeout(settle, this.#timeoutMs, undefined);
      answer.then(settle, () => settle(undefined));
    });
  }
}

const SHADOWED: RateLimitDecision = { headers: {}, degraded: false, shadowed: true };
const UNANNOUNCED: RateLimitDecision = { headers: {}, degraded: false };

function decide(limit: number, result: GcraResult, shadow: boolean): RateLimitDecision {
  if (shadow) return result.allowed ? UNANNOUNCED : SHADOWED;
  const headers = rateLimitHeaders(limit, result);
  if (result.allowed) return { headers, degraded: false };
  const retryAfter = String(Math.max(1, Math.ceil(result.retryAfterUs / 1e6)));
  throw new HttpProblem(
    'HG_ERR_RATE_LIMITED',
    `This endpoint accepts ${limit} requests per minute; retry after ${retryAfter} s.`,
    { headers: { ...headers, 'Retry-After': retryAfter } },
  );
}

function storeFailed(closed: boolean): RateLimitDecision {
  if (closed) {
    throw new HttpProblem(
      'HG_ERR_RATE_LIMIT_UNAVAILABLE',
      'The rate limiter is unavailable and this endpoint does not accept requests without it.',
      { headers: { 'Retry-After': '1' } },
    );
  }
  return { headers: {}, degraded: true };
}

function rateLimitHeaders(limit: number, result: GcraResult): Record<string, string> {
  // The interval is rounded up to a whole µs, so a full backlog can exceed 60 s by
  // less than `limit` µs: never announce more than the window.
  const reset = Math.min(WINDOW_SECONDS, Math.max(1, Math.ceil(result.resetAfterUs / 1e6)));
  return {
    'RateLimit-Limit': String(limit),
    'RateLimit-Remaining': String(result.remaining),
    'RateLimit-Reset': String(reset),
    'RateLimit-Policy': `${limit};w=${WINDOW_SECONDS}`,
  };
}
