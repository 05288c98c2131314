// The start-up check for HOOKGATE_QUEUE_ACK_REPLICAS (roles/redis-replicas.ts): a master
// with fewer replicas connected than the setting asks for gets an error naming it once
// it stays short past the grace period; one whose replica attaches in time, or Redis
// unreachable, gets none. Stand-ins for the timing, real redis-servers for INFO.
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { connectedReplicasOf, warnOfTooFewReplicas } from '../../roles/redis-replicas.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable, startRedis, startReplicated, type RedisServer } from '../support/redis.ts';

const logger = () => ({ error: vi.fn(), warn: vi.fn(), info: vi.fn() });
const fast = { graceMs: 60, everyMs: 10 };

/** A master answering INFO replication with `replicas()` connected. */
const master = (port: number, replicas: () => number | Error) => ({
  options: { host: 'redis.example', port },
  info: vi.fn(() => {
    const n = replicas();
    return n instanceof Error
      ? Promise.reject(n)
      : Promise.resolve(`# Replication\r\nrole:master\r\nconnected_slaves:${n}\r\n`);
  }),
});

describe('the replica check of HOOKGATE_QUEUE_ACK_REPLICAS', () => {
  it('reads connected_slaves from INFO replication', () => {
    expect(connectedReplicasOf('# Replication\r\nrole:master\r\nconnected_slaves:2\r\n')).toBe(2);
    expect(connectedReplicasOf('# Replication\r\nrole:slave\r\n')).toBeUndefined();
  });

  it('logs an error for each master of a cluster still short after the grace period', async () => {
    const log = logger();
    const a = master(7000, () => 1);
    const b = master(7001, () => 0);
    const cluster = { isCluster: true, nodes: () => [a, b] } as unknown as RedisClient;
    const began = Date.now();
    warnOfTooFewReplicas(cluster, 1, log as unknown as Logger, fast);
    await eventually(() => expect(log.error).toHaveBeenCalledTimes(1));
    expect(Date.now() - began).toBeGreaterThanOrEqual(fast.graceMs);
    expect(log.error.mock.calls[0]?.[0]).toEqual({
      redis: 'redis.example:7001',
      connectedReplicas: 0,
      ackReplicas: 1,
    });
    expect(String(log.error.mock.calls[0]?.[1])).toMatch(
      /HOOKGATE_QUEUE_ACK_REPLICAS=1, but the Redis master redis\.example:7001 has 0 replicas connected/,
    );
    await sleep(50);
    expect(log.error).toHaveBeenCalledTimes(1); // said once
  });

  it('says nothing when the replica connects within the grace period', async () => {
    const log = logger();
    let replicas = 0;
    const m = master(6379, () => replicas);
    warnOfTooFewReplicas(m as unknown as RedisClient, 1, log as unknown as Logger, fast);
    await sleep(20);
    replicas = 1;
    await sleep(fast.graceMs + 50);
    expect(m.info.mock.calls.length).toBeGreaterThan(1);
    expect(log.error).not.toHaveBeenCalled();
  });

  it('keeps asking, less often, while Redis does not answer, and says it once Redis does', async () => {
    const log = logger();
    let answer: number | Error = new Error('connect ECONNREFUSED');
    const late = master(6379, () => answer);
    warnOfTooFewReplicas(late as unknown as RedisClient, 1, log as unknown as Logger, {
      ...fast,
      maxBackoffMs: 40,
    });
    await sleep(300);
    const tries = late.info.mock.calls.length;
    // Backing off to every 40 ms (about 8 tries), rather than every 10 ms (30).
    expect(tries).toBeGreaterThan(2);
    expect(tries).toBeLessThan(15);
    expect(log.error).not.toHaveBeenCalled();
    answer = 0; // Redis up, past the grace period, without its replica
    await eventually(() => expect(log.error).toHaveBeenCalledTimes(1), 1_000);
  });

  it('says nothing once stopped, even for a check that was under way', async () => {
    const log = logger();
    let release: () => void = () => {};
    const slow = {
      options: { host: 'redis.example', port: 6380 },
      info: vi.fn(
        () =>
          new Promise<string>((resolve) => {
            release = () => resolve('# Replication\r\nconnected_slaves:0\r\n');
          }),
      ),
    };
    const stop = warnOfTooFewReplicas(slow as unknown as RedisClient, 1, log as unknown as Logger, {
      ...fast,
      graceMs: 0,
    });
    await eventually(() => expect(slow.info).toHaveBeenCalled());
    stop();
    release();
    await sleep(50);
    expect(log.error).not.toHaveBeenCalled();
  });

  describe.skipIf(!redisAvailable())('against real redis-servers', () => {
    let alone: RedisServer;
    let pair: { master: RedisServer; replica: RedisServer };
    const clients: Redis[] = [];
    beforeAll(async () => {
      [alone, pair] = await Promise.all([startRedis(), startReplicated()]);
    }, 30_000);
    afterAll(async () => {
      for (const c of clients) c.disconnect();
      await Promise.all([alone?.stop(), pair?.replica.stop(), pair?.master.stop()]);
    });
    const check = async (server: RedisServer, wanted: number) => {
      const redis = new Redis(server.url);
      clients.push(redis);
      const log = logger();
      const info = vi.spyOn(redis, 'info');
      warnOfTooFewReplicas(redis, wanted, log as unknown as Logger, fast);
      await eventually(() => expect(info).toHaveBeenCalled());
      await sleep(fast.graceMs + 100);
      return log.error.mock.calls.map(([fields]) => fields as Record<string, unknown>);
    };

    it('names a master without replicas, and one with fewer than asked for', async () => {
      expect(await check(alone, 1)).toEqual([
        { redis: `127.0.0.1:${alone.port}`, connectedReplicas: 0, ackReplicas: 1 },
      ]);
      expect(await check(pair.master, 2)).toEqual([
        { redis: `127.0.0.1:${pair.master.port}`, connectedReplicas: 1, ackReplicas: 2 },
      ]);
    });

    it('says nothing for a master with its replica connected', async () => {
      expect(await check(pair.master, 1)).toEqual([]);
    });
  });
});
