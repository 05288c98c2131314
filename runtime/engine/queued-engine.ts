// The Redis adapter of the execution engine port, used by gateways: `start` writes the
// queued execution record and appends a job to a Redis stream in one atomic script
// (before any 202 goes out), and worker processes (runtime/engine/worker.ts) run it.
// Reads come from the shared executions store, events are relayed through Redis.
//
// With HOOKGATE_QUEUE_SHARDS=N the job goes to the stream of the id's shard, whose
// record, events and index share its hash tag (execution-keys.ts): the script stays
// one atomic step in one slot of a Redis Cluster. The script holds each shard's
// stream to maxQueued / N (rounded up), so racing gateways never pass the bound by
// more than N - 1; the depth, oldest age and drain rate are read over every shard.
import { randomUUID } from 'node:crypto';
import type { ReplicaAcks } from './replica-acks.ts';
import { masterServers, type RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../errors.ts';
import { EXECUTION_FIELDS as F, WORKER_GROUP } from './execution-keys.ts';
import type { RedisExecutionEvents } from './execution-events-redis.ts';
import {
  EXECUTION_KEYS,
  parseTombstone,
  type RedisExecutionStore,
} from './execution-store-redis.ts';
import { executionDiscarded, queuedDiscard, type QueuedDiscard } from './execution-store.ts';
import { recordJson, withStoredInput } from './execution-record-redis.ts';
import { DrainRate, readQueueState, retryAfterSeconds } from './queue-state.ts';
import { withExecutionId } from './util.ts';
import type {
  Execution,
  ExecutionEngine,
  ExecutionFilter,
  ExecutionGone,
  ExecutionPage,
  SequencedEvent,
  StartedExecution,
  StartRequest,
} from './ports.ts';

/** The stream of jobs on one Redis with one shard, and the consumer group of the workers. */
export const QUEUE = { stream: EXECUTION_KEYS.stream, group: WORKER_GROUP } as const;

/** What a job carries: the record (with the input) is in the store under `id`. */
export interface ExecutionJob {
  /** First in the JSON: the store's take script reads it without decoding the rest. */
  id: string;
  triggerKey: string;
  workflowId: string;
  callbackUrl?: string;
  /**
   * The execution attempt this job runs (retry-queue-redis.ts); absent: 1. A job whose
   * attempt the record has moved past is dropped.
   */
  attempt?: number;
  /**
   * The request came with an Idempotency-Key kept this long (StartRequest.idempotencyWindowMs):
   * the worker's discard of its success leaves a tombstone that long (ADR 0041).
   */
  idempotencyWindowMs?: number;
  /**
   * What to do with the record of a success, as the view of the workflow the job was
   * queued under says (queuedDiscard, ADR 0041 amended 2026-11-28 (day)): `true` discard
   * it, `'responded'` discard it if a respond node ran (Wait for Response Node); absent
   * (a Keep workflow, or a job of a gateway from before) keep it. The worker discards only
   * when its own view of the workflow says Discard too.
   */
  discardIfSucceeded?: QueuedDiscard;
}

// KEYS: execution, index, stream. ARGV: record JSON without its input, created ms, id,
// 'queued' event JSON, job JSON, bound (of this shard's stream), the index's lifetime or
// '0' (RedisExecutionStore.refreshIndexExpiry), input JSON, the request's marks: '' for
// most, 's' to mark it watched at once (StartRequest.watched, ADR 0041), 'k' when its id
// is an Idempotency-Key's hint (StartRequest.hinted), 'sk' both (one argument: a request
// with neither costs nothing more). Returns the existing record and input ({ r, i })
// when the id is taken; for a hinted id, the tombstone (a string) its discarded success
// left (DISCARD), queuing nothing; or the stream's length
// (a number) when it holds `bound` jobs already: the bound is checked where the job is
// added, so gateways racing cannot pass it. The execution's hash gets record, input,
// creation time and first event in one HSET (its fields: execution-store-redis.ts).
const ENQUEUE = `
if redis.call('HEXISTS', KEYS[1], '${F.record}') == 1 then
  return redis.call('HMGET', KEYS[1], '${F.record}', '${F.input}')
end
local marks = ARGV[9]
if marks ~= '' and marks ~= 's' then
  local tombstone = redis.call('GET', KEYS[1] .. ':tombstone')
  if tombstone then return tombstone end
end
local length = redis.call('XLEN', KEYS[3])
if length >= tonumber(ARGV[6]) then return length end
redis.call('HSET', KEYS[1], '${F.record}', ARGV[1], '${F.input}', ARGV[8],
  '${F.created}', ARGV[2], '${F.eventCount}', 1, '${F.eventBytes}', #ARGV[4], '${F.eventPrefix}1', ARGV[4])
if marks ~= '' and marks ~= 'k' then redis.call('HSET', KEYS[1], '${F.watched}', 's') end
-- No expiry while queued: the lifetime starts to count down once it finishes (WRITE),
-- so a job that waits longer than the lifetime still finds its record. The queue's
-- bound keeps what waits bounded.
redis.call('PERSIST', KEYS[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if ARGV[7] ~= '0' then redis.call('PEXPIRE', KEYS[2], ARGV[7]) end
redis.call('XADD', KEYS[3], '*', 'job', ARGV[5])
return false
`;

interface EnqueueCommand {
  hookgateEnqueue(
    execution: string,
    index: string,
    stream: string,
    ...args: (string | number)[]
  ): Promise<[string, string | null] | string | number | null>;
}

export interface QueuedEngineOptions {
  redis: RedisClient;
  store: RedisExecutionStore;
  events: RedisExecutionEvents;
  /**
   * Jobs in the stream (waiting or running) at most; start() then answers 503
   * HG_ERR_ENGINE_OVERLOADED with Retry-After. Checked against the depth last read
   * (no Redis command) and again in the enqueue script, so it is never passed, even
   * by gateways racing. Default 100 000.
   */
  maxQueued?: number;
  /** How often the queue is read (the limit, Retry-After and the gauges). Default 1 s. */
  depthEveryMs?: number;
  /** Longest Retry-After of a refusal (also when nothing drains). Default 60 s. */
  maxRetryAfterSeconds?: number;
  /**
   * Refuse new executions (503 store-full) once Redis would hold more than this share
   * of its maxmemory (read with the depth, plus what this gateway queued since): the
   * rest is room for workers to store the results of what is queued, which Redis at
   * its limit (noeviction) would refuse too. Default 0.9; 1 turns it off.
   */
  memoryHeadroom?: number;
  /**
   * Execution ids when the trigger output carries none (replays, dead-letter retries).
   * Default a UUID, as the gateway gives the executions it starts.
   */
  newId?: () => string;
  /**
   * Answer for a queued execution only once this many replicas have it (WAIT after the
   * enqueue; replica-acks.ts). Default: none (Redis' own acknowledgement).
   */
  replicaAcks?: ReplicaAcks;
}

export class QueuedEngine implements ExecutionEngine {
  readonly #redis: RedisClient & EnqueueCommand;
  readonly #store: RedisExecutionStore;
  readonly #events: RedisExecutionEvents;
  readonly #maxQueued: number;
  /** What the enqueue script holds one shard's stream to: maxQueued / N, rounded up. */
  readonly #shardBound: number;
  readonly #newId: () => string;
  readonly #replicaAcks: ReplicaAcks | undefined;
  readonly #timer: NodeJS.Timeout;
  #depth = 0;
  /** Age of the oldest job not done, as last read (s). */
  #oldestAgeSeconds = 0;
  readonly #drain = new DrainRate();
  readonly #maxRetryAfter: number;
  /** Enqueue commands answered so far (see #readDepth). */
  #answered = 0;
  /** Redis memory as last read (bytes; maxmemory 0: no limit) and queued since. */
  #memory = { used: 0, max: 0, since: 0 };
  readonly #memoryHeadroom: number;
  #closing = false;

  constructor(options: QueuedEngineOptions) {
    const redis = options.redis as RedisClient & Partial<EnqueueCommand>;
    if (!redis.hookgateEnqueue) {
      redis.defineCommand('hookgateEnqueue', { numberOfKeys: 3, lua: ENQUEUE });
    }
    this.#redis = redis as RedisClient & EnqueueCommand;
    this.#store = options.store;
    this.#events = options.events;
    this.#maxQueued = options.maxQueued ?? 100_000;
    this.#shardBound = Math.ceil(this.#maxQueued / options.store.layout.shards.length);
    this.#memoryHeadroom = options.memoryHeadroom ?? 0.9;
    this.#maxRetryAfter = options.maxRetryAfterSeconds ?? 60;
    this.#newId = options.newId ?? (() => randomUUID());
    this.#replicaAcks = options.replicaAcks;
    this.#timer = setInterval(() => void this.#readDepth(), options.depthEveryMs ?? 1_000);
    this.#timer.unref();
    void this.#readDepth();
  }

  /** The replica acknowledgements asked for (HOOKGATE_QUEUE_ACK_REPLICAS), if any. */
  get replicaAcks(): ReplicaAcks | undefined {
    return this.#replicaAcks;
  }

  /** Jobs in the stream (waiting or being run), as last read. */
  get queued(): number {
    return this.#depth;
  }

  /** Age in seconds of the oldest job not done, as last read (0: none). */
  get oldestAgeSeconds(): number {
    return this.#oldestAgeSeconds;
  }

  /** Jobs per second the workers finished lately, or undefined when not known. */
  get drainPerSecond(): number | undefined {
    return this.#drain.perSecond;
  }

  /** Reads the queue now (as the timer does every `depthEveryMs`). */
  refresh(): Promise<void> {
    return this.#readDepth();
  }

  #overloaded(depth: number): HttpProblem {
    const seconds = retryAfterSeconds({
      depth,
      bound: this.#maxQueued,
      drainPerSecond: this.#drain.perSecond,
      maxSeconds: this.#maxRetryAfter,
    });
    return new HttpProblem(
      'HG_ERR_ENGINE_OVERLOADED',
      `The execution queue holds its limit of ${this.#maxQueued} jobs; nothing was started`,
      { headers: { 'retry-after': String(seconds) } },
    );
  }

  async start(request: StartRequest): Promise<StartedExecution> {
    if (this.#closing)
      throw new HttpProblem('HG_ERR_SHUTTING_DOWN', 'The gateway is shutting down');
    if (this.#depth >= this.#maxQueued) throw this.#overloaded(this.#depth);
    const memory = this.#memory;
    if (memory.max > 0 && memory.used + memory.since > memory.max * this.#memoryHeadroom) {
      throw new HttpProblem(
        'HG_ERR_STORE_FULL',
        'The shared store is near its memory limit; what is queued must finish first',
        { headers: { 'retry-after': '30' } },
      );
    }
    const id = request.input.metadata.executionId || this.#newId();
    const createdAt = new Date();
    const execution: StartedExecution = {
      id,
      workflowId: request.workflow.workflowId,
      triggerKey: request.trigger.key,
      status: 'queued',
      createdAt: createdAt.toISOString(),
      input: withExecutionId(request.input, id),
      log: [],
    };
    if (request.trigger.uid) execution.triggerUid = request.trigger.uid;
    if (request.accessDigest) execution.accessDigest = request.accessDigest;
    if (request.replayOf) execution.replayOf = request.replayOf;
    if (request.trace) execution.trace = request.trace;
    const queuedEvent: SequencedEvent = {
      type: 'queued',
      executionId: id,
      seq: 1,
      at: execution.createdAt,
    };
    const job = jobOf(id, request);
    const record = recordJson(execution);
    const input = JSON.stringify(execution.input);
    const keys = this.#store.layout.of(id);
    // What Redis allocates for it: the allocator's size classes and per-key overhead
    // (measured: a 100 kB value takes 127 kB of used_memory).
    memory.since += Math.ceil((record.length + input.length) * 1.5) + 512;
    let existing: Awaited<ReturnType<EnqueueCommand['hookgateEnqueue']>>;
    try {
      existing = await this.#redis.hookgateEnqueue(
        keys.execution(id),
        keys.index,
        keys.stream,
        record,
        createdAt.getTime(),
        id,
        JSON.stringify(queuedEvent),
        JSON.stringify(job),
        this.#shardBound,
        this.#store.refreshIndexExpiry(keys) ? this.#store.indexTtlMs : 0,
        input,
        marks(request),
      );
    } finally {
      this.#answered++;
    }
    if (typeof existing === 'string') throw executionDiscarded(id, parseTombstone(existing));
    if (typeof existing === 'number') {
      // Full when it reached Redis (other gateways queued meanwhile): the shard's
      // length then, scaled to all shards, is the depth to refuse with until the next read.
      const depth = existing * this.#store.layout.shards.length;
      this.#depth = Math.max(this.#depth, depth);
      throw this.#overloaded(depth);
    }
    if (!existing) this.#depth++;
    // Queued (now, or by the request this one retries, which may have been refused
    // because its replicas did not answer): on the replicas before it is promised.
    await this.#replicaAcks?.confirm(this.#redis, keys.stream, keys.execution(id));
    if (existing) return withStoredInput(JSON.parse(existing[0]) as Execution, existing[1]);
    // Written into the record above already (recordJson): the flag is the answer's only.
    execution.created = true;
    return execution;
  }

  get(id: string): Promise<Execution | undefined> {
    return this.#store.get(id);
  }

  list(filter: ExecutionFilter): Promise<Execution[]> {
    return this.#store.list(filter);
  }

  page(filter: ExecutionFilter): Promise<ExecutionPage> {
    return this.#store.page(filter);
  }

  subscribe(
    id: string,
    afterSeq: number,
    listener: (event: SequencedEvent) => void,
    onGone?: (gone: ExecutionGone) => void,
  ): () => void {
    return this.#events.subscribe(id, afterSeq, listener, onGone);
  }

  /** Stops accepting executions (those queued stay queued for the workers). */
  close(): void {
    this.#closing = true;
    clearInterval(this.#timer);
    this.#events.close();
  }

  async #readDepth(): Promise<void> {
    // The enqueues may go over another connection than the read, so it may or may not
    // see those answered while it ran: they are added (start() counted them, but this
    // overwrites that). Those still unanswered when it completes are counted by start()
    // when they succeed. So the depth is never under the true one, and over it only by
    // enqueues the read saw and also added here, until the next read. (The bound itself
    // is held by the enqueue script; this is the check that spares Redis the refusals.)
    const answeredBefore = this.#answered;
    // Likewise the memory: what this gateway queued while INFO ran may or may not be in
    // its figure, so it stays counted on top (never under the true use).
    const sinceBefore = this.#memory.since;
    try {
      // A Redis that refuses INFO (some managed ones) leaves the memory check off.
      const [state, memory] = await Promise.all([
        readQueueState(this.#redis, this.#store.layout.streams),
        this.#memoryHeadroom < 1 ? fullestMemory(this.#redis) : Promise.resolve(undefined),
      ]);
      this.#depth = state.depth + (this.#answered - answeredBefore);
      this.#oldestAgeSeconds = state.oldestAgeSeconds;
      this.#drain.observe(state);
      if (memory)
        this.#memory = { ...memory, since: Math.max(0, this.#memory.since - sinceBefore) };
    } catch {
      // Redis unreachable: keep the last value; start() will fail on its own.
    }
  }
}

/** The job of an execution: its id first (TAKE reads it without decoding the rest). */
function jobOf(id: string, request: StartRequest): ExecutionJob {
  const job: ExecutionJob = {
    id,
    triggerKey: request.trigger.key,
    workflowId: request.workflow.workflowId,
  };
  if (request.callbackUrl) job.callbackUrl = request.callbackUrl;
  if (request.idempotencyWindowMs !== undefined)
    job.idempotencyWindowMs = request.idempotencyWindowMs;
  const discard = queuedDiscard(request);
  if (discard !== undefined) job.discardIfSucceeded = discard;
  return job;
}

/** ENQUEUE's marks: 's' watched, 'k' an Idempotency-Key's hint, 'sk' both, '' neither. */
function marks(request: StartRequest): string {
  if (request.watched) return request.hinted ? 'sk' : 's';
  return request.hinted ? 'k' : '';
}

/** used_memory and maxmemory of an INFO memory answer; undefined when it has none. */
function memoryOf(info: string): { used: number; max: number } | undefined {
  const used = /^used_memory:(\d+)/m.exec(info);
  const max = /^maxmemory:(\d+)/m.exec(info);
  return used && max ? { used: Number(used[1]), max: Number(max[1]) } : undefined;
}

/**
 * Memory of the Redis, or on a cluster of the master nearest its limit (a shard on it
 * refuses writes first). A Redis that refuses INFO (some managed ones): undefined.
 */
async function fullestMemory(
  redis: RedisClient,
): Promise<{ used: number; max: number } | undefined> {
  const infos = await Promise.all(
    masterServers(redis).map((node) => node.info('memory').catch(() => '')),
  );
  const share = (m: { used: number; max: number }) => (m.max > 0 ? m.used / m.max : 0);
  let fullest: { used: number; max: number } | undefined;
  for (const info of infos) {
    const m = memoryOf(info);
    if (m && (!fullest || share(m) > share(fullest))) fullest = m;
  }
  return fullest;
}
