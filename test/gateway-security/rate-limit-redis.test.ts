// The Redis adapter of the rate limiter against a real redis-server.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EndpointRateLimiter,
  RATE_LIMIT_KEY_PREFIX,
} from '../../runtime/gateway/security/rate-limit.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { burst, makeRoute, problemOf } from './fixtures.ts';

const route = (rpm: number, key: string, failureMode: 'open' | 'closed' = 'open') =>
  makeRoute({ rateLimit: { requestsPerMinute: rpm, failureMode } }, {}, key);

function client(port: number): Redis {
  const redis = new Redis({
    host: '127.0.0.1',
    port,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 50,
  });
  redis.on('error', () => {}); // reconnect noise while the server is stopped
  return redis;
}

async function ready(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
}

describe.skipIf(!redisAvailable())('EndpointRateLimiter (Redis)', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const newClient = async () => {
    const redis = client(server.port);
    clients.push(redis);
    await ready(redis);
    return redis;
  };

  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const redis of clients) redis.disconnect();
    await server?.stop();
  });

  it('200 concurrent checks across 3 instances (3 clients), limit 50 → exactly 50 admitted', async () => {
    const limiters = await Promise.all(
      [0, 1, 2].map(
        async () => new EndpointRateLimiter({ redis: await newClient(), timeoutMs: 10_000 }),
      ),
    );
    const r = route(50, 'shop/concurrent');
    const { admitted, rejected, other } = await burst(limiters, r, 200);
    expect(other).toBe(0);
    expect(admitted).toBe(50);
    expect(rejected).toHaveLength(150);
    for (const problem of rejected) {
      expect(problem.code).toBe('HG_ERR_RATE_LIMITED');
      expect(Number(problem.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
      expect(Number(problem.headers['Retry-After'])).toBeLessThanOrEqual(60);
    }
  });

  it('the counter key carries a TTL of at most one window (never a key without expiry)', async () => {
    const redis = await newClient();
    const limiter = new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
    const r = route(5, 'shop/ttl');
    const decision = await limiter.check(r);
    expect(decision.headers['RateLimit-Remaining']).toBe('4');
    const key = `${RATE_LIMIT_KEY_PREFIX}:shop/ttl`;
    expect(await redis.get(key)).toBe('1');
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('a frozen Redis (no answers) → open passes without headers, closed → 503', async () => {
    const redis = await newClient();
    const limiter = new EndpointRateLimiter({ redis, timeoutMs: 200 });
    await limiter.check(route(100, 'shop/frozen-open'));
    server.pause();
    try {
      const open = await limiter.check(route(100, 'shop/frozen-open'));
      expect(open).toEqual({ headers: {}, degraded: true });
      const problem = await problemOf(() =>
        limiter.check(route(100, 'shop/frozen-closed', 'closed')),
      );
      expect(problem.code).toBe('HG_ERR_RATE_LIMIT_UNAVAILABLE');
      expect(problem.status).toBe(503);
    } finally {
      server.resume();
    }
  });

  it('Redis stopped → open passes without headers, closed → 503; restarted → counting resumes', async () => {
    const redis = await newClient();
    // A generous timeout (a down Redis fails at once: the client is not ready).
    const limiter = new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
    expect((await limiter.check(route(10, 'shop/down-open'))).degraded).toBe(false);
    const closed = new Promise<void>((resolve) => redis.once('close', () => resolve()));
    await server.stop();
    await closed;
    for (let i = 0; i < 20; i++) {
      expect(await limiter.check(route(10, 'shop/down-open'))).toEqual({
        headers: {},
        degraded: true,
      });
    }
    const problem = await problemOf(() => limiter.check(route(10, 'shop/down-closed', 'closed')));
    expect(problem.code).toBe('HG_ERR_RATE_LIMIT_UNAVAILABLE');
    expect(problem.status).toBe(503);

    // Restarted on the same port: the client reconnects and counting resumes.
    const back = new Promise<void>((resolve) => redis.once('ready', () => resolve()));
    server = await startRedis({ port: server.port });
    await back;
    const after = await limiter.check(route(10, 'shop/down-closed', 'closed'));
    expect(after).toMatchObject({ degraded: false });
    expect(after.headers['RateLimit-Remaining']).toBe('9');
  });
});

describe('EndpointRateLimiter (Redis never reachable)', () => {
  it('a Redis address where nothing listens → open passes, closed → 503', async () => {
    // Port 1 on loopback: connection refused at once, the client never becomes ready.
    const redis = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: false,
      enableOfflineQueue: false,
    });
    redis.on('error', () => {});
    try {
      const limiter = new EndpointRateLimiter({ redis, timeoutMs: 2_000 });
      expect(await limiter.check(route(10, 'shop/nowhere'))).toEqual({
        headers: {},
        degraded: true,
      });
      const problem = await problemOf(() => limiter.check(route(10, 'shop/nowhere', 'closed')));
      expect(problem.code).toBe('HG_ERR_RATE_LIMIT_UNAVAILABLE');
    } finally {
      redis.disconnect();
    }
  });
});
