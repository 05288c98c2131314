// The Redis a suite runs the shared stores and the queue on, as one shape: one
// redis-server, or a real Redis Cluster of three masters (redis-cluster.ts). Suites
// parameterized over both run the same assertions on each (ADR 0021).
import { Redis } from 'ioredis';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { startRedisCluster, type RedisCluster } from './redis-cluster.ts';
import { startRedis, type RedisServer } from './redis.ts';

export interface RedisBackend {
  /** One client made at start (the suite's own). */
  client: RedisClient;
  /** Another client (the caller disconnects it). */
  connect(): RedisClient;
  /** REDIS_URL for the roles (`redis://…` or `redis+cluster://…`). */
  url: string;
  /** Empties every master. */
  flushall(): Promise<void>;
  /** Every key (on a cluster: of every master). */
  keys(): Promise<string[]>;
  /** The cluster, when it is one (to move slots). */
  cluster?: RedisCluster;
  stop(): Promise<void>;
}

export async function singleRedis(): Promise<RedisBackend> {
  return serverBackend(await startRedis());
}

/** One redis-server started already (e.g. a replica's master); stop() stops it too. */
export function serverBackend(server: RedisServer): RedisBackend {
  const client = new Redis(server.url);
  return {
    client,
    connect: () => new Redis(server.url),
    url: server.url,
    flushall: async () => void (await client.flushall()),
    keys: () => client.keys('*'),
    async stop() {
      client.disconnect();
      await server.stop();
    },
  };
}

export async function redisCluster(): Promise<RedisBackend> {
  const cluster = await startRedisCluster();
  const client = cluster.client();
  return {
    client,
    connect: () => cluster.client(),
    url: cluster.url,
    cluster,
    flushall: () => cluster.flushall(),
    async keys() {
      const keys = await Promise.all(client.nodes('master').map((node) => node.keys('*')));
      return keys.flat();
    },
    async stop() {
      client.disconnect();
      await cluster.stop();
    },
  };
}
