// The sample store of schema learning, memory and Redis alike: newest first, bounded
// in count and bytes per trigger and side, cleared per trigger; and what the recorder
// puts in it (JSON bodies of learning triggers only).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import { SampleRecorder } from '../../runtime/schema-learning/recorder.ts';
import { MemorySampleStore, type SampleStore } from '../../runtime/schema-learning/samples.ts';
import { RedisSampleStore } from '../../runtime/schema-learning/samples-redis.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import type { Cluster } from 'ioredis';

const wide = { maxSamples: 100, maxBytes: 1024 * 1024 };

function contract(name: string, make: () => Promise<SampleStore>) {
  describe(name, () => {
    it('keeps samples newest first, per trigger and side', async () => {
      const store = await make();
      await store.add('ns/a', 'requests', '{"n":1}', wide);
      await store.add('ns/a', 'requests', '{"n":2}', wide);
      await store.add('ns/a', 'responses', '{"ok":true}', wide);
      await store.add('ns/b', 'requests', '{"other":1}', wide);
      expect(await store.read('ns/a')).toEqual({
        requests: ['{"n":2}', '{"n":1}'],
        responses: ['{"ok":true}'],
      });
      expect(await store.read('ns/none')).toEqual({ requests: [], responses: [] });
    });

    it('keeps at most maxSamples: the oldest go', async () => {
      const store = await make();
      for (let i = 0; i < 60; i++) {
        await store.add('ns/a', 'requests', JSON.stringify({ i }), { ...wide, maxSamples: 50 });
      }
      const { requests } = await store.read('ns/a');
      expect(requests).toHaveLength(50);
      expect(requests[0]).toBe('{"i":59}');
      expect(requests.at(-1)).toBe('{"i":10}');
    });

    it('keeps at most maxBytes of JSON text, and no single sample over it', async () => {
      const store = await make();
      const bounds = { maxSamples: 50, maxBytes: 1000 };
      const sample = (i: number) => JSON.stringify({ i, pad: 'é'.repeat(140) }); // ~300 bytes
      for (let i = 0; i < 10; i++) await store.add('ns/a', 'responses', sample(i), bounds);
      let kept = (await store.read('ns/a')).responses;
      const bytes = (texts: string[]) => texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
      expect(bytes(kept)).toBeLessThanOrEqual(1000);
      expect(kept).toEqual([sample(9), sample(8), sample(7)]);
      await store.add('ns/a', 'responses', JSON.stringify({ big: 'x'.repeat(2000) }), bounds);
      kept = (await store.read('ns/a')).responses;
      expect(kept).toEqual([sample(9), sample(8), sample(7)]);
      // The byte count follows the pops: after a clear, a full budget again.
      await store.clear('ns/a');
      for (let i = 0; i < 3; i++) await store.add('ns/a', 'responses', sample(i), bounds);
      expect((await store.read('ns/a')).responses).toHaveLength(3);
    });

    it('clears one trigger', async () => {
      const store = await make();
      await store.add('ns/a', 'requests', '1', wide);
      await store.add('ns/b', 'requests', '2', wide);
      await store.clear('ns/a');
      expect(await store.read('ns/a')).toEqual({ requests: [], responses: [] });
      expect((await store.read('ns/b')).requests).toEqual(['2']);
    });
  });
}

contract('MemorySampleStore', () => Promise.resolve(new MemorySampleStore()));

