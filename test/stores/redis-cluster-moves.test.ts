// The stores that run on a Redis Cluster (docs/redis-layout.md) keep what they
// acknowledged while the slot of their keys moves to another master under traffic:
// the client follows the ASK and MOVED redirects, and nothing answered is lost.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { RedisRecordStore } from '../../api/records/redis-store.ts';
import { RedisIdempotencyStore } from '../../runtime/gateway/idempotency/redis-store.ts';
import type { IdempotencyRecord } from '../../runtime/gateway/idempotency/store.ts';
import { connectRedis } from '../../roles/redis.ts';
import { redisAvailable } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';

const answer = (i: number): IdempotencyRecord => ({
  status: 202,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ i }),
  executionId: `e${i}`,
});

describe.skipIf(!redisAvailable())('a slot moving under traffic on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let admin: Cluster;
  let redis: RedisClient;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    admin = cluster.client();
    // The roles' options (roles/redis.ts), with a generous timeout for a loaded machine.
    redis = connectRedis(cluster.url, { commandTimeout: 10_000, maxRetriesPerRequest: 1 });
  }, 60_000);
  afterAll(async () => {
    redis?.disconnect();
    admin?.disconnect();
    await cluster?.stop();
  });

  const owner = async (slot: number) =>
    (await admin.cluster('SLOTS')).find(([f, t]) => slot >= f && slot <= t)?.[2]?.[1];

  it('Idempotency-Key answers completed while their slot moves are all replayed afterwards', async () => {
    const store = new RedisIdempotencyStore({ redis });
    // Every key in one slot (hash tag), the one that moves.
    const key = (i: number) => `{hot}${i}`;
    const slot = Number(await admin.cluster('KEYSLOT', `hookgate:idem:${key(0)}`));
    const before = await owner(slot);
    const acknowledged: number[] = [];
    const failed: unknown[] = [];
    // Traffic runs until 100 keys past the end of the move.
    let next = 0;
    let stopAt = Number.POSITIVE_INFINITY;
    const client = async () => {
      while (next < stopAt) {
        const i = next++;
        try {
          const begun = await store.begin(key(i), 'fp', 600_000);
          expect(begun).toEqual({ state: 'new', owner: expect.any(String) });
          if (begun.state !== 'new') continue;
          expect(await store.complete(key(i), begun.owner, answer(i), 600_000)).toBe(true);
          acknowledged.push(i);
        } catch (error) {
          failed.push(error);
        }
      }
    };
    const traffic = Promise.all(Array.from({ length: 8 }, client));
    while (acknowledged.length < 50) await new Promise((r) => setTimeout(r, 5));
    const atMoveStart = acknowledged.length;
    await cluster.moveSlot(slot);
    const atMoveEnd = acknowledged.length;
    stopAt = next + 100;
    await traffic;
    const total = stopAt;
    // Answers were stored while the slot was moving, not only before and after.
    expect(atMoveEnd).toBeGreaterThan(atMoveStart);
    expect(await owner(slot)).not.toBe(before);
    expect(failed).toEqual([]);
    expect(acknowledged.length).toBe(total);
    for (const i of acknowledged) {
      expect(await store.begin(key(i), 'fp', 600_000)).toEqual({
        state: 'replay',
        record: answer(i),
      });
    }
  }, 60_000);

  it('routes written while the route hash moves are all there, and announced', async () => {
    const key = 'hookgate:routes-moving';
    const store = new RedisRecordStore<{ n: number }>({ redis, key });
    const readerClient = connectRedis(cluster.url, {});
    const reader = new RedisRecordStore<{ n: number }>({ redis: readerClient, key });
    const heard = new Set<string>();
    reader.subscribe((changed) => changed && heard.add(changed));
    await reader.ready();
    const slot = Number(await admin.cluster('KEYSLOT', key));
    const before = await owner(slot);
    const written: string[] = [];
    let stopAt = Number.POSITIVE_INFINITY;
    const writes = (async () => {
      for (let i = 0; i < stopAt; i++) {
        await store.put(`r${i}`, { n: i });
        written.push(`r${i}`);
      }
    })();
    while (written.length < 30) await new Promise((r) => setTimeout(r, 5));
    const atMoveStart = written.length;
    await cluster.moveSlot(slot);
    const atMoveEnd = written.length;
    stopAt = written.length + 100;
    await writes;
    expect(atMoveEnd).toBeGreaterThan(atMoveStart);
    expect(await owner(slot)).not.toBe(before);
    const stored = await store.list();
    expect(stored.map((r) => r.n).sort((a, b) => a - b)).toEqual(written.map((_k, i) => i));
    for (let i = 0; i < 100 && heard.size < written.length; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect([...written].filter((k) => !heard.has(k))).toEqual([]);
    reader.close();
    readerClient.disconnect();
  }, 60_000);
});
