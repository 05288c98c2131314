// Replicated acknowledgements (HOOKGATE_QUEUE_ACK_REPLICAS, ADR 0029): a gateway
// answers for a queued execution only once Redis says that many replicas have it (WAIT
// after the enqueue). Redis replicates asynchronously: without this, a master that dies
// after answering the enqueue and before its replica copied it takes the execution
// with it when the replica is promoted, and the caller holds a 202 for nothing.
//
// WAIT counts the writes of the connection it is sent on, and blocks that connection
// until the replicas answer, so requests share WAITs like a group commit: one on the
// wire per connection group at a time, and a request whose enqueue was answered while
// one was out joins the next, sent when that one is answered. Each WAIT goes in a
// pipeline after a small script (MARK) that writes a marker and says which of the
// group's executions it does not find. The marker makes the WAIT count a write of its
// own connection (a WAIT on a connection that has written nothing, as one made again
// after a reconnect, answers at once with every replica); the check makes sure each
// execution is in the history the marker is in, before the marker: on the master that
// answered the enqueue, or on a replica promoted since that had copied it. So the
// replicas that have the marker have the executions. (A WAIT alone, sent where the
// enqueue went, let a test lose an accepted execution when a master was killed.)
import type { RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../errors.ts';

export interface ReplicaAcksOptions {
  /** Replicas that must have a write before it is acknowledged (1 or more). */
  replicas: number;
  /** How long Redis waits for them (WAIT's timeout), in ms. */
  timeoutMs: number;
}

// KEYS: the marker (in the group's hash slot), then the executions. ARGV: the marker's
// lifetime (ms). The positions (1-based) of the executions not found.
const MARK = `
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local missing = {}
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then missing[#missing + 1] = i - 1 end
end
return missing
`;

const MARKER_TTL_MS = 60_000;

/** What one WAIT said: the replicas that have the marker, the executions not found. */
interface Confirmation {
  replicas: number;
  missing: Set<string>;
}

const settled = (): void => undefined;

/** The WAITs of one connection group: the one on the wire, the one to send next. */
class WaitGroup {
  #sent: Promise<Confirmation> | undefined;
  #queued: Promise<Confirmation> | undefined;
  /** The executions of the callers of #queued. */
  #keys: string[] = [];
  readonly #wait: (keys: string[]) => Promise<Confirmation>;

  constructor(wait: (keys: string[]) => Promise<Confirmation>) {
    this.#wait = wait;
  }

  /** What a WAIT sent after this call says, `key` (an execution) among those it checked. */
  next(key: string): Promise<Confirmation> {
    const sent = this.#sent;
    if (!sent) return this.#send([key]);
    this.#keys.push(key);
    this.#queued ??= sent.then(settled, settled).then(() => {
      const keys = this.#keys;
      this.#keys = [];
      this.#queued = undefined;
      return this.#send(keys);
    });
    return this.#queued;
  }

  #send(keys: string[]): Promise<Confirmation> {
    const sent: Promise<Confirmation> = this.#wait(keys).finally(() => {
      if (this.#sent === sent) this.#sent = undefined;
    });
    this.#sent = sent;
    return sent;
  }
}

/** Requests by outcome, since start (the hookgate_queue_replica_acks_total counter). */
export interface ReplicaAckCounts {
  /** Enough replicas confirmed: the 202 went out. */
  confirmed: number;
  /** Fewer replicas than asked for confirmed within the timeout: 503. */
  unconfirmed: number;
  /** The WAIT itself failed (connection, command timeout): 503. */
  failed: number;
}

export class ReplicaAcks {
  readonly counts: ReplicaAckCounts = { confirmed: 0, unconfirmed: 0, failed: 0 };
  readonly #replicas: number;
  readonly #timeoutMs: number;
  readonly #groups = new Map<string, WaitGroup>();
  #waits = 0;

  constructor(options: ReplicaAcksOptions) {
    this.#replicas = options.replicas;
    this.#timeoutMs = options.timeoutMs;
  }

  /** WAIT commands sent so far (tests: how many requests shared one). */
  get waits(): number {
    return this.#waits;
  }

  /**
   * Resolves once `execution` (a key the caller wrote and was answered for) is on the
   * replicas; rejects with a 503 `store-unavailable` when fewer answered within the
   * timeout, the execution is not there (lost in a failover), or the WAIT failed.
   * `slotKey` is a key of the execution's hash slot (its shard's stream): on a cluster
   * each is a group of its own, with its marker in that slot; on one Redis every
   * execution shares one group.
   */
  async confirm(redis: RedisClient, slotKey: string, execution: string): Promise<void> {
    const group = redis.isCluster ? slotKey : '';
    let waits = this.#groups.get(group);
    if (!waits) {
      const marker = `${slotKey}:replica-acks`;
      waits = new WaitGroup((keys) => this.#wait(redis, marker, keys));
      this.#groups.set(group, waits);
    }
    let acknowledged: number;
    try {
      const confirmation = await waits.next(execution);
      // Not in the history the marker is in: gone with a master (the replica promoted
      // had not copied it). No replica can have it.
      acknowledged = confirmation.missing.has(execution) ? 0 : confirmation.replicas;
    } catch {
      this.counts.failed++;
      // The cause stays out of the answer (it may name Redis' address): the caller
      // learns what it can do.
      throw new HttpProblem(
        'HG_ERR_STORE_UNAVAILABLE',
        'The execution was queued, but Redis did not say whether its replicas have it. Retry with the same Idempotency-Key: the retry gets this execution.',
        { headers: { 'retry-after': '1' } },
      );
    }
    if (acknowledged < this.#replicas) {
      this.counts.unconfirmed++;
      throw new HttpProblem(
        'HG_ERR_STORE_UNAVAILABLE',
        `The execution was queued, but ${acknowledged} of the ${this.#replicas} Redis replicas asked for had it within ${this.#timeoutMs} ms. Retry with the same Idempotency-Key: the retry gets this execution.`,
        { headers: { 'retry-after': '1' } },
      );
    }
    this.counts.confirmed++;
  }

  async #wait(redis: RedisClient, marker: string, keys: string[]): Promise<Confirmation> {
    this.#waits++;
    // The script's keys route the pipeline to their master (a cluster client sends a
    // pipeline where its keys are); WAIT then runs on that connection, after it.
    const replies = await redis
      .pipeline()
      .eval(MARK, 1 + keys.length, marker, ...keys, MARKER_TTL_MS)
      .wait(this.#replicas, this.#timeoutMs)
      .exec();
    const [markError, positions] = replies?.[0] ?? [new Error('no reply to the marker'), []];
    const [waitError, count] = replies?.[1] ?? [new Error('no reply to WAIT'), 0];
    if (markError) throw markError;
    if (waitError) throw waitError;
    const missing = new Set((positions as number[]).map((i) => keys[i - 1] as string));
    return { replicas: Number(count), missing };
  }
}
