// One contract, two adapters: the gateways' reports of what they serve, in memory (the
// dev role) and in Redis (gateway replicas and the operator), against a real
// redis-server. A report is applied as a difference, expires unless refreshed, and
// every change that matters to the operator comes through the change feed.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayChange, GatewayReport, GatewayStore } from '../../api/records/gateways.ts';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { GATEWAY_KEYS, RedisGatewayStore } from '../../api/records/gateways-redis.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { connectRedis } from '../../roles/redis.ts';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const served = (generation: number, workflow = true) => ({ generation, workflow });

function report(gateway: string, extra: Partial<GatewayReport> = {}): GatewayReport {
  return {
    gateway,
    revision: 1,
    full: true,
    serve: [],
    drop: [],
    ttlMs: 10_000,
    ...extra,
  };
}

interface Pair {
  /** The gateway side and the operator side (one store in memory, two clients in Redis). */
  gateway: GatewayStore;
  operator: GatewayStore & { ready?: () => Promise<void> };
}

function contract(name: string, make: () => Promise<Pair>) {
  describe(name, () => {
    it('applies full and partial reports; each live gateway answers for a route', async () => {
      const { gateway, operator } = await make();
      await gateway.report(
        report('g1', {
          serve: [
            ['ns/a', served(1)],
            ['ns/b', served(3, false)],
          ],
        }),
      );
      await gateway.report(report('g2', { serve: [['ns/a', served(2)]] }));
      expect(await operator.live()).toEqual(['g1', 'g2']);
      expect(await operator.served('ns/a')).toEqual([
        { gateway: 'g1', route: served(1) },
        { gateway: 'g2', route: served(2) },
      ]);
      expect(await operator.served('ns/b')).toEqual([
        { gateway: 'g1', route: served(3, false) },
        { gateway: 'g2', route: undefined },
      ]);
      const partial = report('g1', {
        full: false,
        revision: 2,
        serve: [['ns/a', served(2)]],
        drop: ['ns/b'],
      });
      expect(await gateway.report(partial)).toBe(true);
      expect(await operator.served('ns/a')).toEqual([
        { gateway: 'g1', route: served(2) },
        { gateway: 'g2', route: served(2) },
      ]);
      expect((await operator.served('ns/b')).map((s) => s.route)).toEqual([undefined, undefined]);
      // A full report replaces everything the gateway reported before.
      await gateway.report(report('g2', { serve: [['ns/c', served(1)]] }));
      expect((await operator.served('ns/a')).map((s) => s.route)).toEqual([served(2), undefined]);
    });

    it('a partial report with nothing to apply to is refused; refresh says whether the report lives', async () => {
      const { gateway, operator } = await make();
      expect(
        await gateway.report(report('g3', { full: false, serve: [['ns/a', served(1)]] })),
      ).toBe(false);
      expect(await operator.live()).toEqual([]);
      expect(await gateway.refresh('g3', 10_000)).toBe(false);
      await gateway.report(report('g3'));
      expect(await gateway.refresh('g3', 10_000)).toBe(true);
    });

    it('a report expires unless refreshed; remove withdraws it at once', async () => {
      const { gateway, operator } = await make();
      await gateway.report(report('short', { ttlMs: 300, serve: [['ns/a', served(1)]] }));
      await gateway.report(report('kept', { ttlMs: 300 }));
      await gateway.report(report('gone'));
      await sleep(150);
      expect(await gateway.refresh('kept', 10_000)).toBe(true);
      await sleep(250);
      expect(await operator.live()).toEqual(['gone', 'kept']);
      expect(await operator.served('ns/a')).toEqual([
        { gateway: 'gone', route: undefined },
        { gateway: 'kept', route: undefined },
      ]);
      expect(await gateway.refresh('short', 10_000)).toBe(false);
      await gateway.remove('gone');
      await gateway.remove('gone');
      expect(await operator.live()).toEqual(['kept']);
    });

    it('the change feed: changed routes, a gateway that joins, leaves or expires', async () => {
      const { gateway, operator } = await make();
      const changes: GatewayChange[] = [];
      /** When each change came (Date.now()). */
      const came: number[] = [];
      const stop = operator.subscribe((c) => {
        if (c.kind === 'resync') return;
        changes.push(c);
        came.push(Date.now());
      });
      await operator.ready?.();
      await gateway.report(report('f1', { ttlMs: 400, serve: [['ns/a', served(1)]] }));
      await eventually(() => expect(changes).toEqual([{ kind: 'gateways' }]));
      await gateway.report(
        report('f1', { full: false, revision: 2, ttlMs: 400, serve: [['ns/a', served(2)]] }),
      );
      // Nothing served changed (only the revision): nothing announced.
      const lastReport = Date.now();
      await gateway.report(report('f1', { full: false, revision: 3, ttlMs: 400 }));
      await eventually(() => expect(changes.at(-1)).toEqual({ kind: 'routes', keys: ['ns/a'] }));
      await gateway.report(report('f2'));
      await gateway.remove('f2');
      await eventually(() => expect(changes.length).toBeGreaterThanOrEqual(4));
      expect(changes.slice(2, 4)).toEqual([{ kind: 'gateways' }, { kind: 'gateways' }]);
      // f1 stops refreshing: its expiry (400 ms after its last report at the latest) is
      // noticed by polling and announced. (The poll may also announce f2's short stay
      // once more: a change announced twice is allowed, one missed is not.)
      await eventually(
        () => {
          const expired = changes.findIndex((_c, i) => (came[i] ?? 0) >= lastReport + 400);
          expect(changes[expired]).toEqual({ kind: 'gateways' });
        },
        3_000,
        50,
      );
      expect(await operator.live()).toEqual([]);
      stop();
    });
  });
}

