// Executions queued and run on a Redis Cluster while the slots of queue shards move to
// another master under traffic (ADR 0021): every execution a gateway accepted (the
// 202 of the API) finishes, exactly once logically — one record that succeeded with its
// output, one `completed` event, events numbered without gaps — and nothing is left
// in any shard's stream. The clients follow the ASK and MOVED redirects of the move.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { connectRedis, duplicateWith } from '../../roles/redis.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { RedisExecutionEvents } from '../../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import { QueuedEngine } from '../../runtime/engine/queued-engine.ts';
import { readQueueState } from '../../runtime/engine/queue-state.ts';
import { triggerRef } from '../../runtime/engine/trigger-ref.ts';
import { ExecutionWorker, type JobTarget } from '../../runtime/engine/worker.ts';
import { eventually } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { route, trigger, workflow } from './helpers.ts';

describe.skipIf(!redisAvailable())('the execution queue while shard slots move', () => {
  let cluster: RedisCluster;
  let admin: Cluster;
  const clients: RedisClient[] = [];
  const layout = new ExecutionLayout({ shards: 6, cluster: true });
  // The roles' options (roles/redis.ts), with a generous timeout for a loaded machine.
  const connect = () => {
    const c = connectRedis(cluster.url, { commandTimeout: 10_000, maxRetriesPerRequest: 3 });
    clients.push(c);
    return c;
  };
  beforeAll(async () => {
    cluster = await startRedisCluster();
    admin = cluster.client();
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    admin?.disconnect();
    await cluster?.stop();
  });

  const owner = async (slot: number) =>
    (await admin.cluster('SLOTS')).find(([f, t]) => slot >= f && slot <= t)?.[2]?.[1];

  it('every accepted execution finishes exactly once while two shards move', async () => {
    const target: JobTarget = {
      route: route('shop/orders-hook'),
      workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "n": body.n }' }]),
    };
    const redis = connect();
    const store = new RedisExecutionStore({ redis, layout });
    const events = new RedisExecutionEvents({ subscriber: connect(), store });
    const gateway = new QueuedEngine({ redis, store, events });
    const workers = ['w1', 'w2'].map((consumer) => {
      const r = connect();
      const s = new RedisExecutionStore({ redis: r, layout });
      const blocking = duplicateWith(r, { commandTimeout: undefined, blockingTimeout: 10_000 });
      clients.push(blocking);
      return new ExecutionWorker({
        redis: r,
        blocking,
        engine: new InProcessEngine({ store: s, streamEvents: true, onInternalError: () => {} }),
        store: s,
        consumer,
        concurrency: 8,
        blockMs: 200,
        claimIdleMs: 5_000,
        resolve: () => Promise.resolve(target),
        onInternalError: () => {},
      });
    });
    for (const w of workers) await w.start();

    const accepted = new Map<string, number>();
    const refused: unknown[] = [];
    let next = 0;
    let stopAt = Number.POSITIVE_INFINITY;
    const client = async () => {
      while (next < stopAt) {
        const n = next++;
        try {
          const e = await gateway.start({
            workflow: target.workflow,
            trigger: triggerRef(target.route),
            input: trigger({ n }),
          });
          accepted.set(e.id, n);
        } catch (error) {
          refused.push(error);
        }
      }
    };
    const traffic = Promise.all(Array.from({ length: 6 }, client));
    while (accepted.size < 50) await new Promise((r) => setTimeout(r, 5));
    // Two shards' slots move, one after the other, while executions are queued and run.
    const moved: number[] = [];
    for (const shard of layout.shards.slice(0, 2)) {
      const slot = Number(await admin.cluster('KEYSLOT', shard.stream));
      const before = await owner(slot);
      const atStart = accepted.size;
      await cluster.moveSlot(slot);
      expect(await owner(slot)).not.toBe(before);
      moved.push(accepted.size - atStart);
    }
    stopAt = next + 100;
    await traffic;

    // Accepted while each slot was moving, not only before and after.
    for (const during of moved) expect(during).toBeGreaterThan(0);
    expect(refused).toEqual([]);
    expect(accepted.size).toBe(stopAt);
    await eventually(
      async () => expect((await readQueueState(redis, layout.streams)).depth).toBe(0),
      60_000,
      200,
    );
    for (const [id, n] of accepted) {
      const e = await store.get(id);
      expect([id, e?.status, e?.output]).toEqual([id, 'succeeded', { n }]);
      const history = await store.events(id, 0);
      expect(history.map((h) => h.seq)).toEqual(history.map((_h, i) => i + 1));
      expect(history.filter((h) => h.type === 'completed')).toHaveLength(1);
    }
    // Every execution was in the listing, merged over the shards.
    const listed = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await store.page({ limit: 200, ...(cursor ? { cursor } : {}) });
      for (const e of page.items) listed.add(e.id);
      cursor = page.next;
    } while (cursor);
    expect([...accepted.keys()].filter((id) => !listed.has(id))).toEqual([]);
    for (const w of workers) await w.close(5_000);
    gateway.close();
  }, 120_000);
});
