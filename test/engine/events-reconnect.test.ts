// A gateway's subscriber connection is lost while a caller waits for an execution, and
// the execution's last events are published before it is back: published to nobody.
// The relay (execution-events-redis.ts) must catch up from the store once the
// connection is back, or the caller waits until its timeout for an execution that has
// finished. On one redis-server and on a Redis Cluster of three masters (one sharded
// subscriber connection per master).
//
// And when the execution is gone by then (a discarded success whose events were kept
// for the handover time only, ADR 0041; a record dropped by the byte budget or
// expired), its end will never come: a subscriber that passed `onGone` is told at once
// (with the tombstone a discard with an Idempotency-Key left), instead of waiting.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardedSubscriberClient, type RedisClient } from '../../api/records/redis-client.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { Execution, ExecutionGone, SequencedEvent } from '../../runtime/engine/ports.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisCluster, singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { redisAvailable } from '../support/redis.ts';
import { trigger } from './helpers.ts';

const at = new Date().toISOString();

function execution(id: string, status: Execution['status']): Execution {
  return {
    id,
    workflowId: 'wf-a',
    triggerKey: 'ns/a',
    status,
    createdAt: at,
    input: trigger({ id }),
    log: [],
  };
}

const queued = (id: string, seq: number): SequencedEvent => ({
  type: 'queued',
  executionId: id,
  seq,
  at,
});

