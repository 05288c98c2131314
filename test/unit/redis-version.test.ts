// The start-up check for Redis 7.0 (shard channels, ADR 0028): the version read from
// INFO, an error logged for an older server (a stand-in answering as Redis 6.2 does:
// no Redis 6 here), nothing for the redis-server the suites run.
import type { Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { redisVersionOf, tooOld, warnOfOldRedis } from '../../roles/redis-version.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { redisOfSuite } from '../support/redis-suite.ts';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.ts';

const logger = () => ({ error: vi.fn(), warn: vi.fn(), info: vi.fn() });

describe('the Redis version check', () => {
  it('reads redis_version from INFO server and compares the major version', () => {
    const info = '# Server\r\nredis_version:6.2.14\r\nredis_git_sha1:00000000\r\n';
    expect(redisVersionOf(info)).toBe('6.2.14');
    expect(redisVersionOf('# Server\r\nredis_mode:standalone\r\n')).toBeUndefined();
    expect(tooOld('6.2.14')).toBe(true);
    expect(tooOld('7.0.15')).toBe(false);
    expect(tooOld('10.0.0')).toBe(false);
  });

  it('logs an error naming a server older than 7.0', async () => {
    const log = logger();
    const old = {
      isCluster: false,
      options: { host: 'redis.example', port: 6379 },
      info: () => Promise.resolve('# Server\r\nredis_version:6.2.14\r\n'),
    } as unknown as RedisClient;
    warnOfOldRedis(old, log as unknown as Logger);
    await eventually(() => expect(log.error).toHaveBeenCalledTimes(1));
    expect(log.error.mock.calls[0]?.[0]).toEqual({
      redisVersion: '6.2.14',
      redis: 'redis.example:6379',
    });
    expect(String(log.error.mock.calls[0]?.[1])).toMatch(/older than 7\.0/);
  });

  describe.skipIf(!redisAvailable())('against the redis-server of the suites', () => {
    const suite = redisOfSuite();

    it('says nothing for Redis 7', async () => {
      const { redis } = suite;
      const version = redisVersionOf(await redis.info('server'));
      expect(version).toMatch(/^\d+\.\d+\.\d+$/);
      const log = logger();
      const info = vi.spyOn(redis, 'info');
      warnOfOldRedis(redis, log as unknown as Logger);
      await eventually(() => expect(info).toHaveBeenCalled());
      await sleep(100);
      expect(log.error).not.toHaveBeenCalled();
    });
  });

  describe.skipIf(!redisAvailable())('against a Redis Cluster of the suites', () => {
    let cluster: RedisCluster;
    beforeAll(async () => {
      cluster = await startRedisCluster();
    }, 60_000);
    afterAll(async () => {
      await cluster?.stop();
    });

    it('asks every master, and says nothing for Redis 7', async () => {
      const client = cluster.client();
      try {
        await client.ping();
        const log = logger();
        const asked: string[] = [];
        for (const node of client.nodes('master')) {
          const info = node.info.bind(node);
          node.info = ((...args: Parameters<typeof info>) => {
            asked.push(String(node.options.port));
            return info(...args);
          }) as typeof node.info;
        }
        warnOfOldRedis(client, log as unknown as Logger);
        // Each master once (a node connecting now also sends INFO for its ready check).
        await eventually(() => expect(new Set(asked).size).toBe(3));
        await sleep(100);
        expect(log.error).not.toHaveBeenCalled();
      } finally {
        client.disconnect();
      }
    });
  });
});
