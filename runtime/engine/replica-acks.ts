// Replicated acknowledgements (HOOKGATE_QUEUE_ACK_REPLICAS, ADR 0029): a gateway
// answers for a queued execution only once Redis says that many replicas have it (WAIT
// after the enqueue). Redis replicates asynchronously: without this, a master that dies
// after answering the enqueue and before its replica copied it takes the execution
// with it when the replica is promoted, and the caller holds a 202 for nothing.
//
// WAIT counts the writes of the connection it is sent on, so it goes where the enqueue
// went: the request client's connection to the master of the shard's slot (a
// pipeline keyed by the shard's stream routes it there on a Redis Cluster). It also
// blocks that connection until the replicas answer, so requests share WAITs like a
// group commit: one WAIT on the wire per connection group at a time, and a write that
// finished while one was out joins the next, sent when that one is answered (the one
// out may have been sent before the write reached Redis). A WAIT covers every write
// sent on its connection before it.
import type { RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../errors.ts';

export interface ReplicaAcksOptions {
  /** Replicas that must have a write before it is acknowledged (1 or more). */
  replicas: number;
  /** How long Redis waits for them (WAIT's timeout), in ms. */
  timeoutMs: number;
}

const settled = (): void => undefined;

/** The WAITs of one connection group: the one on the wire, the one to send next. */
class WaitGroup {
  #sent: Promise<number> | undefined;
  #queued: Promise<number> | undefined;
  readonly #wait: () => Promise<number>;

  constructor(wait: () => Promise<number>) {
    this.#wait = wait;
  }

  /** The replicas' count of a WAIT sent after this call. */
  next(): Promise<number> {
    const sent = this.#sent;
    if (!sent) return this.#send();
    this.#queued ??= sent.then(settled, settled).then(() => {
      this.#queued = undefined;
      return this.#send();
    });
    return this.#queued;
  }

  #send(): Promise<number> {
    const sent: Promise<number> = this.#wait().finally(() => {
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

  /** WAIT commands sent so far (tests, metrics). */
  get waits(): number {
    return this.#waits;
  }

  /**
   * Resolves once the writes made to `key`'s master on `redis` before this call are on
   * the replicas; rejects with a 503 `store-unavailable` when fewer answered within
   * the timeout, or the WAIT failed. On one Redis every key shares one connection (one
   * group); on a cluster each shard's stream is a group of its own.
   */
  async confirm(redis: RedisClient, key: string): Promise<void> {
    const group = redis.isCluster ? key : '';
    let waits = this.#groups.get(group);
    if (!waits) {
      waits = new WaitGroup(() => this.#wait(redis, key));
      this.#groups.set(group, waits);
    }
    let acknowledged: number;
    try {
      acknowledged = await waits.next();
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

  async #wait(redis: RedisClient, key: string): Promise<number> {
    this.#waits++;
    // EXISTS only routes the pipeline to the key's master (a cluster client sends a
    // pipeline where its keys are); WAIT then runs on that connection.
    const replies = await redis.pipeline().exists(key).wait(this.#replicas, this.#timeoutMs).exec();
    const [error, count] = replies?.[1] ?? [new Error('no reply to WAIT'), 0];
    if (error) throw error;
    return Number(count);
  }
}
