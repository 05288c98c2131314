// One contract, two adapters: the executions store in memory (embedded, in-gateway
// runs) and in Redis (gateways and workers), against a real redis-server.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MemoryExecutionStore, type ExecutionStore } from '../../runtime/engine/execution-store.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { Execution, SequencedEvent } from '../../runtime/engine/ports.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { trigger } from '../engine/helpers.ts';

const HOUR = 3_600_000;
let clock = Date.parse('2026-11-23T12:00:00Z');
const now = () => clock;

function execution(id: string, minutesAgo: number, extra: Partial<Execution> = {}): Execution {
  return {
    id,
    workflowId: 'wf-a',
    triggerKey: 'ns/a',
    status: 'succeeded',
    createdAt: new Date(clock - minutesAgo * 60_000).toISOString(),
    input: trigger({ id }),
    log: [],
    ...extra,
  };
}

function event(executionId: string, seq: number): SequencedEvent {
  return { type: 'queued', executionId, seq, at: new Date(clock).toISOString() };
}

function contract(name: string, make: () => Promise<ExecutionStore>) {
  describe(name, () => {
    let store: ExecutionStore;
    beforeEach(async () => {
      clock = Date.parse('2026-11-23T12:00:00Z');
      store = await make();
    });

    it('saves, replaces and reads back an execution', async () => {
      await store.save(execution('e1', 1, { status: 'running' }));
      await store.save(execution('e1', 1, { status: 'succeeded', output: { ok: true } }));
      expect(await store.get('e1')).toMatchObject({ status: 'succeeded', output: { ok: true } });
      expect(await store.get('nope')).toBeUndefined();
    });

    it('lists newest first with filters, since (inclusive), until (exclusive) and limit', async () => {
      await store.save(execution('old', 30));
      await store.save(execution('mid', 20, { workflowId: 'wf-b', triggerKey: 'ns/b' }));
      await store.save(execution('new', 10, { status: 'failed' }));
      const ids = async (f: Parameters<ExecutionStore['list']>[0]) =>
        (await store.list(f)).map((e) => e.id);
      expect(await ids({})).toEqual(['new', 'mid', 'old']);
      expect(await ids({ limit: 2 })).toEqual(['new', 'mid']);
      expect(await ids({ workflowId: 'wf-a' })).toEqual(['new', 'old']);
      expect(await ids({ triggerKey: 'ns/b' })).toEqual(['mid']);
      expect(await ids({ status: 'failed' })).toEqual(['new']);
      const at = (m: number) => new Date(clock - m * 60_000).toISOString();
      expect(await ids({ since: at(20) })).toEqual(['new', 'mid']);
      expect(await ids({ until: at(10) })).toEqual(['mid', 'old']);
    });

    it('a filter matching few old executions still finds them past many newer ones', async () => {
      await store.save(execution('rare', 50, { workflowId: 'wf-rare' }));
      for (let i = 0; i < 450; i++) await store.save(execution(`n${i}`, 40 - i / 100));
      expect((await store.list({ workflowId: 'wf-rare' })).map((e) => e.id)).toEqual(['rare']);
    });

    it('appends events once per seq, in order, and reads those after a seq', async () => {
      await store.save(execution('e1', 1));
      await store.appendEvents([event('e1', 1), event('e1', 2)]);
      await store.appendEvents([event('e1', 2), event('e1', 3)]); // 2 again: ignored
      expect((await store.events('e1', 0)).map((e) => e.seq)).toEqual([1, 2, 3]);
      expect((await store.events('e1', 2)).map((e) => e.seq)).toEqual([3]);
      expect(await store.events('e1', 3)).toEqual([]);
    });

    it('forgets executions older than the TTL', async () => {
      await store.save(execution('e1', 0));
      clock += 25 * HOUR;
      expect(await store.get('e1')).toBeUndefined();
      expect(await store.list({})).toEqual([]);
    });
  });
}

contract('MemoryExecutionStore', () => Promise.resolve(new MemoryExecutionStore({ now })));

describe.skipIf(!redisAvailable())('RedisExecutionStore', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  // Redis expires keys on its own clock: the store's clock drives the TTL it sets and
  // its reads, so a store built with a clock 25 h later reads the index as expired.
  contract('contract', async () => {
    await redis.flushall();
    return new RedisExecutionStore({ redis, now });
  });
});
