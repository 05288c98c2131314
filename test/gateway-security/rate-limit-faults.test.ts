// The rate limiter behind a faulty network (acceptance rules G10 and E5): a TCP proxy
// between the gateway's Redis client and a real redis-server adds latency, swallows
// traffic (blackhole) or resets connections. Asserted: the decision each failure mode
// gives, the time it takes (the limiter's 250 ms budget), and the outcomes the metrics
// count (allowed, rejected, failed_open, failed_closed). Frozen, stopped and absent
// Redis servers: rate-limit-redis.test.ts.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { createGuards } from '../../runtime/gateway/guards.ts';
import {
  EndpointRateLimiter,
  type RateLimitOutcome,
} from '../../runtime/gateway/security/rate-limit.ts';
import { eventually } from '../support/eventually.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { makeRoute } from './fixtures.ts';

const TIMEOUT_MS = 250;

const route = (rpm: number, key: string, failureMode: 'open' | 'closed' = 'open') =>
  makeRoute({ rateLimit: { requestsPerMinute: rpm, failureMode, enforce: true } }, {}, key);

describe.skipIf(!redisAvailable())('the rate limiter behind a faulty network', () => {
  let server: RedisServer;
  let proxy: FaultProxy;
  let redis: Redis;
  const outcomes: RateLimitOutcome[] = [];
  let guards: ReturnType<typeof createGuards>;
  let n = 0;
  const fresh = (label: string) => `shop/${label}-${Date.now()}-${n++}`;

  beforeAll(async () => {
    server = await startRedis();
    proxy = await startFaultProxy({ port: server.port });
    // As the gateway's limiter connection is made: no offline queue, quick reconnects.
    redis = new Redis({
      host: '127.0.0.1',
      port: proxy.port,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 50,
    });
    redis.on('error', () => {});
    await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
    guards = createGuards({
      rateLimiter: new EndpointRateLimiter({ redis, timeoutMs: TIMEOUT_MS }),
      onRateLimit: (outcome) => outcomes.push(outcome),
    });
  });
  afterAll(async () => {
    redis?.disconnect();
    await proxy?.close();
    await server?.stop();
  });

  /** One decision: its headers or problem, how long it took, and what was counted. */
  async function decide(r: RouteRecord, by = guards) {
    const before = outcomes.length;
    const started = performance.now();
    let headers: Record<string, string> | undefined;
    let problem: HttpProblem | undefined;
    try {
      headers = await by.rateLimit(r);
    } catch (error) {
      if (!(error instanceof HttpProblem)) throw error;
      problem = error;
    }
    return {
      headers,
      problem,
      ms: performance.now() - started,
      counted: outcomes.slice(before),
    };
  }

  it('latency under the budget: exact decisions, each as slow as the network', async () => {
    // A limiter of its own with a budget no loaded machine reaches: this case is about
    // the decisions, not the budget.
    const patient = createGuards({
      rateLimiter: new EndpointRateLimiter({ redis, timeoutMs: 5_000 }),
      onRateLimit: (outcome) => outcomes.push(outcome),
    });
    proxy.set({ kind: 'latency', ms: 60 });
    try {
      const r = route(3, fresh('slow'));
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await decide(r, patient));
      expect(answers.map((a) => a.headers?.['RateLimit-Remaining'])).toEqual([
        '2',
        '1',
        '0',
        undefined,
      ]);
      expect(answers[3]?.problem?.code).toBe('HG_ERR_RATE_LIMITED');
      expect(answers.flatMap((a) => a.counted)).toEqual([
        'allowed',
        'allowed',
        'allowed',
        'rejected',
      ]);
      // There and back: at least twice the added latency.
      for (const a of answers) expect(a.ms).toBeGreaterThanOrEqual(115);
    } finally {
      proxy.set({ kind: 'pass' });
    }
  });

  for (const fault of [{ kind: 'latency', ms: 600 }, { kind: 'blackhole' }] as const) {
    it(`${fault.kind === 'latency' ? 'latency past the budget' : 'a blackhole'}: decided without the store after the budget, open passes, closed refuses`, async () => {
      const r = route(100, fresh(fault.kind));
      expect((await decide(r)).counted).toEqual(['allowed']);
      proxy.set(fault);
      try {
        const open = await decide(r);
        expect(open.headers).toEqual({});
        expect(open.counted).toEqual(['failed_open']);
        const closed = await decide(route(100, fresh(`${fault.kind}-closed`), 'closed'));
        expect(closed.problem?.code).toBe('HG_ERR_RATE_LIMIT_UNAVAILABLE');
        expect(closed.counted).toEqual(['failed_closed']);
        for (const d of [open, closed]) {
          expect(d.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
          expect(d.ms).toBeLessThan(1_000);
        }
      } finally {
        proxy.set({ kind: 'pass' });
      }
      // The late answers arrive in order; counting goes on from where Redis is: the
      // request let through without the store was counted there all the same.
      await eventually(async () => {
        const after = await decide(r);
        expect(after.counted).toEqual(['allowed']);
        expect(Number(after.headers?.['RateLimit-Remaining'])).toBeLessThanOrEqual(97);
      }, 5_000);
    });
  }

  it('connections reset: decided without the store at once (no wait for the budget); back after', async () => {
    const r = route(100, fresh('reset'));
    expect((await decide(r)).counted).toEqual(['allowed']);
    proxy.set({ kind: 'reset' });
    try {
      await eventually(() => expect(redis.status).not.toBe('ready'), 2_000, 10);
      const open = await decide(r);
      expect(open.headers).toEqual({});
      expect(open.counted).toEqual(['failed_open']);
      expect(open.ms).toBeLessThan(TIMEOUT_MS);
      const closed = await decide(route(100, fresh('reset-closed'), 'closed'));
      expect(closed.problem?.code).toBe('HG_ERR_RATE_LIMIT_UNAVAILABLE');
      expect(closed.counted).toEqual(['failed_closed']);
    } finally {
      proxy.set({ kind: 'pass' });
    }
    await eventually(() => expect(redis.status).toBe('ready'), 5_000, 20);
    const after = await decide(r);
    expect(after.counted).toEqual(['allowed']);
    // The request decided without the store never reached it.
    expect(after.headers?.['RateLimit-Remaining']).toBe('98');
  });
});
