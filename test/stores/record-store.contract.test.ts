// One contract, two adapters: the memory store (embedded default) and the Redis store
// (shared by replicas), the latter against a real redis-server.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RecordStore, VersionedRecordStore, WrittenFor } from '../../api/records/records.ts';
import { RedisRecordStore } from '../../api/records/redis-store.ts';
import { eventually } from '../support/eventually.ts';
import { connectRedis } from '../../roles/redis.ts';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

interface Rec {
  name: string;
  tags: string[];
  /** Set on the records of the versioned writes' tests. */
  uid?: string;
  generation?: number;
}

/** Both adapters are also versioned stores, for records that say what they were written for. */
type Store = RecordStore<Rec> &
  Pick<VersionedRecordStore<Rec & WrittenFor>, 'putUnlessSuperseded' | 'deleteUnlessSuperseded'>;

interface Harness {
  /** A store, and a second view of the same data as another process would have it. */
  make(): Promise<{ store: Store; other: Store }>;
  close(): Promise<void>;
}

/** A record of the object `uid` written from its generation `generation`. */
const v = (uid: string | undefined, generation: number, tag = `g${generation}`) => ({
  name: 'versioned',
  tags: [tag],
  ...(uid === undefined ? {} : { uid }),
  generation,
});

function contract(name: string, harness: () => Harness) {
  describe(name, () => {
    let h: Harness;
    let store: Store;
    let other: Store;
    beforeAll(async () => {
      h = harness();
      ({ store, other } = await h.make());
    });
    afterAll(() => h.close());

    it('puts, gets, lists and deletes; deleting a missing key is not an error', async () => {
      await store.put('a', { name: 'a', tags: ['x'] });
      await store.put('b', { name: 'b', tags: [] });
      expect(await store.get('a')).toEqual({ name: 'a', tags: ['x'] });
      expect((await store.list()).map((r) => r.name).sort()).toEqual(['a', 'b']);
      await store.put('a', { name: 'a2', tags: [] });
      expect(await store.get('a')).toEqual({ name: 'a2', tags: [] });
      await store.delete('a');
      await store.delete('a');
      await store.delete('never');
      expect(await store.get('a')).toBeUndefined();
      expect((await store.list()).map((r) => r.name)).toEqual(['b']);
    });

    it('deleteIf deletes only the record as it was read: not one put since, not a missing one', async () => {
      await store.put('cas', { name: 'cas', tags: ['v1'] });
      const read = (await store.list()).find((r) => r.name === 'cas') as Rec;
      // Another writer puts a new record under the key (as a new leader would).
      await other.put('cas', { name: 'cas', tags: ['v2'] });
      expect(await store.deleteIf('cas', read)).toBe(false);
      expect(await store.get('cas')).toEqual({ name: 'cas', tags: ['v2'] });
      const again = (await store.get('cas')) as Rec;
      expect(await store.deleteIf('cas', again)).toBe(true);
      expect(await store.get('cas')).toBeUndefined();
      expect(await store.deleteIf('cas', again)).toBe(false);
    });

    it('deleteIf announces the delete it made, and only that', async () => {
      const keys: (string | undefined)[] = [];
      const stop = other.subscribe((key) => keys.push(key));
      await (other as { ready?: () => Promise<void> }).ready?.();
      await store.put('cas-feed', { name: 'cas-feed', tags: [] });
      await eventually(() => expect(keys).toContain('cas-feed'));
      keys.length = 0;
      expect(await store.deleteIf('cas-feed', { name: 'cas-feed', tags: ['other'] })).toBe(false);
      expect(await store.deleteIf('cas-feed', { name: 'cas-feed', tags: [] })).toBe(true);
      await eventually(() => expect(keys).toEqual(['cas-feed']));
      stop();
    });

    it('putUnlessSuperseded refuses only a record of a later generation of the same object; what it refuses is kept', async () => {
      await store.put('ver', v('u1', 2));
      // The new leader wrote generation 2; a stale writer's generation 1 does not land.
      expect(await other.putUnlessSuperseded('ver', v('u1', 1))).toBe(false);
      expect(await store.get('ver')).toEqual(v('u1', 2));
      // The same generation is written (its other inputs, a Secret say, may have changed).
      expect(await other.putUnlessSuperseded('ver', v('u1', 2, 'rotated'))).toBe(true);
      expect(await store.get('ver')).toEqual(v('u1', 2, 'rotated'));
      expect(await other.putUnlessSuperseded('ver', v('u1', 3))).toBe(true);
      expect(await store.get('ver')).toEqual(v('u1', 3));
      // Another object under the key (deleted and created again: uids are not ordered),
      // a writer or a record without a uid, and a missing key: written.
      expect(await other.putUnlessSuperseded('ver', v('u2', 1))).toBe(true);
      expect(await store.get('ver')).toEqual(v('u2', 1));
      await store.put('ver', v(undefined, 5));
      expect(await other.putUnlessSuperseded('ver', v('u2', 1))).toBe(true);
      await store.put('ver', v('u2', 5));
      expect(await other.putUnlessSuperseded('ver', v(undefined, 1))).toBe(true);
      expect(await store.get('ver')).toEqual(v(undefined, 1));
      await store.put('ver', v('', 5));
      expect(await other.putUnlessSuperseded('ver', v('', 1))).toBe(true);
      await store.delete('ver');
      expect(await other.putUnlessSuperseded('ver', v('u1', 1))).toBe(true);
      expect(await store.get('ver')).toEqual(v('u1', 1));
      // A record whose generation is no number is not newer.
      await store.put('ver', { name: 'versioned', tags: [], uid: 'u1', generation: '9' as never });
      expect(await other.putUnlessSuperseded('ver', v('u1', 1))).toBe(true);
      await store.delete('ver');
    });

    it('deleteUnlessSuperseded keeps a record of a later generation of the same object, deletes anything else', async () => {
      await store.put('verdel', v('u1', 2));
      expect(await other.deleteUnlessSuperseded('verdel', { uid: 'u1', generation: 1 })).toBe(
        false,
      );
      expect(await store.get('verdel')).toEqual(v('u1', 2));
      expect(await other.deleteUnlessSuperseded('verdel', { uid: 'u1', generation: 2 })).toBe(true);
      expect(await store.get('verdel')).toBeUndefined();
      // Missing: nothing to delete, not refused.
      expect(await other.deleteUnlessSuperseded('verdel', { uid: 'u1', generation: 1 })).toBe(true);
      await store.put('verdel', v('u2', 7));
      expect(await other.deleteUnlessSuperseded('verdel', { uid: 'u1', generation: 1 })).toBe(true);
      expect(await store.get('verdel')).toBeUndefined();
      await store.put('verdel', v('u1', 7));
      expect(await other.deleteUnlessSuperseded('verdel', { generation: 1 })).toBe(true);
      expect(await store.get('verdel')).toBeUndefined();
    });

    it('the versioned writes announce what they change, and a refused one nothing', async () => {
      const keys: (string | undefined)[] = [];
      const stop = other.subscribe((key) => keys.push(key));
      await (other as { ready?: () => Promise<void> }).ready?.();
      await store.put('verfeed', v('u1', 2));
      await eventually(() => expect(keys).toEqual(['verfeed']));
      keys.length = 0;
      expect(await store.putUnlessSuperseded('verfeed', v('u1', 1))).toBe(false);
      expect(await store.deleteUnlessSuperseded('verfeed', { uid: 'u1', generation: 1 })).toBe(
        false,
      );
      expect(await store.deleteUnlessSuperseded('verfeed-missing', { generation: 1 })).toBe(true);
      expect(await store.putUnlessSuperseded('verfeed', v('u1', 3))).toBe(true);
      expect(await store.deleteUnlessSuperseded('verfeed', { uid: 'u1', generation: 3 })).toBe(
        true,
      );
      // One announcement each for the put and the delete that happened; none for the rest
      // (a listener that saw a key it did not expect would say so here).
      await eventually(() => expect(keys).toEqual(['verfeed', 'verfeed']));
      stop();
    });

    it('hands out copies: changing a value read does not change the store', async () => {
      const value = { name: 'c', tags: ['one'] };
      await store.put('c', value);
      value.tags.push('changed after put');
      const read = (await store.get('c')) as Rec;
      expect(read.tags).toEqual(['one']);
      read.tags.push('changed after get');
      expect((await store.get('c'))?.tags).toEqual(['one']);
    });

    it('announces every change to subscribers, also those of another instance; unsubscribe stops it', async () => {
      let here = 0;
      let there = 0;
      const stopHere = store.subscribe(() => here++);
      const stopThere = other.subscribe(() => there++);
      await (other as { ready?: () => Promise<void> }).ready?.();
      await (store as { ready?: () => Promise<void> }).ready?.();
      here = 0;
      there = 0;
      await store.put('d', { name: 'd', tags: [] });
      await eventually(() => {
        expect(here).toBeGreaterThanOrEqual(1);
        expect(there).toBeGreaterThanOrEqual(1);
      });
      expect(await other.get('d')).toEqual({ name: 'd', tags: [] });
      stopHere();
      // A client may also be told "anything may have changed" (undefined) after a
      // reconnect, as the contract allows; what counts is that nothing comes after
      // unsubscribing.
      const hereAtStop = here;
      const before = there;
      await store.delete('d');
      await eventually(() => expect(there).toBeGreaterThan(before));
      expect(here).toBe(hereAtStop);
      stopThere();
    });

    it('names the key that changed, on puts and on deletes', async () => {
      const keys: (string | undefined)[] = [];
      const stop = other.subscribe((key) => keys.push(key));
      await (other as { ready?: () => Promise<void> }).ready?.();
      keys.length = 0;
      await store.put('named', { name: 'named', tags: [] });
      await store.delete('named');
      await eventually(() => expect(keys.filter((k) => k === 'named')).toHaveLength(2));
      // Nothing else is announced than what changed (a reconnect would say undefined).
      expect(keys.every((k) => k === 'named')).toBe(true);
      stop();
    });
  });
}

