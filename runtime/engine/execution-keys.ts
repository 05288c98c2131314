// Every Redis key of executions and their queue, by shard (ADR 0021, docs/redis-layout.md).
//
// An execution id belongs to shard `shardOf(id) = fnv1a(id) mod N` (N =
// HOOKGATE_QUEUE_SHARDS). Every key of the execution, and its shard's index, byte
// budget, stream and retry set, carry the shard's hash tag `{s<k>}`, so a Redis Cluster
// keeps them in one slot and each script stays one atomic step:
//
//   hookgate:{s<k>}:execution:<id>                the execution: one hash of its record
//                                                 and events (execution-store-redis.ts)
//   hookgate:{s<k>}:execution:<id>:whole:<seq>    a cut event, whole for a moment
//   hookgate:{s<k>}:execution:<id>:tombstone      a discarded success that came with an
//                                                 Idempotency-Key, for the key's window
//   hookgate:{s<k>}:exec:<id>:events              the pub/sub channel of its events
//                                                 (a channel, not a key: the name is the
//                                                 one gateways have always subscribed to)
//   hookgate:{s<k>}:executions                    index (ids by creation time)
//   hookgate:{s<k>}:executions:finished|sizes|bytes  the shard's byte budget
//   hookgate:{s<k>}:executions:held|heldbytes  records held for their dead letters
//   hookgate:{s<k>}:queue:executions              the shard's stream (group `workers`)
//   hookgate:{s<k>}:queue:retries                 the shard's due retry attempts
//   hookgate:{deadletters}, hookgate:{deadletters}:entries|holds  dead letters (one tag)
//
// N = 1 on one Redis (not a cluster) keeps its names untagged (`hookgate:execution:<id>`, `hookgate:executions`, `hookgate:queue:executions`,
// `hookgate:queue:retries`, `hookgate:deadletters`…).
// N is fixed for a deployment: another N maps ids to other shards (drain first).

/**
 * The fields of an execution's hash (`execution(id)`): the store, the gateway's enqueue
 * and the retry hand-off write them; execution-store-redis.ts says what each holds.
 */
export const EXECUTION_FIELDS = {
  /** The record without its input (JSON). */
  record: 'r',
  /** The input (JSON), written when the execution is queued and again only when cut. */
  input: 'i',
  created: 'c',
  eventCount: 'n',
  eventBytes: 'eb',
  /** Followed by the event's position, 1 … n. */
  eventPrefix: 'e:',
  /** Set once a gateway listens for the execution's events: writes publish them from then on. */
  watched: 'w',
  /**
   * A dead-lettered record's hold (dead-letters.ts HeldRecords): the number of its last
   * hold, negative until the add that held it has listed its entry.
   */
  hold: 'h',
} as const;

/** The consumer group of the workers, on every shard's stream. */
export const WORKER_GROUP = 'workers';

/** The keys of one shard: its index, budget, stream and retry set, and its executions'. */
export interface ShardKeys {
  /** 0 … N-1. */
  readonly shard: number;
  /** Prefix of the execution keys (`…execution:`): a script builds an execution's keys from it. */
  readonly executionPrefix: string;
  readonly index: string;
  readonly finished: string;
  readonly sizes: string;
  readonly bytes: string;
  /** Records held for their dead-letter entries (dead-letters.ts HeldRecords), and their bytes. */
  readonly held: string;
  readonly heldBytes: string;
  /** The shard's stream of jobs (consumer group WORKER_GROUP). */
  readonly stream: string;
  /** The shard's sorted set of retry attempts, by due time. */
  readonly retries: string;
  /** The execution's hash: its record and events (execution-store-redis.ts). */
  execution(id: string): string;
  /** The pub/sub channel of the execution's events (no key). */
  channel(id: string): string;
  /** A cut event's whole JSON, kept for a moment. */
  whole(id: string, seq: number): string;
  /**
   * What a discarded success that came with an Idempotency-Key leaves (ADR 0041): its
   * outcome and when, for the key's window (named from the execution's key by the scripts).
   */
  tombstone(id: string): string;
}

export interface DeadLetterKeys {
  readonly index: string;
  readonly entries: string;
  /** Hash: execution id -> the number of the hold its entry was written under. */
  readonly holds: string;
}

/** Most shards a deployment may have (each worker keeps a blocking read per shard). */
export const MAX_QUEUE_SHARDS = 256;

export interface ExecutionLayoutOptions {
  /** HOOKGATE_QUEUE_SHARDS. Default 1. */
  shards?: number;
  /** A Redis Cluster: names are tagged even with one shard. */
  cluster?: boolean;
}

/** FNV-1a (32 bit) of the id's UTF-16 code units: cheap, stable, spreads uuids evenly. */
function fnv1a(id: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

function shardKeys(shard: number, tag: string): ShardKeys {
  const base = tag ? `hookgate:${tag}:` : 'hookgate:';
  const executionPrefix = `${base}execution:`;
  const index = `${base}executions`;
  return {
    shard,
    executionPrefix,
    index,
    finished: `${index}:finished`,
    sizes: `${index}:sizes`,
    bytes: `${index}:bytes`,
    held: `${index}:held`,
    heldBytes: `${index}:heldbytes`,
    stream: `${base}queue:executions`,
    retries: `${base}queue:retries`,
    execution: (id) => `${executionPrefix}${id}`,
    channel: (id) => `${base}exec:${id}:events`,
    whole: (id, seq) => `${executionPrefix}${id}:whole:${seq}`,
    tombstone: (id) => `${executionPrefix}${id}:tombstone`,
  };
}

/** Where every execution key of a deployment is; one per process, shared by its stores. */
export class ExecutionLayout {
  /** Every shard, 0 … N-1. */
  readonly shards: readonly ShardKeys[];
  readonly deadLetters: DeadLetterKeys;
  /** Whether names carry hash tags (a cluster, or more than one shard). */
  readonly tagged: boolean;

  constructor(options: ExecutionLayoutOptions = {}) {
    const n = options.shards ?? 1;
    if (!Number.isInteger(n) || n < 1 || n > MAX_QUEUE_SHARDS)
      throw new RangeError(
        `queue shards must be an integer from 1 to ${MAX_QUEUE_SHARDS}, not ${n}`,
      );
    this.tagged = n > 1 || options.cluster === true;
    this.shards = Array.from({ length: n }, (_v, k) => shardKeys(k, this.tagged ? `{s${k}}` : ''));
    this.deadLetters = this.tagged
      ? {
          index: 'hookgate:{deadletters}',
          entries: 'hookgate:{deadletters}:entries',
          holds: 'hookgate:{deadletters}:holds',
        }
      : {
          index: 'hookgate:deadletters',
          entries: 'hookgate:deadletters:entries',
          holds: 'hookgate:deadletters:holds',
        };
  }

  /** The shard of an execution id. */
  shardOf(id: string): number {
    return this.shards.length === 1 ? 0 : fnv1a(id) % this.shards.length;
  }

  /** The keys of an execution's shard (its hash, index, stream…). */
  of(id: string): ShardKeys {
    return this.shards[this.shardOf(id)] as ShardKeys;
  }

  /** Every shard's stream (queue depth and age read them all). */
  get streams(): string[] {
    return this.shards.map((s) => s.stream);
  }
}

/** One shard on one Redis: the names from before shards (no tags). */
export const SINGLE_REDIS_LAYOUT = new ExecutionLayout();
