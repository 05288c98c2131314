// Port of client-go's util/workqueue/default_rate_limiters.go. A rate limiter answers
// "how long must this key wait before it is retried"; the work queue asks it on every
// `addRateLimited` and tells it to `forget` a key once the key has succeeded.
import { realClock, type Clock } from './clock.ts';

export interface RateLimiter {
  /** Delay in milliseconds before `key` may be retried; records one more failure. */
  when(key: string): number;
  /** Stop tracking `key` (it succeeded): its backoff starts over next time. */
  forget(key: string): void;
  /** How many failures are currently recorded for `key`. */
  numRequeues(key: string): number;
}

/** `base·2^failures`, capped at `max` (client-go ItemExponentialFailureRateLimiter). */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  readonly #failures = new Map<string, number>();
  readonly #baseMs: number;
  readonly #maxMs: number;

  constructor(baseMs: number, maxMs: number) {
    this.#baseMs = baseMs;
    this.#maxMs = maxMs;
  }

  when(key: string): number {
    const exp = this.#failures.get(key) ?? 0;
    this.#failures.set(key, exp + 1);
    // 2^exp overflows to Infinity past exp≈1023; min() then yields the cap, like client-go.
    const backoff = this.#baseMs * 2 ** exp;
    return Number.isFinite(backoff) ? Math.min(backoff, this.#maxMs) : this.#maxMs;
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}

/** `fast` for the first `maxFastAttempts` failures, then `slow` (client-go ItemFastSlowRateLimiter). */
export class ItemFastSlowRateLimiter implements RateLimiter {
  readonly #failures = new Map<string, number>();
  readonly #fastMs: number;
  readonly #slowMs: number;
  readonly #maxFastAttempts: number;

  constructor(fastMs: number, slowMs: number, maxFastAttempts: number) {
    this.#fastMs = fastMs;
    this.#slowMs = slowMs;
    this.#maxFastAttempts = maxFastAttempts;
  }

  when(key: string): number {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    return n <= this.#maxFastAttempts ? this.#fastMs : this.#slowMs;
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}

/**
 * An overall token bucket (client-go BucketRateLimiter over golang.org/x/time/rate):
 * every `when` reserves one token; tokens may go negative, and the delay is the time
 * until the bucket is back at zero. It does not track keys.
 */
export class BucketRateLimiter implements RateLimiter {
  readonly #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;

  constructor(qps: number, burst: number, clock: Clock = realClock) {
    this.#qps = qps;
    this.#burst = burst;
    this.#clock = clock;
    this.#tokens = burst;
    this.#last = clock.now();
  }

  when(_key: string): number {
    this.#advance();
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#qps) * 1000;
  }

  /** Take a token if one is available now (rate.Limiter.Allow); never goes into debt. */
  allow(): boolean {
    this.#advance();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  #advance(): void {
    const now = this.#clock.now();
    const elapsed = Math.max(0, now - this.#last);
    this.#tokens = Math.min(this.#burst, this.#tokens + (elapsed * this.#qps) / 1000);
    this.#last = Math.max(this.#last, now);
  }

  forget(_key: string): void {}

  numRequeues(_key: string): number {
    return 0;
  }
}

/** The worst (longest) answer of several limiters (client-go MaxOfRateLimiter). */
export class MaxOfRateLimiter implements RateLimiter {
  readonly #limiters: RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.#limiters = limiters;
  }

  when(key: string): number {
    let max = 0;
    for (const l of this.#limiters) max = Math.max(max, l.when(key));
    return max;
  }

  forget(key: string): void {
    for (const l of this.#limiters) l.forget(key);
  }

  numRequeues(key: string): number {
    let max = 0;
    for (const l of this.#limiters) max = Math.max(max, l.numRequeues(key));
    return max;
  }
}

/** Per-item backoff 5 ms·2^n capped at 1000 s. */
export const DEFAULT_ITEM_BASE_MS = 5;
export const DEFAULT_ITEM_MAX_MS = 1000 * 1000;
/** Overall bucket: 10 qps, burst 100. */
export const DEFAULT_BUCKET_QPS = 10;
export const DEFAULT_BUCKET_BURST = 100;

/**
 * client-go's DefaultTypedControllerRateLimiter: the max of a per-item exponential
 * backoff (5 ms·2^n, cap 1000 s) and an overall 10 qps / burst 100 token bucket.
 */
export function defaultControllerRateLimiter(clock: Clock = realClock): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter(DEFAULT_ITEM_BASE_MS, DEFAULT_ITEM_MAX_MS),
    new BucketRateLimiter(DEFAULT_BUCKET_QPS, DEFAULT_BUCKET_BURST, clock),
  );
}
