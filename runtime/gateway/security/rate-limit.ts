// Per-endpoint rate limit (spec: "integer requests per minute … shared by all enabled
// methods"; DESIGN: 429 with Retry-After and RateLimit headers; acceptance rules G9, G10).
//
// Algorithm: rate-limiter-flexible's fixed 60-second window per endpoint, counted in
// memory (single process, `hookgate dev`) or in Redis (all gateway replicas share one
// counter through the same keyPrefix). In Redis the check-and-increment is one atomic
// Lua script (SET NX EX + INCRBY + PTTL) and the window expiry is Redis's own TTL clock,
// so a key never outlives its window and replicas' clocks do not matter.
// Boundary behaviour (honest): a fixed window admits up to `requestsPerMinute` per
// window, so a burst at the end of one window followed by one at the start of the next
// can pass up to 2 × the limit within a few seconds. rate-limiter-flexible has no
// sliding-window or GCRA limiter, and a custom script cannot carry per-endpoint limits
// through its command interface; this is accepted for v1alpha1 and documented.
//
// Headers (every request on a limited endpoint): `RateLimit-Limit`, `RateLimit-Remaining`,
// `RateLimit-Reset` (seconds until the window resets; the widely implemented
// draft-polli-ratelimit-headers-02 trio) and `RateLimit-Policy: <n>;w=60`. A rejection adds
// `Retry-After` (seconds, at least 1).
//
// Store failures (a plain Error, or no answer within timeoutMs) are told apart from a
// rejection (a RateLimiterRes). failureMode open → the request passes without RateLimit
// headers (like Kong's fault_tolerant); closed → 503 rate-limit-unavailable.
import type { Redis } from 'ioredis';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { HttpProblem } from '../../errors.ts';
import type { RouteRecord } from '../../stores/ports.ts';

export const RATE_LIMIT_KEY_PREFIX = 'hookgate:rl';
export const WINDOW_SECONDS = 60;
export const DEFAULT_STORE_TIMEOUT_MS = 250;

export interface RateLimitDecision {
  /** Headers to add to the answer (empty when the endpoint has no limit or the store failed open). */
  headers: Record<string, string>;
  /** True when the limiter store failed and failureMode open let the request through. */
  degraded: boolean;
}

export interface EndpointRateLimiterOptions {
  /**
   * Shared Redis client; without it the counts are kept in this process. Recommended
   * client options: `enableOfflineQueue: false` and a small `maxRetriesPerRequest`.
   */
  redis?: Redis;
  /** Key prefix shared by every gateway replica (default hookgate:rl). */
  keyPrefix?: string;
  /** A store call slower than this counts as a store failure (default 250 ms). */
  timeoutMs?: number;
}

class StoreTimeout extends Error {}

export class EndpointRateLimiter {
  readonly #redis: Redis | undefined;
  readonly #keyPrefix: string;
  readonly #timeoutMs: number;
  readonly #limiters = new Map<string, { rpm: number; limiter: RateLimiterAbstract }>();

  constructor(opts: EndpointRateLimiterOptions = {}) {
    this.#redis = opts.redis;
    this.#keyPrefix = opts.keyPrefix ?? RATE_LIMIT_KEY_PREFIX;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  }

  /** The limiter for a route, rebuilt when its requestsPerMinute changes. */
  #limiterFor(routeKey: string, rpm: number): RateLimiterAbstract {
    const cached = this.#limiters.get(routeKey);
    if (cached && cached.rpm === rpm) return cached.limiter;
    const common = { points: rpm, duration: WINDOW_SECONDS, keyPrefix: this.#keyPrefix };
    const limiter = this.#redis
      ? new RateLimiterRedis({ ...common, storeClient: this.#redis, rejectIfRedisNotReady: true })
      : new RateLimiterMemory(common);
    this.#limiters.set(routeKey, { rpm, limiter });
    return limiter;
  }

  /** Drops the limiter of a removed route. */
  forget(routeKey: string): void {
    this.#limiters.delete(routeKey);
  }

  /**
   * Counts one request against the route's limit. Resolves with the headers to send;
   * throws 429 rate-limited (with Retry-After) over the limit, or 503
   * rate-limit-unavailable when the store fails and failureMode is closed.
   */
  async check(route: RouteRecord): Promise<RateLimitDecision> {
    const config = route.spec.rateLimit;
    if (!config) return { headers: {}, degraded: false };
    const rpm = config.requestsPerMinute;
    const limiter = this.#limiterFor(route.key, rpm);
    let outcome: RateLimiterRes;
    try {
      outcome = await this.#withTimeout(limiter.consume(route.key, 1));
    } catch (error) {
      if (error instanceof RateLimiterRes) {
        const headers = rateLimitHeaders(rpm, error);
        const retryAfter = headers['RateLimit-Reset'] ?? '1';
        throw new HttpProblem(
          'HG_ERR_RATE_LIMITED',
          `This endpoint accepts ${rpm} requests per minute; retry after ${retryAfter} s.`,
          { headers: { ...headers, 'Retry-After': retryAfter } },
        );
      }
      if ((config.failureMode ?? 'open') === 'closed') {
        throw new HttpProblem(
          'HG_ERR_RATE_LIMIT_UNAVAILABLE',
          'The rate limiter is unavailable and this endpoint does not accept requests without it.',
          { headers: { 'Retry-After': '1' } },
        );
      }
      return { headers: {}, degraded: true };
    }
    return { headers: rateLimitHeaders(rpm, outcome), degraded: false };
  }

  #withTimeout<T>(promise: Promise<T>): Promise<T> {
    if (!this.#redis) return promise; // the memory store answers synchronously
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new StoreTimeout('rate limiter store timed out')),
        this.#timeoutMs,
      );
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }
}

function rateLimitHeaders(limit: number, res: RateLimiterRes): Record<string, string> {
  const resetSeconds = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  return {
    'RateLimit-Limit': String(limit),
    'RateLimit-Remaining': String(Math.max(0, res.remainingPoints)),
    'RateLimit-Reset': String(resetSeconds),
    'RateLimit-Policy': `${limit};w=${WINDOW_SECONDS}`,
  };
}