/** Closes every pub/sub connection of the servers (CLIENT KILL TYPE pubsub). */
async function killSubscribers(backend: RedisBackend): Promise<number> {
  const urls = backend.cluster ? backend.cluster.nodes.map((n) => n.url) : [backend.url];
  let killed = 0;
  for (const url of urls) {
    const admin = new Redis(url);
    try {
      killed += Number(await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub'));
    } finally {
      admin.disconnect();
    }
  }
  return killed;
}

for (const [name, start, shards] of [
  ['one Redis', singleRedis, 1],
  ['a Redis Cluster of 3 masters', redisCluster, 6],
] as const)
  describe.skipIf(!redisAvailable())(`execution events after a lost subscriber on ${name}`, () => {
    let backend: RedisBackend;
    let subscriber: RedisClient;
    let store: RedisExecutionStore;
    let events: RedisExecutionEvents;
    let layout: ExecutionLayout;

    beforeAll(async () => {
      backend = await start();
      layout = new ExecutionLayout({ shards, cluster: backend.client.isCluster });
      // A discarded watched execution's events stay 1 ms instead of 5 s: its handover
      // is over before the subscriber is back.
      store = new RedisExecutionStore({ redis: backend.client, layout, handoverMs: 1 });
      subscriber = shardedSubscriberClient(backend.client);
      events = new RedisExecutionEvents({ subscriber, store, onInternalError: () => {} });
    }, 60_000);
    afterAll(async () => {
      events?.close();
      subscriber?.disconnect();
      await backend?.stop();
    });

    const hashOf = (id: string) => layout.of(id).execution(id);
    const completed = (id: string, seq: number): SequencedEvent => ({
      type: 'completed',
      output: { id },
      executionId: id,
      seq,
      at,
    });

    it('relays the events published while the connection was down, once each, in order', async () => {
      const ids = ['r1', 'r2', 'r3'];
      const got = new Map<string, number[]>(ids.map((id) => [id, []]));
      const gone: string[] = [];
      for (const id of ids) {
        await store.save(execution(id, 'running'));
        await store.appendEvents([queued(id, 1)]);
        events.subscribe(
          id,
          0,
          (event) => got.get(id)?.push(event.seq),
          () => gone.push(id),
        );
      }
      await eventually(() => {
        for (const id of ids) expect(got.get(id)).toEqual([1]);
      });
      expect(await killSubscribers(backend)).toBeGreaterThan(0);
      // At once, before any reconnect: each channel has no subscriber now.
      await Promise.all(
        ids.map((id) =>
          store.saveWithEvents({ ...execution(id, 'succeeded'), output: { id } }, [
            queued(id, 2),
            { type: 'completed', output: { id }, executionId: id, seq: 3, at },
          ]),
        ),
      );
      await eventually(() => {
        for (const id of ids) expect(got.get(id)).toEqual([1, 2, 3]);
      }, 10_000);
      // Their records were there for the catch-up: nobody was told they are gone.
      expect(gone).toEqual([]);
      // Relayed live again afterwards (a new execution on the same connection).
      const seen: number[] = [];
      await store.save(execution('r4', 'running'));
      events.subscribe('r4', 0, (event) => seen.push(event.seq));
      await eventually(() => expect(events.listenerCount).toBe(1));
      await store.appendEvents([queued('r4', 1)]);
      await eventually(() => expect(seen).toEqual([1]));
    });

    /** Waits until the listener of `id` has its history (the execution marked watched). */
    async function watching(id: string, got: number[], seqs: number[]): Promise<void> {
      await eventually(async () => {
        expect(got).toEqual(seqs);
        expect(await backend.client.hget(hashOf(id), 'w')).toBe('s');
      });
    }

    it('an execution discarded while the connection was down, its handover over when it is back: the listener is told, with the tombstone', async () => {
      const before = events.listenerCount;
      const id = 'g-discarded';
      await store.save(execution(id, 'running'));
      await store.appendEvents([queued(id, 1)]);
      const got: number[] = [];
      const told: ExecutionGone[] = [];
      events.subscribe(
        id,
        0,
        (event) => got.push(event.seq),
        (gone) => told.push(gone),
      );
      await watching(id, got, [1]);
      expect(await killSubscribers(backend)).toBeGreaterThan(0);
      // At once, before any reconnect: its end is published to nobody, and its events
      // (watched: kept for the handover) expire 1 ms later.
      const finishedAt = new Date().toISOString();
      await store.discard({ ...execution(id, 'succeeded'), finishedAt }, [completed(id, 2)], {
        tombstoneMs: 60_000,
      });
      await eventually(
        () => expect(told).toEqual([{ discarded: { status: 'succeeded', finishedAt } }]),
        10_000,
      );
      expect(await backend.client.exists(hashOf(id))).toBe(0);
      expect(got).toEqual([1]);
      await eventually(() => expect(events.listenerCount).toBe(before));
    });

    it('an execution whose record went while the connection was down (dropped, expired, discarded without a key): told, without a tombstone', async () => {
      const before = events.listenerCount;
      const id = 'g-dropped';
      await store.save(execution(id, 'running'));
      await store.appendEvents([queued(id, 1)]);
      const got: number[] = [];
      const told: ExecutionGone[] = [];
      events.subscribe(
        id,
        0,
        (event) => got.push(event.seq),
        (gone) => told.push(gone),
      );
      await watching(id, got, [1]);
      expect(await killSubscribers(backend)).toBeGreaterThan(0);
      // Finished and published to nobody, then its hash gone (what the byte budget or
      // its expiry does), before the subscriber is back.
      await store.saveWithEvents({ ...execution(id, 'failed') }, [
        { type: 'failed', error: { message: 'x' }, executionId: id, seq: 2, at },
      ]);
      await backend.client.del(hashOf(id));
      await eventually(() => expect(told).toEqual([{}]), 10_000);
      expect(got).toEqual([1]);
      await eventually(() => expect(events.listenerCount).toBe(before));
    });

    it('a listener that subscribes once its execution is gone is told at once, and nothing is marked', async () => {
      const before = events.listenerCount;
      // Discarded with a key, nobody watching: hash gone at once, tombstone left.
      const id = 'g-late';
      await store.save(execution(id, 'running'));
      const finishedAt = new Date().toISOString();
      await store.discard({ ...execution(id, 'succeeded'), finishedAt }, [queued(id, 1)], {
        tombstoneMs: 60_000,
      });
      const told: ExecutionGone[] = [];
      events.subscribe(
        id,
        0,
        () => told.push({}),
        (gone) => told.push(gone),
      );
      await eventually(() =>
        expect(told).toEqual([{ discarded: { status: 'succeeded', finishedAt } }]),
      );
      // Nothing left at all.
      const none: ExecutionGone[] = [];
      events.subscribe(
        'g-none',
        0,
        () => none.push({}),
        (gone) => none.push(gone),
      );
      await eventually(() => expect(none).toEqual([{}]));
      // Neither got a hash made by the watched mark.
      expect(await backend.client.exists(hashOf(id))).toBe(0);
      expect(await backend.client.exists(hashOf('g-none'))).toBe(0);
      await eventually(() => expect(events.listenerCount).toBe(before));
    });

    it('an execution not written yet is not gone: a listener without onGone marks it, waits, through a lost connection too, and gets its events', async () => {
      const before = events.listenerCount;
      const id = 'g-unwritten';
      const got: number[] = [];
      events.subscribe(id, 0, (event) => got.push(event.seq));
      await eventually(async () => expect(await backend.client.hget(hashOf(id), 'w')).toBe('s'));
      expect(await killSubscribers(backend)).toBeGreaterThan(0);
      // Back, caught up (the hash the mark made is there): still waiting.
      await eventually(() => expect(events.listenerCount).toBe(before + 1));
      await sleep(300);
      await store.save(execution(id, 'running'));
      await store.saveWithEvents({ ...execution(id, 'succeeded'), output: {} }, [
        queued(id, 1),
        completed(id, 2),
      ]);
      await eventually(() => expect(got).toEqual([1, 2]), 10_000);
    });
  });
