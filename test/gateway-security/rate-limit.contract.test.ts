// One rate-limit contract (GCRA, acceptance rule G9), two adapters: memory (on a frozen
// clock) and Redis (three limiter instances on three connections to one real
// redis-server, i.e. three gateway replicas). Redis runs on real time: every case here
// finishes well within one emission interval, so the counts are exact on both.
// Time-dependent behaviour: rate-limit.test.ts (memory, fake clock) and
// rate-limit-redis.test.ts (TTL, real-time refill, store failures).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EndpointRateLimiter } from '../../runtime/gateway/security/rate-limit.ts';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { connectRedis } from '../../roles/redis.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { burst, makeRoute, problemOf } from './fixtures.ts';

const limited = (rpm: number, key: string) =>
  makeRoute(
    {
      methods: ['POST', 'GET'],
      rateLimit: { requestsPerMinute: rpm, failureMode: 'open', enforce: true },
    },
    {},
    key,
  );

function contract(
  name: string,
  make: () => EndpointRateLimiter[] | Promise<EndpointRateLimiter[]>,
) {
  describe(name, () => {
    let limiters: EndpointRateLimiter[];
    let one: EndpointRateLimiter;
    beforeAll(async () => {
      limiters = await make();
      one = limiters[0]!;
    });
    let n = 0;
    const fresh = (label: string) => `shop/${label}-${Date.now()}-${n++}`;

    it('no rateLimit: no headers, never limited', async () => {
      for (let i = 0; i < 5; i++) {
        expect(await one.check(makeRoute())).toEqual({ headers: {}, degraded: false });
      }
    });

    it('200 concurrent requests across 3 instances, limit 50 → exactly 50 admitted', async () => {
      const started = performance.now();
      const { admitted, rejected, other } = await burst(limiters, limited(50, fresh('g9')), 200);
      // One emission interval is 1.2 s: a slower burst would have earned a refill.
      expect(performance.now() - started).toBeLessThan(1200);
      expect(other).toBe(0);
      expect(admitted).toBe(50);
      expect(rejected).toHaveLength(150);
      for (const problem of rejected) {
        expect(problem.code).toBe('HG_ERR_RATE_LIMITED');
        expect(problem.status).toBe(429);
        // The next request passes one interval (1.2 s) after the burst: 2 s rounded up.
        expect(['1', '2']).toContain(problem.headers['Retry-After']);
        expect(problem.headers['RateLimit-Limit']).toBe('50');
        expect(problem.headers['RateLimit-Remaining']).toBe('0');
        expect(problem.headers['RateLimit-Reset']).toBe('60');
      }
    });

    it('shadow mode (enforce: false): the same count, nothing refused, no headers, the excess marked', async () => {
      const key = fresh('shadow');
      const shadow = makeRoute(
        { rateLimit: { requestsPerMinute: 50, failureMode: 'open', enforce: false } },
        {},
        key,
      );
      const decisions = await Promise.all(
        Array.from({ length: 80 }, (_, i) => limiters[i % limiters.length]!.check(shadow)),
      );
      expect(decisions.filter((d) => d.shadowed === true)).toHaveLength(30);
      for (const d of decisions) expect(d).toMatchObject({ headers: {}, degraded: false });
      // Enforced from now on (the same key): what shadow mode counted is spent.
      const enforced = makeRoute(
        { rateLimit: { requestsPerMinute: 50, failureMode: 'open', enforce: true } },
        {},
        key,
      );
      expect((await problemOf(() => one.check(enforced))).code).toBe('HG_ERR_RATE_LIMITED');
    });

    it('remaining drops by exactly one per request; Reset is the time until the full limit is back', async () => {
      const route = limited(5, fresh('countdown')); // one request every 12 s
      const seen = [];
      for (let i = 0; i < 5; i++) {
        seen.push((await limiters[i % limiters.length]!.check(route)).headers);
      }
      expect(seen.map((h) => h['RateLimit-Remaining'])).toEqual(['4', '3', '2', '1', '0']);
      expect(seen.map((h) => h['RateLimit-Reset'])).toEqual(['12', '24', '36', '48', '60']);
      for (const headers of seen) {
        expect(headers['RateLimit-Limit']).toBe('5');
        expect(headers['RateLimit-Policy']).toBe('5;w=60');
        expect(headers).not.toHaveProperty('Retry-After');
      }
      const problem = await problemOf(() => one.check(route));
      expect(problem.code).toBe('HG_ERR_RATE_LIMITED');
      expect(problem.headers['Retry-After']).toBe('12');
      expect(problem.headers['RateLimit-Remaining']).toBe('0');
      expect(problem.headers['RateLimit-Reset']).toBe('60');
      expect(problem.message).toContain('5 requests per minute; retry after 12 s');
      // A rejection costs nothing: the answer does not move.
      expect((await problemOf(() => one.check(route))).headers['Retry-After']).toBe('12');
    });

    it('endpoints are counted separately', async () => {
      const a = limited(2, fresh('a'));
      const b = limited(2, fresh('b'));
      await one.check(a);
      await one.check(a);
      expect((await problemOf(() => one.check(a))).code).toBe('HG_ERR_RATE_LIMITED');
      expect((await one.check(b)).headers['RateLimit-Remaining']).toBe('1');
    });

    it('a raised limit takes effect at once; the requests already counted carry over', async () => {
      const key = fresh('raise');
      for (let i = 0; i < 3; i++) await one.check(limited(3, key));
      await expect(one.check(limited(3, key))).rejects.toMatchObject({ status: 429 });
      // 3 counted of a new limit of 6: this is the 4th, 2 remain.
      const raised = await one.check(limited(6, key));
      expect(raised.headers['RateLimit-Limit']).toBe('6');
      expect(raised.headers['RateLimit-Remaining']).toBe('2');
    });

    it('a lowered limit takes effect at once: requests already counted over it are not forgiven', async () => {
      const key = fresh('lower');
      for (let i = 0; i < 4; i++) await one.check(limited(10, key));
      // 4 counted, new limit 2 (one every 30 s): full, the next slot is 30 s away.
      const problem = await problemOf(() => one.check(limited(2, key)));
      expect(problem.headers['Retry-After']).toBe('30');
      expect(problem.headers['RateLimit-Limit']).toBe('2');
      const again = await problemOf(() => one.check(limited(2, key)));
      expect(again.headers['Retry-After']).toBe('30');
    });

    it('large limits: exactly N at once, Reset never above 60', async () => {
      // 7 per minute: the interval 8571428.57… µs is rounded up to a whole µs.
      const seven = limited(7, fresh('seven'));
      const { admitted } = await burst(limiters, seven, 20);
      expect(admitted).toBe(7);
      const problem = await problemOf(() => one.check(seven));
      expect(problem.headers['RateLimit-Reset']).toBe('60');
      expect(problem.headers['Retry-After']).toBe('9');
      // The schema's maximum, 1 000 000 per minute (one every 60 µs): exact bursts too.
      const big = limited(1_000_000, fresh('big'));
      const first = await one.check(big);
      expect(first.headers['RateLimit-Remaining']).toBe('999999');
    });
  });
}

contract('EndpointRateLimiter (memory)', () => {
  const frozen = 5_000_000; // ms on the monotonic clock; never moves in this suite
  const limiter = new EndpointRateLimiter({ now: () => frozen });
  return [limiter, limiter, limiter];
});

describe.skipIf(!redisAvailable())('Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server.stop();
  });
  contract('EndpointRateLimiter (Redis, 3 instances)', () =>
    Promise.all(
      [0, 1, 2].map(async () => {
        const redis = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
        clients.push(redis);
        await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
        return new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
      }),
    ),
  );
});

describe.skipIf(!redisAvailable())('Redis Cluster of three masters', () => {
  let cluster: RedisCluster;
  const clients: RedisClient[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await cluster?.stop();
  });
  contract('EndpointRateLimiter (Redis Cluster, 3 instances)', () =>
    Promise.all(
      [0, 1, 2].map(async () => {
        // The request-path options of roles/redis.ts.
        const redis = connectRedis(cluster.url, {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
        });
        clients.push(redis);
        await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
        return new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
      }),
    ),
  );
});