contract('MemoryRecordStore', () => ({
  make: () => {
    const store = new MemoryRecordStore<Rec>();
    return Promise.resolve({ store, other: store });
  },
  close: () => Promise.resolve(),
}));

describe.skipIf(!redisAvailable())('Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const stores: RedisRecordStore<Rec>[] = [];
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const s of stores) s.close();
    for (const c of clients) c.disconnect();
    await server.stop();
  });
  contract('RedisRecordStore', () => ({
    make: () => {
      const a = new Redis(server.url);
      const b = new Redis(server.url);
      clients.push(a, b);
      const store = new RedisRecordStore<Rec>({ redis: a, key: 'test:records' });
      const other = new RedisRecordStore<Rec>({ redis: b, key: 'test:records' });
      stores.push(store, other);
      return Promise.resolve({ store, other });
    },
    close: () => Promise.resolve(),
  }));

  it('putUnlessSuperseded over a value that is not JSON (or not an object) writes: no record is newer', async () => {
    const redis = new Redis(server.url);
    clients.push(redis);
    const store = new RedisRecordStore<Rec>({ redis, key: 'test:versioned' });
    stores.push(store);
    for (const junk of ['{not json', '"u1"', '[1,2]', 'null', '{"uid":"u1","generation":null}']) {
      await redis.hset('test:versioned', 'k', junk);
      expect(await store.putUnlessSuperseded('k', v('u1', 1))).toBe(true);
      expect(await store.get('k')).toEqual(v('u1', 1));
    }
  });

  it('keys: the record keys alone (HKEYS), the records neither read nor parsed', async () => {
    const redis = new Redis(server.url);
    clients.push(redis);
    const store = new RedisRecordStore<Rec>({ redis, key: 'test:keys' });
    stores.push(store);
    await store.put('w1', { name: 'w1', tags: [] });
    await store.put('w2', { name: 'w2', tags: [] });
    // A value no JSON parser takes: list() fails on it, keys() never looks.
    await redis.hset('test:keys', 'w3', '{not json');
    await expect(store.list()).rejects.toThrow(SyntaxError);
    expect((await store.keys()).sort()).toEqual(['w1', 'w2', 'w3']);
  });
});

describe.skipIf(!redisAvailable())('Redis Cluster of three masters', () => {
  let cluster: RedisCluster;
  const clients: RedisClient[] = [];
  const stores: RedisRecordStore<Rec>[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    for (const s of stores) s.close();
    for (const c of clients) c.disconnect();
    await cluster?.stop();
  });
  contract('RedisRecordStore', () => ({
    make: () => {
      const a = connectRedis(cluster.url, {});
      const b = connectRedis(cluster.url, {});
      clients.push(a, b);
      const store = new RedisRecordStore<Rec>({ redis: a, key: 'test:records' });
      const other = new RedisRecordStore<Rec>({ redis: b, key: 'test:records' });
      stores.push(store, other);
      return Promise.resolve({ store, other });
    },
    close: () => Promise.resolve(),
  }));
});
