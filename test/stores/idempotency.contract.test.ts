// One idempotency contract, two adapters: memory (embedded) and Redis (shared by
// replicas, against a real redis-server), including exactly-one-claim under concurrency.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MemoryIdempotencyStore,
  type IdempotencyRecord,
  type IdempotencyStore,
} from '../../runtime/gateway/idempotency/store.ts';
import { RedisIdempotencyStore } from '../../runtime/gateway/idempotency/redis-store.ts';
import { sleep } from '../support/eventually.ts';
import { connectRedis } from '../../roles/redis.ts';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const record: IdempotencyRecord = {
  status: 202,
  headers: { 'content-type': 'application/json' },
  body: '{"a":[]}',
  executionId: 'e1',
};

function contract(name: string, make: () => { store: IdempotencyStore; other: IdempotencyStore }) {
  describe(name, () => {
    let store: IdempotencyStore;
    let other: IdempotencyStore;
    beforeAll(() => {
      ({ store, other } = make());
    });
    let n = 0;
    const fresh = () => `k${Date.now()}-${n++}`;

    it('new, then in progress, then the stored answer; another request under the key is a mismatch', async () => {
      const key = fresh();
      expect(await store.begin(key, 'fp', 60_000)).toEqual({ state: 'new' });
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'in-progress' });
      await store.complete(key, record);
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
      expect(await other.begin(key, 'other-fp', 60_000)).toEqual({ state: 'mismatch' });
    });

    it('abandon frees a claim, but never a completed answer', async () => {
      const key = fresh();
      await store.begin(key, 'fp', 60_000);
      await store.abandon(key);
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'new' });
      await other.complete(key, record);
      await store.abandon(key);
      expect(await store.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
    });

    it('a claim given back with a resume hint: the same request claims it again with the hint, once; another request under it is a mismatch', async () => {
      const key = fresh();
      const hint = { executionId: 'exec-1', token: 'tok-1' };
      await store.begin(key, 'fp', 60_000);
      await store.abandon(key, hint);
      expect(await other.begin(key, 'other-fp', 60_000)).toEqual({ state: 'mismatch' });
      const again = await Promise.all([
        other.begin(key, 'fp', 60_000),
        store.begin(key, 'fp', 60_000),
      ]);
      expect(again).toContainEqual({ state: 'new', resume: hint });
      expect(again).toContainEqual({ state: 'in-progress' });
      // Given back again (the retry failed too), with the same hint; then answered.
      await other.abandon(key, hint);
      expect(await store.begin(key, 'fp', 60_000)).toEqual({ state: 'new', resume: hint });
      await store.complete(key, record);
      await store.abandon(key, { executionId: 'exec-2', token: 'tok-2' });
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
      // A plain abandon frees it altogether.
      const freed = fresh();
      await store.begin(freed, 'fp', 60_000);
      await store.abandon(freed, hint);
      await store.begin(freed, 'fp', 60_000);
      await store.abandon(freed);
      expect(await other.begin(freed, 'other-fp', 60_000)).toEqual({ state: 'new' });
    });

    it('a hint keeps the TTL of the first claim', async () => {
      const key = fresh();
      await store.begin(key, 'fp', 150);
      await store.abandon(key, { executionId: 'exec-3', token: 'tok-3' });
      expect((await other.begin(key, 'fp', 60_000)).state).toBe('new');
      await other.abandon(key, { executionId: 'exec-3', token: 'tok-3' });
      await sleep(250);
      expect(await store.begin(key, 'fp', 60_000)).toEqual({ state: 'new' });
    });

    it('a claim whose answer never came is in progress for its lease only; then the same request claims it again, with its hint if it has one', async () => {
      const key = fresh();
      const hint = { executionId: 'exec-4', token: 'tok-4' };
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'new' });
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      await sleep(200);
      expect(await other.begin(key, 'other-fp', 60_000, 100)).toEqual({ state: 'mismatch' });
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'new' });
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      await other.abandon(key, hint);
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'new', resume: hint });
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      await sleep(200);
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'new', resume: hint });
      await other.complete(key, record);
      await sleep(200);
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'replay', record });
    });

    it('a claim expires after its TTL', async () => {
      const key = fresh();
      await store.begin(key, 'fp', 80);
      await sleep(160);
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'new' });
    });

    it('of many concurrent begins (on two instances) exactly one gets the key', async () => {
      const key = fresh();
      const results = await Promise.all(
        Array.from({ length: 100 }, (_v, i) => (i % 2 ? store : other).begin(key, 'fp', 60_000)),
      );
      expect(results.filter((r) => r.state === 'new')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'in-progress')).toHaveLength(99);
    });
  });
}

contract('MemoryIdempotencyStore', () => {
  const store = new MemoryIdempotencyStore();
  return { store, other: store };
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
  contract('RedisIdempotencyStore', () => {
    const a = new Redis(server.url);
    const b = new Redis(server.url);
    clients.push(a, b);
    return {
      store: new RedisIdempotencyStore({ redis: a }),
      other: new RedisIdempotencyStore({ redis: b }),
    };
  });
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
  contract('RedisIdempotencyStore', () => {
    const a = connectRedis(cluster.url, {});
    const b = connectRedis(cluster.url, {});
    clients.push(a, b);
    return {
      store: new RedisIdempotencyStore({ redis: a }),
      other: new RedisIdempotencyStore({ redis: b }),
    };
  });
});
