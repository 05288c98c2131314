// A real Redis Cluster for tests: `masters` redis-servers in cluster mode on free
// loopback ports (each with `replicasPerMaster` replicas), joined with
// `redis-cli --cluster create`, ready when every node reports cluster_state:ok. About
// 5 s on the development machine. Skipping and CI rules as for a single server
// (redisAvailable in ./redis.ts).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { startRedis, type RedisServer } from './redis.ts';

const run = promisify(execFile);

export interface RedisCluster {
  nodes: RedisServer[];
  /** host:port of every node, for ioredis' Cluster or REDIS_CLUSTER_NODES. */
  seeds: { host: string; port: number }[];
  /** REDIS_URL for the product: `redis+cluster://127.0.0.1:<port>,...` (roles/redis.ts). */
  url: string;
  /** A cluster client (the caller closes it). */
  client(): Cluster;
  /** Empties every master (FLUSHALL on a cluster client reaches one node only). */
  flushall(): Promise<void>;
  /** Messages the nodes sent each other over the cluster bus for PUBLISH, summed. */
  busPublishes(): Promise<number>;
  /**
   * The replicas, once each has its link to its master up (they attach a moment after
   * the cluster reports ok, and sync after that).
   */
  linkedReplicas(): Promise<RedisServer[]>;
  /** Moves `slot` from the master serving it to another master, live (MIGRATE of its keys). */
  moveSlot(slot: number): Promise<void>;
  stop(): Promise<void>;
}

const CLUSTER_ARGS = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'];

async function clusterInfo(port: number): Promise<string> {
  const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    return String(await redis.cluster('INFO'));
  } finally {
    redis.disconnect();
  }
}

export async function startRedisCluster(
  options: { masters?: number; replicasPerMaster?: number; nodeTimeoutMs?: number } = {},
): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 0;
  const args = [...CLUSTER_ARGS, '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 2000)];
  const nodes = await Promise.all(
    Array.from({ length: masters * (1 + replicas) }, () => startRedis({ args })),
  );
  const stop = async () => void (await Promise.all(nodes.map((n) => n.stop())));
  try {
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    for (let i = 0; ; i++) {
      const infos = await Promise.all(nodes.map((n) => clusterInfo(n.port)));
      if (infos.every((info) => info.includes('cluster_state:ok'))) break;
      if (i > 150) throw new Error(`Redis Cluster not ok after 15 s:\n${infos.join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const seeds = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  return {
    nodes,
    seeds,
    url: `redis+cluster://${seeds.map((s) => `${s.host}:${s.port}`).join(',')}`,
    client: () => new Cluster(seeds),
    async flushall() {
      await Promise.all(
        nodes.map(async (node) => {
          const redis = new Redis({ port: node.port, host: '127.0.0.1' });
          try {
            const role = String(await redis.role().then((r) => r[0]));
            if (role === 'master') await redis.flushall();
          } finally {
            redis.disconnect();
          }
        }),
      );
    },
    async busPublishes() {
      let sum = 0;
      for (const node of nodes) {
        const redis = new Redis({ port: node.port, host: '127.0.0.1' });
        try {
          const info = String(await redis.cluster('INFO'));
          sum += Number(/cluster_stats_messages_publish_sent:(\d+)/.exec(info)?.[1] ?? 0);
        } finally {
          redis.disconnect();
        }
      }
      return sum;
    },
    async linkedReplicas() {
      const linked: RedisServer[] = [];
      for (const node of nodes) {
        const redis = new Redis({ port: node.port, host: '127.0.0.1' });
        try {
          for (let i = 0; ; i++) {
            const info = await redis.info('replication');
            if (info.includes('role:master')) break;
            if (info.includes('master_link_status:up')) {
              linked.push(node);
              break;
            }
            if (i > 300) throw new Error(`replica ${node.port} not linked after 30 s:\n${info}`);
            await new Promise((r) => setTimeout(r, 100));
          }
        } finally {
          redis.disconnect();
        }
      }
      return linked;
    },
    async moveSlot(slot) {
      const admin = new Cluster(seeds);
      try {
        const slots = await admin.cluster('SLOTS');
        const master = (range: (typeof slots)[number] | undefined) => {
          const node = range?.[2];
          if (!node) throw new Error(`slot ${slot}: no master found`);
          return { port: node[1], id: node[2] };
        };
        const source = master(slots.find(([from, to]) => slot >= from && slot <= to));
        const target = master(slots.find(([, , node]) => node?.[1] !== source.port));
        const [sourcePort, sourceId, targetPort, targetId] = [
          source.port,
          source.id,
          target.port,
          target.id,
        ];
        const from = new Redis({ port: sourcePort, host: '127.0.0.1' });
        const dest = new Redis({ port: targetPort, host: '127.0.0.1' });
        try {
          // The documented live resharding steps (CLUSTER SETSLOT, MIGRATE, SETSLOT NODE).
          await dest.cluster('SETSLOT', slot, 'IMPORTING', sourceId);
          await from.cluster('SETSLOT', slot, 'MIGRATING', targetId);
          for (;;) {
            const keys = await from.cluster('GETKEYSINSLOT', slot, 100);
            if (keys.length === 0) break;
            await from.call('MIGRATE', '127.0.0.1', targetPort, '', 0, 5000, 'KEYS', ...keys);
          }
          for (const node of nodes) {
            const redis = new Redis({ port: node.port, host: '127.0.0.1' });
            try {
              const role = String(await redis.role().then((r) => r[0]));
              if (role === 'master') await redis.cluster('SETSLOT', slot, 'NODE', targetId);
            } finally {
              redis.disconnect();
            }
          }
        } finally {
          from.disconnect();
          dest.disconnect();
        }
      } finally {
        admin.disconnect();
      }
    },
    stop,
  };
}
