// Redis 7.0 or newer: execution events go over shard channels (SPUBLISH, SSUBSCRIBE;
// ADR 0028), which Redis 6 does not know, so there every write of a watched execution
// would fail, and callers waiting for one would time out. Said once at start-up, as an
// error naming the version (not a refusal: the roles start while Redis is unreachable,
// and nothing else needs 7.0). On a cluster each master is asked.
import type { Logger } from 'pino';
import { masterServers, serverAddress, type RedisClient } from '../api/records/redis-client.ts';
import { checkInBackground, type BackgroundCheckOptions } from './background-check.ts';

export const MIN_REDIS_MAJOR = 7;

/** The `redis_version` of an `INFO server` reply, or undefined. */
export function redisVersionOf(info: string): string | undefined {
  return /^redis_version:([0-9][0-9.]*)\s*$/m.exec(info)?.[1];
}

/** Whether `version` (x.y.z) is older than MIN_REDIS_MAJOR.0. */
export function tooOld(version: string): boolean {
  return Number(version.split('.')[0]) < MIN_REDIS_MAJOR;
}

/** A server and the version it said (undefined: INFO without redis_version). */
interface Said {
  redis: string;
  version: string | undefined;
}

async function versionsOf(redis: RedisClient): Promise<Said[]> {
  const nodes = masterServers(redis);
  if (nodes.length === 0) throw new Error('no master known yet');
  const said: Said[] = [];
  for (const node of nodes)
    said.push({
      redis: serverAddress(node),
      version: redisVersionOf(String(await node.info('server'))),
    });
  return said;
}

/**
 * Logs, once Redis answers (in the background), every Redis server older than 7.0 that
 * `redis` uses. Returns the stop function (shutdown).
 */
export function warnOfOldRedis(
  redis: RedisClient,
  logger: Logger,
  options: BackgroundCheckOptions = {},
): () => void {
  return checkInBackground(
    () => versionsOf(redis),
    (said) => {
      // A server whose INFO has no redis_version (renamed?): nothing can be said of it.
      for (const { redis: address, version } of said)
        if (version !== undefined && tooOld(version))
          logger.error(
            { redisVersion: version, redis: address },
            `Redis ${version} is older than ${MIN_REDIS_MAJOR}.0: the events of executions ` +
              'callers wait for (shard channels) cannot be published there, so those callers ' +
              'time out; upgrade Redis (docs/redis-layout.md)',
          );
      return 'done';
    },
    options,
  );
}
