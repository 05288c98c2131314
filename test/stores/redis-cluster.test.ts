// The Redis Cluster the suites start (test/support/redis-cluster.ts) is a real one:
// slots spread over three masters, a key's slot can be moved live, and a cluster
// client follows the move.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import { redisAvailable } from '../support/redis.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';

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