describe('MemorySampleStore bound on triggers', () => {
  it('forgets the triggers written least recently', async () => {
    const store = new MemorySampleStore({ maxTriggers: 2 });
    await store.add('ns/a', 'requests', '1', wide);
    await store.add('ns/b', 'requests', '2', wide);
    await store.add('ns/a', 'responses', '3', wide);
    await store.add('ns/c', 'requests', '4', wide);
    expect((await store.read('ns/b')).requests).toEqual([]);
    expect((await store.read('ns/a')).requests).toEqual(['1']);
    expect((await store.read('ns/c')).requests).toEqual(['4']);
  });

  it('reports what it holds for the store metrics (store="schema-samples")', async () => {
    const store = new MemorySampleStore({ maxTriggers: 2 });
    expect(store.storeName).toBe('schema-samples');
    const bounds = { maxSamples: 2, maxBytes: 1024 };
    await store.add('ns/a', 'requests', '{"a":1}', bounds); // 7 bytes
    await store.add('ns/a', 'requests', '{"a":22}', bounds); // 8
    await store.add('ns/a', 'requests', '{"a":333}', bounds); // 9: the first goes (rotation)
    await store.add('ns/a', 'responses', '"é"', bounds); // 4 (UTF-8)
    expect(store.stats()).toEqual({
      bytes: 8 + 9 + 4,
      entries: 3,
      evictions: { bytes: 0, count: 0, expired: 0 },
    });
    await store.add('ns/b', 'requests', '1', bounds);
    // A third trigger: the least recently written one (ns/a) goes, its samples counted.
    await store.add('ns/c', 'requests', '22', bounds);
    expect(store.stats()).toEqual({
      bytes: 1 + 2,
      entries: 2,
      evictions: { bytes: 0, count: 3, expired: 0 },
    });
    await store.clear('ns/b');
    expect(store.stats()).toMatchObject({ bytes: 2, entries: 1 });
  });
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
  const client = async () => {
    const redis = new Redis(server.url);
    clients.push(redis);
    await redis.flushall();
    return redis;
  };
  contract('RedisSampleStore', async () => new RedisSampleStore({ redis: await client() }));

  it('renews a TTL on both keys of a side with every write', async () => {
    const redis = await client();
    const store = new RedisSampleStore({ redis, ttlMs: 60_000 });
    await store.add('ns/a', 'requests', '{"a":1}', wide);
    const list = 'hookgate:samples:{ns/a}:requests';
    for (const key of [list, `${list}:bytes`]) {
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(50_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
    }
    expect(await redis.get(`${list}:bytes`)).toBe('7');
  });

  it('is shared: what one client records, another reads', async () => {
    const a = new RedisSampleStore({ redis: await client() });
    const b = new RedisSampleStore({ redis: await client() });
    await a.add('ns/a', 'requests', '{"from":"gateway"}', wide);
    await b.add('ns/a', 'responses', '{"from":"worker"}', wide);
    expect(await b.read('ns/a')).toEqual({
      requests: ['{"from":"gateway"}'],
      responses: ['{"from":"worker"}'],
    });
  });
});

describe.skipIf(!redisAvailable())('Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  let made = 0;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    client = cluster.client();
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });
  // A trigger's keys share one hash tag, so the script and the clear stay in one slot.
  contract('RedisSampleStore on a cluster', () =>
    Promise.resolve(
      new RedisSampleStore({ redis: client, keyPrefix: `hookgate:samples:t${made++}:` }),
    ),
  );
});

describe('SampleRecorder', () => {
  const route = (schema: unknown): RouteRecord =>
    ({ key: 'ns/a', spec: { schema } }) as unknown as RouteRecord;
  const learning = { mode: 'automatic', input: {}, output: {}, learning: { enabled: true } };

  it('records JSON bodies and outputs of learning triggers only', async () => {
    const store = new MemorySampleStore();
    const recorder = new SampleRecorder({ store });
    recorder.request(route(learning), { a: 1 }, 'application/json; charset=utf-8');
    recorder.request(route(learning), { b: 1 }, 'application/vnd.api+json');
    recorder.request(route(learning), { form: '1' }, 'application/x-www-form-urlencoded');
    recorder.request(route(learning), 'text', 'text/plain');
    recorder.request(route(learning), null, undefined);
    recorder.response(route(learning), { ok: true });
    await eventually(async () =>
      expect(await store.read('ns/a')).toEqual({
        requests: ['{"b":1}', '{"a":1}'],
        responses: ['{"ok":true}'],
      }),
    );
  });

  it('records nothing when learning is off or the mode is manual', async () => {
    const store = new MemorySampleStore();
    const recorder = new SampleRecorder({ store });
    const off = { ...learning, learning: { enabled: false } };
    const manual = { ...learning, mode: 'manual' };
    for (const schema of [off, manual, undefined]) {
      recorder.request(route(schema), { a: 1 }, 'application/json');
      recorder.response(route(schema), { ok: true });
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(await store.read('ns/a')).toEqual({ requests: [], responses: [] });
  });

  it('uses the trigger maxSamples and the recorder byte budget', async () => {
    const store = new MemorySampleStore();
    const recorder = new SampleRecorder({ store, maxBytes: 100 });
    const bounded = { ...learning, learning: { enabled: true, maxSamples: 2 } };
    for (let i = 0; i < 5; i++) recorder.request(route(bounded), { i }, 'application/json');
    recorder.request(route(bounded), { pad: 'x'.repeat(200) }, 'application/json');
    await eventually(async () =>
      expect((await store.read('ns/a')).requests).toEqual(['{"i":4}', '{"i":3}']),
    );
    expect(recorder.bounds(route(learning))).toEqual({ maxSamples: 50, maxBytes: 100 });
  });

  it('reports a store failure without throwing into the request', async () => {
    const errors: unknown[] = [];
    const failing: SampleStore = {
      add: () => Promise.reject(new Error('store down')),
      read: () => Promise.reject(new Error('store down')),
      clear: () => Promise.reject(new Error('store down')),
    };
    const recorder = new SampleRecorder({ store: failing, onError: (e) => errors.push(e) });
    expect(() => recorder.request(route(learning), { a: 1 }, 'application/json')).not.toThrow();
    await eventually(() => expect(errors).toHaveLength(1));
  });
});
