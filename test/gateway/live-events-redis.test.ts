// The live event stream across gateways over a real redis-server and a real Redis
// Cluster of three masters: a subscriber on one hub sees another hub's events, in that
// gateway's order, nothing is published for a route nobody watches, and on a cluster
// the events stay on their shard (no message over the cluster bus for each).
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { LiveEventHub } from '../../runtime/gateway/live-events.ts';
import { RedisLiveEventBus } from '../../runtime/gateway/live-events-redis.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { redisCluster, singleRedis, type RedisBackend } from '../support/redis-backends.ts';

const route = (key: string) =>
  ({
    key,
    path: `/webhook/${key}`,
    spec: { response: { mode: 'immediateAck' } },
  }) as unknown as RouteRecord;
const request = (key: string, n: number) =>
  ({
    url: `/webhook/${key}?n=${n}`,
    method: 'POST',
    headers: { authorization: 'Bearer secret', 'x-n': String(n) },
  }) as unknown as FastifyRequest;
const ctx = (n: number) => ({ requestId: `r${n}`, correlationId: `c${n}`, arrivedAt: Date.now() });

/** Messages the cluster's nodes sent each other for PUBLISH (none on one server). */
const busPublishes = (backend: RedisBackend) => backend.cluster?.busPublishes() ?? 0;

describe.skipIf(!redisAvailable()).each([
  ['one redis-server', singleRedis],
  ['a Redis Cluster of 3 masters', redisCluster],
])('live events over Redis (%s)', (_name, start) => {
  let backend: RedisBackend;
  const clients: RedisClient[] = [];
  const buses: RedisLiveEventBus[] = [];
  let published = 0;

  async function gateway(id: string) {
    const redis = backend.connect();
    clients.push(redis);
    // Counted whichever command carries them.
    const count = (channel: string | Buffer) => {
      if (String(channel).startsWith('hookgate:live:events:')) published += 1;
    };
    const publish = redis.publish.bind(redis);
    const spublish = redis.spublish.bind(redis);
    redis.publish = (channel, message) => (count(channel), publish(channel, message));
    redis.spublish = (channel, message) => (count(channel), spublish(channel, message));
    const bus = await RedisLiveEventBus.create({ redis, gateway: id, refreshMs: 200 });
    buses.push(bus);
    return new LiveEventHub({ gateway: id, bus });
  }

  beforeAll(async () => {
    backend = await start();
  }, 60_000);
  afterAll(async () => {
    for (const b of buses) await b.close();
    for (const c of clients) c.disconnect();
    await backend?.stop();
  });

  it('a subscriber on A sees B’s events in B’s order, with gateway and seq', async () => {
    const a = await gateway('gw-a');
    const b = await gateway('gw-b');
    const seen: { kind: string; data: Record<string, unknown> }[] = [];
    // Nobody watches: B builds and publishes nothing.
    b.publishRequest(route('orders'), request('orders', 0), ctx(0));
    await sleep(50);
    expect(published).toBe(0);

    const stop = a.subscribe('orders', (kind, data) =>
      seen.push({ kind, data: data as Record<string, unknown> }),
    );
    await eventually(
      () => {
        b.publishRequest(route('orders'), request('orders', 1), ctx(1));
        expect(seen.length).toBeGreaterThan(0);
      },
      3000,
      50,
    );
    const before = published;
    b.publishRequest(route('probe'), request('probe', 0), ctx(0));
    expect(published).toBe(before); // another route: still nothing
    await sleep(100); // late copies of the probe above
    seen.length = 0;
    const busBefore = await busPublishes(backend);
    for (let n = 2; n < 102; n += 1)
      b.publishRequest(route('orders'), request('orders', n), ctx(n));
    b.publishResponse(route('orders'), 202, 0.0123, { requestId: 'r101', correlationId: 'c101' });
    a.publishRequest(route('orders'), request('orders', 999), ctx(999));
    await eventually(() => expect(seen).toHaveLength(102), 3000);
    // A shard channel's messages stay on its master: what the bus carried meanwhile was
    // the gateways' announcements, if any. A classic PUBLISH sent each of the 101
    // events to every other node (202 here: two other masters).
    const bus = (await busPublishes(backend)) - busBefore;
    console.info(`cluster-bus publish messages while 101 events went across: ${bus}`);
    expect(bus).toBeLessThan(50);
    const fromB = seen.filter((e) => e.data.gateway === 'gw-b');
    const seqs = fromB.map((e) => e.data.seq as number);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).toBe(101);
    expect(fromB[0]?.data).toMatchObject({
      requestId: 'r2',
      method: 'POST',
      path: '/webhook/orders',
    });
    expect((fromB[0]?.data.headers as Record<string, string>).authorization).toBe('[redacted]');
    expect(fromB.at(-1)).toMatchObject({
      kind: 'response',
      data: { statusCode: 202, latencyMs: 12.3 },
    });
    // A's own event reaches A once (locally), not again through Redis.
    expect(seen.filter((e) => e.data.gateway === 'gw-a')).toHaveLength(1);

    // The last subscriber leaves: B stops publishing.
    stop();
    await eventually(
      () => {
        const before = published;
        b.publishRequest(route('orders'), request('orders', 1000), ctx(1000));
        expect(published).toBe(before);
      },
      3000,
      50,
    );
  });

  it('a gateway that starts later learns the current subscriptions at once', async () => {
    const a = await gateway('gw-c');
    const seen: string[] = [];
    a.subscribe('late', (_kind, data) => seen.push((data as { gateway: string }).gateway));
    await sleep(50);
    const late = await gateway('gw-late');
    await eventually(
      () => {
        late.publishRequest(route('late'), request('late', 1), ctx(1));
        expect(seen).toContain('gw-late');
      },
      1000,
      20,
    );
  });
});
