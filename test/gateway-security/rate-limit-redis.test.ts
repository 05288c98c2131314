// The Redis adapter of the rate limiter against a real redis-server: key TTLs (G9),
// refill on Redis's clock, the script surviving SCRIPT FLUSH, and the per-endpoint
// failure mode when Redis is frozen, stopped or never there (G10).
// The behaviour shared with memory: rate-limit.contract.test.ts.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EndpointRateLimiter,
  RATE_LIMIT_KEY_PREFIX,
} from '../../runtime/gateway/security/rate-limit.ts';
import { sleep } from '../support/eventually.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { burst, makeRoute, problemOf } from './fixtures.ts';

const route = (rpm: number, key: string, failureMode: 'open' | 'closed' = 'open', enforce = true) =>
  makeRoute({ rateLimit: { requestsPerMinute: rpm, failureMode, enforce } }, {}, key);

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

  it('the key carries a TTL of exactly its backlog (never a key without expiry)', async () => {
    const redis = await newClient();
    const limiter = new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
    const r = route(5, 'shop/ttl'); // one every 12 s
    const key = `${RATE_LIMIT_KEY_PREFIX}:shop/ttl`;
    await limiter.check(r);
    expect(await redis.get(key)).toMatch(/^\d{16}:12000000$/);
    let ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(11_000);
    expect(ttl).toBeLessThanOrEqual(12_000);
    for (let i = 0; i < 4; i++) await limiter.check(r);
    ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    await expect(limiter.check(r)).rejects.toMatchObject({ status: 429 });
    expect(await redis.pttl(key)).toBeLessThanOrEqual(ttl); // a rejection writes nothing
    for (const k of await redis.keys(`${RATE_LIMIT_KEY_PREFIX}:*`)) {
      expect(await redis.pttl(k), k).toBeGreaterThan(0);
    }
  });

  it('the key is gone once its backlog has drained', async () => {
    const redis = await newClient();
    const limiter = new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
    await limiter.check(route(3000, 'shop/expire')); // one every 20 ms
    const key = `${RATE_LIMIT_KEY_PREFIX}:shop/expire`;
    expect(await redis.pttl(key)).toBeLessThanOrEqual(20);
    await sleep(60);
    expect(await redis.exists(key)).toBe(0);
  });

  it('after a full burst, one request per interval on Redis’s clock: no second burst', async () => {
    const limiters = await Promise.all(
      [0, 1, 2].map(
        async () => new EndpointRateLimiter({ redis: await newClient(), timeoutMs: 10_000 }),
      ),
    );
    const r = route(300, 'shop/refill'); // one every 200 ms
    const started = performance.now();
    const first = await burst(limiters, r, 400);
    expect(first.other).toBe(0);
    expect(first.admitted).toBeGreaterThanOrEqual(300);
    let admitted = first.admitted;
    while (performance.now() - started < 1_500) {
      await sleep(20);
      admitted += (await burst(limiters, r, 3)).admitted;
    }
    const elapsed = performance.now() - started;
    // Redis's clock saw at most `elapsed` between the first and last request: at most
    // the burst plus one per 200 ms; and the refill did come.
    expect(admitted).toBeLessThanOrEqual(300 + Math.floor(elapsed / 200));
    expect(admitted).toBeGreaterThanOrEqual(300 + 4);
  });

  it('survives SCRIPT FLUSH (EVALSHA falls back to EVAL) and replaces a foreign value', async () => {
    const redis = await newClient();
    const limiter = new EndpointRateLimiter({ redis, timeoutMs: 10_000 });
    await limiter.check(route(10, 'shop/flush'));
    await redis.script('FLUSH');
    const after = await limiter.check(route(10, 'shop/flush'));
    expect(after.headers['RateLimit-Remaining']).toBe('8');
    // e.g. a count left by the fixed-window limiter under an old prefix
    await redis.set(`${RATE_LIMIT_KEY_PREFIX}:shop/foreign`, '7', 'EX', 60);
    const fresh = await limiter.check(route(10, 'shop/foreign'));
    expect(fresh.headers['RateLimit-Remaining']).toBe('9');
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
      expect(problem.headers['Retry-After']).toBe('1');
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
      // Shadow mode refuses nothing: closed or not, a store failure lets it through.
      expect(await limiter.check(route(10, 'shop/nowhere-shadow', 'closed', false))).toEqual({
        headers: {},
        degraded: true,
      });
    } finally {
      redis.disconnect();
    }
  });
});
