// One idempotency contract, two adapters: memory (embedded) and Redis (shared by
// replicas, against a real redis-server), including exactly-one-claim under concurrency
// and owner-checked answers and give-backs (a claim whose lease ran out and that
// another request took since is not its first owner's to free or answer).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MemoryIdempotencyStore,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ResumeHint,
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

/** A 'new' with any owner id (and the hint, if given). */
const fresh = (resume?: ResumeHint) =>
  resume
    ? { state: 'new', owner: expect.any(String), resume }
    : { state: 'new', owner: expect.any(String) };

/** Claims `key` ('new' expected) and returns the claim's owner id. */
async function claim(
  store: IdempotencyStore,
  key: string,
  ttlMs = 60_000,
  leaseMs?: number,
): Promise<string> {
  const result = await store.begin(key, 'fp', ttlMs, leaseMs);
  if (result.state !== 'new') throw new Error(`expected new, got ${result.state}`);
  return result.owner;
}

function contract(name: string, make: () => { store: IdempotencyStore; other: IdempotencyStore }) {
  describe(name, () => {
    let store: IdempotencyStore;
    let other: IdempotencyStore;
    beforeAll(() => {
      ({ store, other } = make());
    });
    let n = 0;
    const newKey = () => `k${Date.now()}-${n++}`;

    it('new, then in progress, then the stored answer; another request under the key is a mismatch', async () => {
      const key = newKey();
      const begun = await store.begin(key, 'fp', 60_000);
      expect(begun).toEqual(fresh());
      if (begun.state !== 'new') return;
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'in-progress' });
      expect(await store.complete(key, begun.owner, record)).toBe(true);
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
      expect(await other.begin(key, 'other-fp', 60_000)).toEqual({ state: 'mismatch' });
    });

    it('abandon frees a claim, but never a completed answer', async () => {
      const key = newKey();
      const first = await claim(store, key);
      expect(await store.abandon(key, first)).toBe(true);
      const second = await claim(other, key);
      expect(await other.complete(key, second, record)).toBe(true);
      expect(await store.abandon(key, second)).toBe(false);
      expect(await store.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
      // Answered once: a second answer of the same owner is refused.
      expect(await store.complete(key, second, { ...record, status: 500 })).toBe(false);
      expect(await store.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
    });

    it('a claim given back with a resume hint: the same request claims it again with the hint, once; another request under it is a mismatch', async () => {
      const key = newKey();
      const hint = { executionId: 'exec-1', token: 'tok-1' };
      const first = await claim(store, key);
      await store.abandon(key, first, hint);
      expect(await other.begin(key, 'other-fp', 60_000)).toEqual({ state: 'mismatch' });
      const again = await Promise.all([
        other.begin(key, 'fp', 60_000),
        store.begin(key, 'fp', 60_000),
      ]);
      expect(again).toContainEqual(fresh(hint));
      expect(again).toContainEqual({ state: 'in-progress' });
      const retry = again.find((r) => r.state === 'new');
      if (retry?.state !== 'new') return;
      // Given back, the first owner holds nothing: its second give-back changes nothing.
      expect(await store.abandon(key, first)).toBe(false);
      // Given back again (the retry failed too), with the same hint; then answered.
      expect(await other.abandon(key, retry.owner, hint)).toBe(true);
      const third = await store.begin(key, 'fp', 60_000);
      expect(third).toEqual(fresh(hint));
      if (third.state !== 'new') return;
      await store.complete(key, third.owner, record);
      await store.abandon(key, third.owner, { executionId: 'exec-2', token: 'tok-2' });
      expect(await other.begin(key, 'fp', 60_000)).toEqual({ state: 'replay', record });
      // A plain abandon frees it altogether.
      const freed = newKey();
      await store.abandon(freed, await claim(store, freed), hint);
      await store.abandon(freed, await claim(store, freed));
      expect(await other.begin(freed, 'other-fp', 60_000)).toEqual(fresh());
    });

    it('a hint a claim was taken with: still in progress; once its lease ran out, the same request claims it with that hint, not its own', async () => {
      const key = newKey();
      const hint = { executionId: 'exec-5', token: 'tok-5' };
      const first = await store.begin(key, 'fp', 60_000, 100, hint);
      expect(first).toEqual(fresh());
      expect(await other.begin(key, 'fp', 60_000, 100, hint)).toEqual({ state: 'in-progress' });
      expect(await other.begin(key, 'other-fp', 60_000, 100)).toEqual({ state: 'mismatch' });
      await sleep(200);
      const second = await other.begin(key, 'fp', 60_000, 100, {
        executionId: 'exec-6',
        token: 'tok-6',
      });
      expect(second).toEqual(fresh(hint));
      if (second.state !== 'new' || first.state !== 'new') return;
      // Claimed again since: the first owner can neither give it back nor answer it.
      expect(await store.abandon(key, first.owner)).toBe(false);
      expect(await other.complete(key, second.owner, record)).toBe(true);
      expect(await store.begin(key, 'fp', 60_000, 100, hint)).toEqual({ state: 'replay', record });
      // Given back without a hint (refused before the engine was asked): free, the hint gone.
      const freed = newKey();
      const refused = await store.begin(freed, 'fp', 60_000, 100, hint);
      if (refused.state !== 'new') throw new Error(`expected new, got ${refused.state}`);
      expect(await store.abandon(freed, refused.owner)).toBe(true);
      expect(await other.begin(freed, 'fp', 60_000, 100)).toEqual(fresh());
    });

    it('a claim taken again after its lease without a hint keeps the hint of the request that took it', async () => {
      const key = newKey();
      // A claim without a hint (a gateway from before hints, or a caller that gave none).
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual(fresh());
      await sleep(200);
      const hint = { executionId: 'exec-7', token: 'tok-7' };
      expect(await other.begin(key, 'fp', 60_000, 100, hint)).toEqual(fresh());
      await sleep(200);
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual(fresh(hint));
    });

    it('a hint keeps the TTL of the first claim', async () => {
      const key = newKey();
      const hint = { executionId: 'exec-3', token: 'tok-3' };
      await store.abandon(key, await claim(store, key, 150), hint);
      await other.abandon(key, await claim(other, key), hint);
      await sleep(250);
      expect(await store.begin(key, 'fp', 60_000)).toEqual(fresh());
    });

    it('a claim whose answer never came is in progress for its lease only; then the same request claims it again, with its hint if it has one', async () => {
      const key = newKey();
      const hint = { executionId: 'exec-4', token: 'tok-4' };
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual(fresh());
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      await sleep(200);
      expect(await other.begin(key, 'other-fp', 60_000, 100)).toEqual({ state: 'mismatch' });
      const second = await claim(other, key, 60_000, 100);
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      await other.abandon(key, second, hint);
      const third = await store.begin(key, 'fp', 60_000, 100);
      expect(third).toEqual(fresh(hint));
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      await sleep(200);
      const fourth = await other.begin(key, 'fp', 60_000, 100);
      expect(fourth).toEqual(fresh(hint));
      if (fourth.state !== 'new') return;
      await other.complete(key, fourth.owner, record);
      await sleep(200);
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'replay', record });
    });

    it("a claim whose lease ran out and that another request took since is that one's: the first can neither give it back nor answer it", async () => {
      const key = newKey();
      const a = await claim(store, key, 60_000, 100);
      await sleep(200);
      const b = await claim(other, key, 60_000, 100);
      expect(b).not.toBe(a);
      // A, late, gives the key back: B's claim stands, and C waits instead of running.
      expect(await store.abandon(key, a)).toBe(false);
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      // Nor with a hint (which would have let C in at once, B still running).
      expect(await store.abandon(key, a, { executionId: 'exec-a', token: 'tok-a' })).toBe(false);
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      // A's late answer is not the key's; B's is, and C gets it.
      expect(await store.complete(key, a, { ...record, executionId: 'exec-a' })).toBe(false);
      expect(await other.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'in-progress' });
      expect(await other.complete(key, b, record)).toBe(true);
      expect(await store.begin(key, 'fp', 60_000, 100)).toEqual({ state: 'replay', record });
    });

    it("a claim whose lease ran out but that nobody took since is still its owner's", async () => {
      const key = newKey();
      const a = await claim(store, key, 60_000, 50);
      await sleep(100);
      expect(await store.complete(key, a, record)).toBe(true);
      expect(await other.begin(key, 'fp', 60_000, 50)).toEqual({ state: 'replay', record });
    });

    it("a claim that expired is nobody's: its owner cannot answer the request that claims the key next", async () => {
      const key = newKey();
      const a = await claim(store, key, 80);
      await sleep(160);
      const d = await other.begin(key, 'other-fp', 60_000);
      expect(d).toEqual(fresh());
      expect(await store.complete(key, a, record)).toBe(false);
      expect(await store.abandon(key, a)).toBe(false);
      expect(await other.begin(key, 'other-fp', 60_000)).toEqual({ state: 'in-progress' });
    });

    it('a claim expires after its TTL', async () => {
      const key = newKey();
      await store.begin(key, 'fp', 80);
      await sleep(160);
      expect(await other.begin(key, 'fp', 60_000)).toEqual(fresh());
    });

    it('of many concurrent begins (on two instances) exactly one gets the key', async () => {
      const key = newKey();
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
