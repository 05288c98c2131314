// The Redis Cluster the suites start (test/support/redis-cluster.ts) is a real one:
// slots spread over three masters, a key's slot can be moved live, and a cluster
// client follows the move.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import { redisAvailable } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';
import pino from 'pino';
import { shardSpread, warnOfUnevenShards } from '../../roles/queue-shards.ts';
import { eventually } from '../support/eventually.ts';

describe.skipIf(!redisAvailable())('a real Redis Cluster of three masters', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    client = cluster.client();
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  it('spreads the slots over three masters', async () => {
    const slots = await client.cluster('SLOTS');
    expect(new Set(slots.map(([, , master]) => master?.[1])).size).toBe(3);
    expect(slots.reduce((n, [from, to]) => n + to - from + 1, 0)).toBe(16384);
  });

  it('refuses a script over keys of two slots, accepts one over a hash tag', async () => {
    await expect(client.eval('return 1', 2, 'a', 'b')).rejects.toThrow(/CROSSSLOT/);
    expect(await client.eval('return 1', 2, '{x}a', '{x}b')).toBe(1);
  });

  it('says how the queue shards fall on the masters, and warns when a master gets none', async () => {
    const one = await shardSpread(client, 1);
    expect(one.masters).toBe(3);
    expect([...one.perMaster.values()].sort()).toEqual([0, 0, 1]);
    const twelve = await shardSpread(client, 12);
    expect([...twelve.perMaster.values()].reduce((a, b) => a + b, 0)).toBe(12);
    expect(twelve.perMaster.size).toBe(3);
    // The start-up log line: a warning for N = 1 on three masters.
    const lines: { level: number; msg: string }[] = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => lines.push(JSON.parse(line) as { level: number; msg: string }) },
    );
    warnOfUnevenShards(client, 1, logger);
    await eventually(() => expect(lines).toHaveLength(1));
    expect(lines[0]).toMatchObject({ level: 40 });
    expect(lines[0]?.msg).toContain('leaves 2 of 3 Redis Cluster masters without executions');
  });

  it('moves a slot live; the client follows', async () => {
    await client.set('{moved}key', 'value');
    const slot = Number(await client.cluster('KEYSLOT', '{moved}key'));
    const owner = async () =>
      (await client.cluster('SLOTS')).find(([f, t]) => slot >= f && slot <= t)?.[2]?.[1];
    const ownerBefore = await owner();
    await cluster.moveSlot(slot);
    const ownerAfter = await owner();
    expect(ownerAfter).not.toBe(ownerBefore);
    expect(await client.get('{moved}key')).toBe('value');
  }, 30_000);
});
