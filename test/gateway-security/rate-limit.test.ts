import { afterEach, describe, expect, it, vi } from 'vitest';
import { HttpProblem } from '../../runtime/errors.ts';
import { EndpointRateLimiter } from '../../runtime/gateway/security/rate-limit.ts';
import { burst, makeRoute, problemOf } from './fixtures.ts';

const limited = (rpm: number, key = 'shop/limited', failureMode: 'open' | 'closed' = 'open') =>
  makeRoute(
    { methods: ['POST', 'GET'], rateLimit: { requestsPerMinute: rpm, failureMode } },
    {},
    key,
  );

describe('EndpointRateLimiter (memory)', () => {
  afterEach(() => vi.useRealTimers());

  it('no rateLimit: no headers, never limited', async () => {
    const limiter = new EndpointRateLimiter();
    for (let i = 0; i < 5; i++) {
      expect(await limiter.check(makeRoute())).toEqual({ headers: {}, degraded: false });
    }
  });

  it('admits exactly N of many concurrent requests; the rest get 429 with Retry-After', async () => {
    const limiter = new EndpointRateLimiter();
    const { admitted, rejected, other } = await burst([limiter], limited(37), 500);
    expect(admitted).toBe(37);
    expect(other).toBe(0);
    expect(rejected).toHaveLength(463);
    for (const problem of rejected) {
      expect(problem.code).toBe('HG_ERR_RATE_LIMITED');
      expect(problem.status).toBe(429);
      const retryAfter = Number(problem.headers['Retry-After']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(problem.headers['RateLimit-Remaining']).toBe('0');
      expect(problem.headers['RateLimit-Limit']).toBe('37');
    }
  });

  it('sends RateLimit headers on every admitted request, counting down', async () => {
    const limiter = new EndpointRateLimiter();
    const route = limited(3, 'shop/headers');
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push((await limiter.check(route)).headers);
    expect(seen.map((h) => h['RateLimit-Remaining'])).toEqual(['2', '1', '0']);
    for (const headers of seen) {
      expect(headers['RateLimit-Limit']).toBe('3');
      expect(headers['RateLimit-Policy']).toBe('3;w=60');
      expect(Number(headers['RateLimit-Reset'])).toBeGreaterThanOrEqual(1);
      expect(Number(headers['RateLimit-Reset'])).toBeLessThanOrEqual(60);
      expect(headers).not.toHaveProperty('Retry-After');
    }
    expect((await problemOf(() => limiter.check(route))).code).toBe('HG_ERR_RATE_LIMITED');
  });

  it('endpoints are counted separately', async () => {
    const limiter = new EndpointRateLimiter();
    const a = limited(2, 'shop/a');
    const b = limited(2, 'shop/b');
    await limiter.check(a);
    await limiter.check(a);
    await expect(limiter.check(a)).rejects.toBeInstanceOf(HttpProblem);
    await expect(limiter.check(b)).resolves.toMatchObject({ degraded: false });
  });

  it('a changed limit takes effect at once (new limiter for the new value)', async () => {
    const limiter = new EndpointRateLimiter();
    await limiter.check(limited(1, 'shop/change'));
    await expect(limiter.check(limited(1, 'shop/change'))).rejects.toBeInstanceOf(HttpProblem);
    const raised = await limiter.check(limited(5, 'shop/change'));
    expect(raised.headers['RateLimit-Limit']).toBe('5');
  });

  it('fixed 60 s window: Retry-After counts down, the window resets, boundary admits 2N', async () => {
    vi.useFakeTimers({ now: new Date('2026-11-23T08:00:00Z') });
    const limiter = new EndpointRateLimiter();
    const route = limited(2, 'shop/window');
    await limiter.check(route);
    await limiter.check(route);
    const first = await problemOf(() => limiter.check(route));
    expect(first.headers['Retry-After']).toBe('60');
    vi.advanceTimersByTime(45_000);
    const later = await problemOf(() => limiter.check(route));
    expect(later.headers['Retry-After']).toBe('15');
    vi.advanceTimersByTime(15_001);
    // a new window: the limit is available again. Two requests at the end of the
    // previous window plus two now = 2 × limit within ~15 s (documented boundary).
    expect((await limiter.check(route)).headers['RateLimit-Remaining']).toBe('1');
    expect((await limiter.check(route)).headers['RateLimit-Remaining']).toBe('0');
    await expect(limiter.check(route)).rejects.toBeInstanceOf(HttpProblem);
  });
});
