// The Redis client the stores take: one server (`Redis`) or a Redis Cluster
// (`Cluster`). The stores use only what both have — commands, scripts defined with
// `defineCommand`, MULTI and pipelines over keys of one hash slot, pub/sub — and
// every multi-key script or MULTI touches keys of one hash tag (docs/redis-layout.md),
// so the same code runs on both.
import type { Cluster, Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;

/**
 * Another connection like `client` (for a subscriber or a blocking read): a copy of a
 * Cluster client is a Cluster client over the same nodes with the same options.
 */
export function duplicateClient(client: RedisClient): RedisClient {
  return isCluster(client) ? client.duplicate() : client.duplicate();
}

/**
 * A connection like `client` for sharded pub/sub (SSUBSCRIBE): on a Redis Cluster, a
 * client that keeps one subscriber connection per master and sends each channel's
 * SSUBSCRIBE to the master of its slot (one subscriber connection would be refused
 * with MOVED for every other master's channels).
 */
export function shardedSubscriberClient(client: RedisClient): RedisClient {
  if (!isCluster(client)) return client.duplicate();
  return client.duplicate([], { ...client.options, shardedSubscribers: true });
}

/** Whether `client` talks to a Redis Cluster. */
export function isCluster(client: RedisClient): client is Cluster {
  return client.isCluster;
}

/** The servers to ask for a server's own facts (INFO): the client's one, or every master. */
export function masterServers(client: RedisClient): Redis[] {
  return isCluster(client) ? client.nodes('master') : [client];
}

/** `host:port` of a server, for logs (not for public answers: it names the network). */
export function serverAddress(server: Redis): string {
  return `${server.options.host}:${server.options.port}`;
}