contract('MemoryGatewayStore', () => {
  const store = new MemoryGatewayStore({ pollMs: 50 });
  return Promise.resolve({ gateway: store, operator: store });
});

describe.skipIf(!redisAvailable())('Redis', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const stores: RedisGatewayStore[] = [];
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const s of stores) s.close();
    for (const c of clients) c.disconnect();
    await server.stop();
  });
  const make = async (): Promise<Pair> => {
    const a = new Redis(server.url);
    const b = new Redis(server.url);
    clients.push(a, b);
    await a.flushall();
    const gateway = new RedisGatewayStore({ redis: a });
    const operator = new RedisGatewayStore({ redis: b, pollMs: 50 });
    stores.push(gateway, operator);
    return { gateway, operator };
  };
  contract('RedisGatewayStore', make);

  it('a change feed closed before its subscribe was answered leaves no unhandled rejection', async () => {
    const rejected: unknown[] = [];
    const onRejection = (reason: unknown) => rejected.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const redis = new Redis(server.url);
      clients.push(redis);
      const store = new RedisGatewayStore({ redis });
      store.subscribe(() => {});
      // Closed at once (a start that failed right after it subscribed): the subscribe
      // still in flight fails with "Connection is closed".
      store.close();
      await store.ready();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(rejected).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  it('keeps one hash per gateway with the report TTL, and the ids in a sorted set by expiry', async () => {
    const { gateway } = await make();
    const redis = clients.at(-1) as Redis;
    await gateway.report(report('h1', { revision: 7, serve: [['ns/a', served(4, false)]] }));
    expect(await redis.hgetall(`${GATEWAY_KEYS.routes}h1`)).toEqual({
      'ns/a': '4:no-workflow',
      ':revision': '7',
    });
    const ttl = await redis.pttl(`${GATEWAY_KEYS.routes}h1`);
    expect(ttl).toBeGreaterThan(9_000);
    expect(ttl).toBeLessThanOrEqual(10_000);
    const [id, score] = await redis.zrangebyscore(
      GATEWAY_KEYS.members,
      '-inf',
      '+inf',
      'WITHSCORES',
    );
    expect(id).toBe('h1');
    expect(Number(score) - Date.now()).toBeGreaterThan(8_000);
  });

  it('reports of 10,000 routes: one full report, then a difference of one', async () => {
    const { gateway, operator } = await make();
    const serve = Array.from(
      { length: 10_000 },
      (_v, i): [string, { generation: number; workflow: boolean }] => [`ns/r${i}`, served(1)],
    );
    await gateway.report(report('big', { serve }));
    await gateway.report(
      report('big', { full: false, revision: 2, serve: [['ns/r42', served(2)]] }),
    );
    expect(await operator.served('ns/r42')).toEqual([{ gateway: 'big', route: served(2) }]);
    expect(await operator.served('ns/r9999')).toEqual([{ gateway: 'big', route: served(1) }]);
  });
});

describe.skipIf(!redisAvailable())('Redis Cluster of three masters', () => {
  let cluster: RedisCluster;
  const clients: RedisClient[] = [];
  const stores: RedisGatewayStore[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    for (const s of stores) s.close();
    for (const c of clients) c.disconnect();
    await cluster?.stop();
  });
  contract('RedisGatewayStore', async (): Promise<Pair> => {
    await cluster.flushall();
    const a = connectRedis(cluster.url, {});
    const b = connectRedis(cluster.url, {});
    clients.push(a, b);
    const gateway = new RedisGatewayStore({ redis: a });
    const operator = new RedisGatewayStore({ redis: b, pollMs: 50 });
    stores.push(gateway, operator);
    return { gateway, operator };
  });
});
