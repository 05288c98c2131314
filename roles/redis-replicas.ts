// HOOKGATE_QUEUE_ACK_REPLICAS=N answers 202 for a queued execution only once N replicas
// of its master have it (ADR 0029). A master with fewer replicas connected answers
// every enqueue on it with a 503 after the timeout, which from outside looks like a
// broken gateway. So a gateway asks each master (`INFO replication`) at start and logs
// one error per master that has stayed short for the grace period (replicas connect a
// moment after their master starts). Not a refusal: replicas come and go, and the
// `unconfirmed` count of hookgate_queue_replica_acks_total, with its alert, says so
// while it runs.
import type { Logger } from 'pino';
import { masterServers, serverAddress, type RedisClient } from '../api/records/redis-client.ts';
import { checkInBackground, type BackgroundCheckOptions } from './background-check.ts';

/** `connected_slaves` of an `INFO replication` reply, or undefined. */
export function connectedReplicasOf(info: string): number | undefined {
  const found = /^connected_slaves:(\d+)\s*$/m.exec(info)?.[1];
  return found === undefined ? undefined : Number(found);
}

export interface ReplicaCheckOptions extends BackgroundCheckOptions {
  /** How long a master may stay short before it is said (ms); default 30 s. */
  graceMs?: number;
}

/** A master and the replicas it has connected. */
interface Short {
  redis: string;
  connected: number;
}

async function shortMasters(redis: RedisClient, wanted: number): Promise<Short[]> {
  const masters = masterServers(redis);
  if (masters.length === 0) throw new Error('no master known yet');
  const short: Short[] = [];
  for (const master of masters) {
    const connected = connectedReplicasOf(String(await master.info('replication')));
    if (connected === undefined) throw new Error('INFO replication without connected_slaves');
    if (connected < wanted) short.push({ redis: serverAddress(master), connected });
  }
  return short;
}

/**
 * Asks every master `redis` uses, in the background, whether it has `wanted` replicas
 * connected; logs an error for each one still short after the grace period (once
 * Redis answers, however late). Returns a function that stops the check (shutdown).
 */
export function warnOfTooFewReplicas(
  redis: RedisClient,
  wanted: number,
  logger: Logger,
  options: ReplicaCheckOptions = {},
): () => void {
  const graceMs = options.graceMs ?? 30_000;
  const began = Date.now();
  return checkInBackground(
    () => shortMasters(redis, wanted),
    (short) => {
      if (short.length === 0) return 'done';
      if (Date.now() - began < graceMs) return 'again';
      for (const { redis: address, connected } of short)
        logger.error(
          { redis: address, connectedReplicas: connected, ackReplicas: wanted },
          `HOOKGATE_QUEUE_ACK_REPLICAS=${wanted}, but the Redis master ${address} has ` +
            `${connected} replica${connected === 1 ? '' : 's'} connected: every execution ` +
            'queued there is answered 503 store-unavailable after HOOKGATE_QUEUE_ACK_TIMEOUT_MS. ' +
            'Add replicas or lower the setting (docs/availability.md)',
        );
      return 'done';
    },
    options,
  );
}
