// The in-memory GCRA limiter on a fake clock: refill, Retry-After, the minute boundary
// (acceptance rule G9: no 2× burst), sliding-window bounds, and the store's eviction.
// The behaviour shared with Redis: rate-limit.contract.test.ts.
import { describe, expect, it } from 'vitest';
import { HttpProblem } from '../../runtime/errors.ts';
import { MemoryGcraStore } from '../../runtime/gateway/security/gcra.ts';
import {
  EndpointRateLimiter,
  type RateLimitDecision,
} from '../../runtime/gateway/security/rate-limit.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { makeRoute } from './fixtures.ts';

const limited = (rpm: number, key = 'shop/limited') =>
  makeRoute({ rateLimit: { requestsPerMinute: rpm, failureMode: 'open', enforce: true } }, {}, key);

/** The memory limiter's answer, which must not be a promise. */
function now(limiter: EndpointRateLimiter, route: RouteRecord): RateLimitDecision {
  const decision = limiter.consume(route);
  if (decision instanceof Promise) throw new Error('the memory limiter returned a promise');
  return decision;
}

/** A limiter on a clock the test moves (ms). */
function onClock(start = 0) {
  const clock = { ms: start };
  const limiter = new EndpointRateLimiter({ now: () => clock.ms });
  /** Fires `n` requests at the current instant; the number admitted. */
  const fire = (route: RouteRecord, n: number) => {
    let admitted = 0;
    for (let i = 0; i < n; i++) {
      try {
        now(limiter, route);
        admitted++;
      } catch (error) {
        if (!(error instanceof HttpProblem) || error.status !== 429) throw error;
      }
    }
    return admitted;
  };
  const rejection = (route: RouteRecord) => {
    try {
      now(limiter, route);
    } catch (error) {
      if (error instanceof HttpProblem) return error;
      throw error;
    }
    throw new Error('expected a 429');
  };
  return { clock, limiter, fire, rejection };
}

describe('EndpointRateLimiter (memory, fake clock)', () => {
  it('answers synchronously: a decision or a thrown 429, no promise on the hot path', () => {
    const { limiter, rejection } = onClock();
    const route = limited(1);
    expect(limiter.consume(route)).toMatchObject({ degraded: false }); // not a promise
    expect(rejection(route).code).toBe('HG_ERR_RATE_LIMITED');
    expect(now(limiter, makeRoute())).toEqual({ headers: {}, degraded: false });
  });

  it('N at once, then one per 60/N s: Retry-After counts down to the next slot', () => {
    const { clock, limiter, fire, rejection } = onClock();
    const route = limited(2); // one every 30 s
    expect(fire(route, 2)).toBe(2);
    let problem = rejection(route);
    expect(problem.headers['Retry-After']).toBe('30');
    expect(problem.headers['RateLimit-Reset']).toBe('60');
    clock.ms += 29_000;
    problem = rejection(route);
    expect(problem.headers['Retry-After']).toBe('1');
    expect(problem.headers['RateLimit-Reset']).toBe('31');
    clock.ms += 1_000; // exactly Retry-After later: admitted
    const headers = now(limiter, route).headers;
    expect(headers['RateLimit-Remaining']).toBe('0');
    expect(headers['RateLimit-Reset']).toBe('60');
    expect(rejection(route).headers['Retry-After']).toBe('30');
  });

  it('no 2× burst across a minute boundary (a fixed window would pass 2N in 0.2 s)', () => {
    // 08:00:59.900 on the clock, then 08:01:00.100.
    const { clock, fire } = onClock(8 * 3_600_000 + 59_900);
    const route = limited(10); // one every 6 s
    expect(fire(route, 100)).toBe(10);
    clock.ms += 200;
    expect(fire(route, 100)).toBe(0);
    clock.ms += 5_800; // one interval after the burst
    expect(fire(route, 100)).toBe(1);
  });

  it('a client firing constantly for 3 minutes: N + one per interval; at most N + ⌈w/T⌉ − 1 in any w, 2N − 1 in 60 s', () => {
    const { clock, fire } = onClock();
    const route = limited(10); // T = 6 s
    const admittedAt: number[] = [];
    for (clock.ms = 0; clock.ms <= 180_000; clock.ms += 100) {
      const n = fire(route, 11);
      for (let i = 0; i < n; i++) admittedAt.push(clock.ms);
    }
    expect(admittedAt).toHaveLength(10 + 30); // the burst, then one every 6 s
    const most = (w: number) =>
      Math.max(...admittedAt.map((t) => admittedAt.filter((u) => u >= t && u < t + w).length));
    expect(most(1_000)).toBe(10);
    expect(most(6_000)).toBe(10);
    expect(most(10_000)).toBe(11);
    expect(most(60_000)).toBe(19);
    expect(most(120_000)).toBe(29);
  });

  it('a quiet minute restores the full limit', () => {
    const { clock, fire } = onClock();
    const route = limited(10);
    expect(fire(route, 50)).toBe(10);
    clock.ms += 59_999;
    expect(fire(route, 50)).toBe(9);
    clock.ms += 60_000;
    expect(fire(route, 50)).toBe(10);
  });

  it('forget drops a route’s state', () => {
    const { limiter, fire } = onClock();
    const route = limited(3);
    expect(fire(route, 5)).toBe(3);
    limiter.forget(route.key);
    expect(fire(route, 5)).toBe(3);
  });
});

describe('MemoryGcraStore', () => {
  it('one cell per key, reused; drained cells are swept when the map has doubled', () => {
    const clock = { ms: 0 };
    const store = new MemoryGcraStore(() => clock.ms);
    for (let i = 0; i < 100; i++) store.take('same', 1000);
    expect(store.size).toBe(1);
    for (let i = 1; i < 1023; i++) store.take(`k${i}`, 10);
    expect(store.size).toBe(1023);
    clock.ms += 6_000; // every cell has drained (one request = 6 s at 10/min)
    store.take('live', 10); // the 1024th key: a sweep keeps only live cells
    expect(store.size).toBe(1);
    for (let i = 0; i < 1023; i++) store.take(`m${i}`, 10);
    expect(store.size).toBe(1024); // all live: nothing to drop
    expect(store.take('live', 10)).toMatchObject({ allowed: true, remaining: 8 });
  });
});
