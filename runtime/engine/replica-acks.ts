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
//
// On a Redis Cluster a group is a master: WAIT blocks the one connection a client has
// to it, so every shard the master serves shares its WAITs (one MARK per shard, each
// in its slot, then one WAIT, in one pipeline). A group per shard queued the WAITs of
// a master's shards one behind the other on that connection: with a replica down, a
// request could wait its timeout once for each shard ahead of it.
import calculateSlot from 'cluster-key-slot';
import { isCluster, type RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../errors.ts';

export interface ReplicaAcksOptions {
  /** Replicas that must have a write before it is acknowledged (1 or more). */
  replicas: number;
  /** How long Redis waits for them (WAIT's timeout), in ms. */
  timeoutMs: number;
}

// KEYS: the marker, then the executions, all in one hash slot. ARGV: the marker's
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

/**
 * What the WAITs of a group said, per execution: how many replicas have it (0 for one
 * not found, lost in a failover), or why its master did not say.
 */
type Confirmation = Map<string, number | Error>;

const settled = (): void => undefined;

/** An execution to confirm, and a key of its hash slot (its shard's stream). */
interface Pending {
  slotKey: string;
  execution: string;
}

/** The WAITs of one connection group: the one on the wire, the one to send next. */
class WaitGroup {
  #sent: Promise<Confirmation> | undefined;
  #queued: Promise<Confirmation> | undefined;
  /** The executions of the callers of #queued. */
  #pending: Pending[] = [];
  readonly #wait: (pending: Pending[]) => Promise<Confirmation>;

  constructor(wait: (pending: Pending[]) => Promise<Confirmation>) {
    this.#wait = wait;
  }

  /** What a WAIT sent after this call says, `pending`'s execution among those it checked. */
  next(pending: Pending): Promise<Confirmation> {
    // A next WAIT is due already (the one out may have just been answered, its
    // successor not sent yet): join it rather than send a second one beside it.
    if (this.#queued) {
      this.#pending.push(pending);
      return this.#queued;
    }
    const sent = this.#sent;
    if (!sent) return this.#send([pending]);
    this.#pending.push(pending);
    this.#queued = sent.then(settled, settled).then(() => {
      const all = this.#pending;
      this.#pending = [];
      this.#queued = undefined;
      return this.#send(all);
    });
    return this.#queued;
  }

  /** Nothing on the wire, nothing due: the group can be forgotten. */
  get idle(): boolean {
    return !this.#sent && !this.#queued;
  }

  #send(keys: Pending[]): Promise<Confirmation> {
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
   * `slotKey` is a key of the execution's hash slot (its shard's stream), where its
   * marker goes. On one Redis every execution shares one group; on a cluster the
   * executions of one master do.
   */
  async confirm(redis: RedisClient, slotKey: string, execution: string): Promise<void> {
    const group = groupOf(redis, slotKey);
    let waits = this.#groups.get(group);
    if (!waits) {
      waits = new WaitGroup((pending) => this.#wait(redis, pending));
      this.#groups.set(group, waits);
    }
    const acknowledged = await waits
      .next({ slotKey, execution })
      .then((confirmation) => confirmation.get(execution) ?? new Error('not confirmed'))
      .catch((error: unknown) => error);
    // Groups are few (a master each), but masters come and go with failovers.
    if (waits.idle && this.#groups.get(group) === waits) this.#groups.delete(group);
    if (typeof acknowledged !== 'number') {
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

  /**
   * One pipeline per master as the client knows the slot map now: it may have learnt
   * of a moved slot since the group was formed, and a cluster client refuses a
   * pipeline whose keys two masters serve.
   */
  async #wait(redis: RedisClient, pending: Pending[], attempt = 0): Promise<Confirmation> {
    const byMaster = new Map<string, Map<string, string[]>>();
    for (const { slotKey, execution } of pending) {
      const master = groupOf(redis, slotKey);
      const bySlot = byMaster.get(master) ?? new Map<string, string[]>();
      byMaster.set(master, bySlot);
      const executions = bySlot.get(slotKey);
      if (executions) executions.push(execution);
      else bySlot.set(slotKey, [execution]);
    }
    const confirmation: Confirmation = new Map();
    await Promise.all(
      [...byMaster.values()].map((bySlot) => this.#waitOnMaster(redis, bySlot, confirmation)),
    );
    // A mark redirected (its slot moved or moving): a cluster client follows MOVED and
    // ASK on its own for a single command, but not in a pipeline with a write (WAIT)
    // that succeeded. So those are asked again, once the client has its slot map
    // refreshed, a few times over a few hundred ms: a slot's migration takes about that.
    const redirected = pending.filter((p) => isRedirection(confirmation.get(p.execution)));
    if (redirected.length > 0 && attempt < REDIRECTED_RETRIES) {
      if (isCluster(redis)) redis.refreshSlotsCache();
      await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
      for (const [execution, answer] of await this.#wait(redis, redirected, attempt + 1))
        confirmation.set(execution, answer);
    }
    return confirmation;
  }

  /**
   * The pipeline of one master's slots, its answers into `confirmation`. The client
   * may still refuse it, before sending anything: ioredis checks a pipeline's slots
   * against node groups of its own (master and replicas), which it updates apart from
   * `slots` when a MOVED comes in, until it refreshes its map. Then each slot gets a
   * pipeline of its own.
   */
  async #waitOnMaster(
    redis: RedisClient,
    bySlot: Map<string, string[]>,
    confirmation: Confirmation,
  ): Promise<void> {
    try {
      await this.#pipeline(redis, bySlot, confirmation);
    } catch (error) {
      if (bySlot.size > 1 && refusedAsCrossNode(error)) {
        this.#waits--;
        await Promise.all(
          [...bySlot].map((slot) => this.#waitOnMaster(redis, new Map([slot]), confirmation)),
        );
        return;
      }
      for (const executions of bySlot.values())
        for (const execution of executions) confirmation.set(execution, error as Error);
    }
  }

  /**
   * One MARK per hash slot, its executions as its keys, then WAIT. The keys route the
   * pipeline to their master; WAIT runs on that connection, after the marks. A mark
   * that failed (its slot moving, say) fails its own executions only.
   */
  async #pipeline(
    redis: RedisClient,
    bySlot: Map<string, string[]>,
    confirmation: Confirmation,
  ): Promise<void> {
    this.#waits++;
    const pipeline = redis.pipeline();
    for (const [slotKey, executions] of bySlot)
      pipeline.eval(
        MARK,
        1 + executions.length,
        `${slotKey}:replica-acks`,
        ...executions,
        MARKER_TTL_MS,
      );
    const replies = (await pipeline.wait(this.#replicas, this.#timeoutMs).exec()) ?? [];
    const [waitError, count] = replies[bySlot.size] ?? [new Error('no reply to WAIT'), 0];
    if (waitError) throw waitError;
    let i = 0;
    for (const executions of bySlot.values()) {
      const [markError, positions] = replies[i++] ?? [new Error('no reply to the marker'), []];
      for (const execution of executions) confirmation.set(execution, markError ?? Number(count));
      // Not in the history the marker is in: gone with a master (the replica
      // promoted had not copied it). No replica can have it.
      if (!markError)
        for (const p of positions as number[]) confirmation.set(executions[p - 1] as string, 0);
    }
  }
}

/** Marks asked again after a redirection: 25, 50, 100, 200, 400 ms apart. */
const REDIRECTED_RETRIES = 5;

/** Whether an answer is a cluster redirection (the slot moved, is moving, or is down). */
function isRedirection(answer: number | Error | undefined): boolean {
  return answer instanceof Error && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(answer.message);
}

/** Whether a cluster client refused a pipeline for keys of several node groups. */
function refusedAsCrossNode(error: unknown): boolean {
  return error instanceof Error && error.message.includes('same slots allocation group');
}

/**
 * The connection group of a key: on a cluster the master serving its slot (as the
 * client last learnt the slot map; the key itself until it has one), on one Redis
 * the one connection.
 */
function groupOf(redis: RedisClient, slotKey: string): string {
  if (!isCluster(redis)) return '';
  return redis.slots[calculateSlot(slotKey)]?.[0] ?? slotKey;
}
