// A gateway's subscriber connection is lost while a caller waits for an execution, and
// the execution's last events are published before it is back: published to nobody.
// The relay (execution-events-redis.ts) must catch up from the store once the
// connection is back, or the caller waits until its timeout for an execution that has
// finished. On one redis-server and on a Redis Cluster of three masters (one sharded
// subscriber connection per master).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardedSubscriberClient, type RedisClient } from '../../api/records/redis-client.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { eventually } from '../support/eventually.ts';
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

    beforeAll(async () => {
      backend = await start();
      const layout = new ExecutionLayout({ shards, cluster: backend.client.isCluster });
      store = new RedisExecutionStore({ redis: backend.client, layout });
      subscriber = shardedSubscriberClient(backend.client);
      events = new RedisExecutionEvents({ subscriber, store, onInternalError: () => {} });
    }, 60_000);
    afterAll(async () => {
      events?.close();
      subscriber?.disconnect();
      await backend?.stop();
    });

    it('relays the events published while the connection was down, once each, in order', async () => {
      const ids = ['r1', 'r2', 'r3'];
      const got = new Map<string, number[]>(ids.map((id) => [id, []]));
      for (const id of ids) {
        await store.save(execution(id, 'running'));
        await store.appendEvents([queued(id, 1)]);
        events.subscribe(id, 0, (event) => got.get(id)?.push(event.seq));
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
      // Relayed live again afterwards (a new execution on the same connection).
      const seen: number[] = [];
      await store.save(execution('r4', 'running'));
      events.subscribe('r4', 0, (event) => seen.push(event.seq));
      await eventually(() => expect(events.listenerCount).toBe(1));
      await store.appendEvents([queued('r4', 1)]);
      await eventually(() => expect(seen).toEqual([1]));
    });
  });
