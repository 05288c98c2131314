// The worker's lookups of routes and workflows, kept between announced changes
// (api/records/cached-reader.ts): over the memory store for the rules, over a real
// redis-server for the change feed another process announces.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { CachedRecordReader } from '../../api/records/cached-reader.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { ChangeListener } from '../../api/records/records.ts';
import { RedisRecordStore } from '../../api/records/redis-store.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

interface Rec {
  v: number;
}

/** A memory store that counts reads and can hold one read until released. */
class CountingStore extends MemoryRecordStore<Rec> {
  reads = 0;
  hold: Promise<void> | undefined;
  listeners: ChangeListener[] = [];
  override async get(key: string): Promise<Rec | undefined> {
    this.reads += 1;
    const value = await super.get(key);
    await this.hold;
    return value;
  }
  override subscribe(listener: ChangeListener): () => void {
    this.listeners.push(listener);
    return super.subscribe(listener);
  }
}

const tick = () => new Promise((r) => setImmediate(r));

describe('cached record reader', () => {
  it('answers repeated reads from memory until the key is announced as changed', async () => {
    const store = new CountingStore();
    await store.put('a', { v: 1 });
    const reader = new CachedRecordReader({ store });
    await tick();
    expect(await reader.get('a')).toEqual({ v: 1 });
    expect(await reader.get('a')).toEqual({ v: 1 });
    expect(store.reads).toBe(1);
    await store.put('a', { v: 2 });
    expect(await reader.get('a')).toEqual({ v: 2 });
    expect(store.reads).toBe(2);
    await store.put('b', { v: 9 }); // another key: 'a' stays
    expect(await reader.get('a')).toEqual({ v: 2 });
    expect(store.reads).toBe(2);
    await store.delete('a');
    expect(await reader.get('a')).toBeUndefined();
    expect(reader).toMatchObject({ hits: 2, misses: 3 });
  });

  it('keeps no miss: a record that appears is used at once', async () => {
    const store = new CountingStore();
    const reader = new CachedRecordReader({ store });
    await tick();
    expect(await reader.get('a')).toBeUndefined();
    // Written without an announcement reaching the reader (another process, feed slow).
    store.listeners.length = 0;
    await MemoryRecordStore.prototype.put.call(store, 'a', { v: 1 });
    expect(await reader.get('a')).toEqual({ v: 1 });
  });

  it('does not keep a read that overlapped a change', async () => {
    const store = new CountingStore();
    await store.put('a', { v: 1 });
    const reader = new CachedRecordReader({ store });
    await tick();
    let release = () => {};
    store.hold = new Promise((r) => (release = r));
    const slow = reader.get('a'); // reads v1, then waits
    await tick();
    await store.put('a', { v: 2 }); // announced while the read is in flight
    release();
    expect(await slow).toEqual({ v: 1 });
    store.hold = undefined;
    expect(await reader.get('a')).toEqual({ v: 2 });
  });

  it('drops everything when anything may have changed, and entries past their lifetime', async () => {
    let now = 1_000;
    const store = new CountingStore();
    await store.put('a', { v: 1 });
    const reader = new CachedRecordReader({ store, ttlMs: 100, now: () => now });
    await tick();
    await reader.get('a');
    await reader.get('a');
    expect(store.reads).toBe(1);
    for (const l of store.listeners) l(); // a reconnect
    await reader.get('a');
    expect(store.reads).toBe(2);
    now += 100;
    await reader.get('a');
    expect(store.reads).toBe(3);
  });

  it('keeps at most maxEntries, dropping the oldest read', async () => {
    const store = new CountingStore();
    for (const k of ['a', 'b', 'c']) await store.put(k, { v: 1 });
    const reader = new CachedRecordReader({ store, maxEntries: 2 });
    await tick();
    for (const k of ['a', 'b', 'c']) await reader.get(k);
    expect(store.reads).toBe(3);
    await reader.get('c');
    await reader.get('b');
    expect(store.reads).toBe(3);
    await reader.get('a');
    expect(store.reads).toBe(4);
  });

  it('keeps nothing until the change feed is live', async () => {
    const store = new CountingStore();
    await store.put('a', { v: 1 });
    let live = () => {};
    const ready = new Promise<void>((r) => (live = r));
    const reader = new CachedRecordReader({ store: Object.assign(store, { ready: () => ready }) });
    await reader.get('a');
    await reader.get('a');
    expect(store.reads).toBe(2);
    live();
    await tick();
    await reader.get('a');
    await reader.get('a');
    expect(store.reads).toBe(3);
  });

  describe.skipIf(!redisAvailable())('over Redis', () => {
    let server: RedisServer;
    const clients: Redis[] = [];
    afterAll(async () => {
      for (const c of clients) c.disconnect();
      await server?.stop();
    });

    it('sees a change another process announces', async () => {
      server = await startRedis();
      const mine = new Redis(server.url);
      const theirs = new Redis(server.url);
      clients.push(mine, theirs);
      const writer = new RedisRecordStore<Rec>({ redis: theirs, key: 'hookgate:test' });
      const store = new RedisRecordStore<Rec>({ redis: mine, key: 'hookgate:test' });
      await writer.put('a', { v: 1 });
      const reader = new CachedRecordReader({ store });
      await store.ready();
      await tick();
      expect(await reader.get('a')).toEqual({ v: 1 });
      expect(await reader.get('a')).toEqual({ v: 1 });
      expect(reader.misses).toBe(1);
      await writer.put('a', { v: 2 });
      await eventually(async () => expect(await reader.get('a')).toEqual({ v: 2 }));
      reader.close();
      store.close();
    });
  });
});
