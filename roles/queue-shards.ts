// On a Redis Cluster, each shard of the execution queue (HOOKGATE_QUEUE_SHARDS) is one
// hash slot, so it lives on one master. Fewer shards than masters leave masters without
// executions, and few shards per master spread unevenly: said once at start-up, as a
// warning (not a refusal: one shard on a cluster is correct, only not spread, and the
// number of masters changes with resharding and failovers while N stays).
import type { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import { isCluster, type RedisClient } from '../api/records/redis-client.ts';
import { ExecutionLayout } from '../runtime/engine/execution-keys.ts';
import { checkInBackground, type BackgroundCheckOptions } from './background-check.ts';

export interface ShardSpread {
  /** Masters of the cluster. */
  masters: number;
  /** Shards on each master (port of the master -> shards), masters without any included. */
  perMaster: Map<string, number>;
}

/** Which master serves each shard of `shards` now. */
export async function shardSpread(cluster: Cluster, shards: number): Promise<ShardSpread> {
  const layout = new ExecutionLayout({ shards, cluster: true });
  const ranges = await cluster.cluster('SLOTS');
  const perMaster = new Map<string, number>();
  for (const [, , master] of ranges) if (master) perMaster.set(`${master[0]}:${master[1]}`, 0);
  const slots = await Promise.all(
    layout.shards.map(async (s) => Number(await cluster.cluster('KEYSLOT', s.stream))),
  );
  for (const slot of slots) {
    const master = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2];
    if (!master) continue;
    const name = `${master[0]}:${master[1]}`;
    perMaster.set(name, (perMaster.get(name) ?? 0) + 1);
  }
  return { masters: perMaster.size, perMaster };
}

/**
 * Logs, once the cluster answers (in the background), how the shards fall on its
 * masters: a warning when a master gets none. Nothing for a single Redis. Returns the
 * stop function (shutdown).
 */
export function warnOfUnevenShards(
  redis: RedisClient,
  shards: number,
  logger: Logger,
  options: BackgroundCheckOptions = {},
): () => void {
  if (!isCluster(redis)) return () => {};
  return checkInBackground(
    () => shardSpread(redis, shards),
    ({ masters, perMaster }) => {
      const counts = Object.fromEntries(perMaster);
      const idle = [...perMaster.values()].filter((n) => n === 0).length;
      if (idle > 0)
        logger.warn(
          { queueShards: shards, masters, shardsPerMaster: counts },
          `HOOKGATE_QUEUE_SHARDS=${shards} leaves ${idle} of ${masters} Redis Cluster masters ` +
            'without executions; set it to about 4 per master (docs/redis-layout.md)',
        );
      else logger.info({ queueShards: shards, shardsPerMaster: counts }, 'queue shards');
      return 'done';
    },
    options,
  );
}

/** Where gateways and workers say which HOOKGATE_QUEUE_SHARDS they use (hash: N -> ms). */
export const SHARD_COUNT_KEY = 'hookgate:queue:shard-counts';

/**
 * Every gateway (queue mode) and worker says, now and every `everyMs`, which number of
 * shards it uses, and reads what the others said: another number said within
 * `windowMs` is logged as an error (once per number and 10 minutes). With two numbers
 * at once, gateways write to shards the workers may not read, and those jobs wait
 * forever; a rolling change of N shows here while old and new pods overlap. Log only:
 * what to do (drain, align the value) is the operator's call. Returns stop().
 */
export function watchShardCount(
  redis: RedisClient,
  shards: number,
  logger: Logger,
  options: { everyMs?: number; windowMs?: number; now?: () => number } = {},
): () => void {
  const everyMs = options.everyMs ?? 60_000;
  const windowMs = options.windowMs ?? 3 * everyMs;
  const now = options.now ?? Date.now;
  const told = new Map<string, number>();
  const tick = async () => {
    try {
      const at = now();
      const [, , said] = (await redis
        .multi()
        .hset(SHARD_COUNT_KEY, String(shards), String(at))
        .pexpire(SHARD_COUNT_KEY, 2 * windowMs)
        .hgetall(SHARD_COUNT_KEY)
        .exec()
        .then((replies) => (replies ?? []).map(([, reply]) => reply))) as [
        unknown,
        unknown,
        Record<string, string>,
      ];
      for (const [other, when] of Object.entries(said ?? {})) {
        if (other === String(shards) || Number(when) < at - windowMs) continue;
        if ((told.get(other) ?? -Infinity) > at - 600_000) continue;
        told.set(other, at);
        logger.error(
          { queueShards: shards, other: Number(other) },
          `HOOKGATE_QUEUE_SHARDS is ${shards} here but ${other} on another gateway or worker of ` +
            'this Redis: jobs queued to shards the workers do not read wait until the values ' +
            'agree (docs/redis-layout.md)',
        );
      }
    } catch {
      // Redis unreachable: the roles report that on their own; the next tick says it.
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * The start-up checks of a process that uses the queue (gateway in queue mode, worker):
 * how the shards fall on a cluster's masters, and the same N everywhere. Returns stop().
 */
export function checkQueueShards(redis: RedisClient, shards: number, logger: Logger): () => void {
  const stopSpread = warnOfUnevenShards(redis, shards, logger);
  const stopWatch = watchShardCount(redis, shards, logger);
  return () => {
    stopSpread();
    stopWatch();
  };
}
