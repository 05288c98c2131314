// A worker: takes execution jobs off the Redis stream with a consumer group and runs
// them with the in-process engine, whose store is the shared Redis one (so gateways
// see progress, logs and results, and relay the events to waiting callers).
//
// At least once (acceptance rule G14): a job is acknowledged only after its execution
// has finished and been saved. While it runs, the worker renews its claim on the job
// (XCLAIM resets the idle time); a job that nobody has renewed for `claimIdleMs` (its
// worker died) is claimed by another worker (XAUTOCLAIM) and run again from the start,
// with the same execution id, so a callback keeps its webhook-id.
//
// Retries (a workflow's spec.retry): the engine hands an execution whose attempt failed
// to the Redis retry queue (retry-queue-redis.ts) before its job is acknowledged; every
// worker moves due attempts back to the stream. A job carries its attempt number, and
// one whose attempt the record has moved past is dropped, so a worker killed at any
// point of a retry loses nothing and runs no attempt twice after it was handed over.
//
// Redis work per job (issue 14): a loop first takes what its shard has without waiting,
// each job with its record and event count, in one script for the whole batch
// (RedisExecutionStore.take); only when the shard is empty does it wait (XREADGROUP
// BLOCK on its own connection) and then read each record. The run's running record
// goes with its first events, and the final record, the last events and the job's
// acknowledgement go in one script (ExecutionStore.saveWithEvents): a run that ends in
// the turn it started costs two scripts and a share of one.
//
// Shards (HOOKGATE_QUEUE_SHARDS=N, execution-keys.ts): each shard has its stream, and a
// worker reads every one, each with a loop and a blocking connection of its own (a read
// over several streams would span slots on a Redis Cluster). A loop takes up to every
// free run slot (held for it while it reads, so the loops never take more than there
// is room for together); when its shard is empty it waits on it (BLOCK) for at most
// concurrency / N jobs. Claims of abandoned jobs (XAUTOCLAIM), renewals and
// acknowledgements are per shard.
//
// Fair slots (ADR 0049): a worker that took only as many jobs as it has free slots would
// give its engine no choice, and the stream's order would decide which namespace runs.
// While jobs of more than one namespace have come lately (READ_AHEAD_WINDOW_MS), a loop
// also takes up to `lookahead` jobs beyond its free slots, from what the stream holds
// (never waiting for them): they wait in the engine, whose next free slot goes to the
// namespace holding the fewest. They are this worker's jobs like the running ones
// (renewed, acknowledged once saved); at close() those not started are left, unrun and
// unacknowledged, to another worker.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { duplicateClient, type RedisClient } from '../../api/records/redis-client.ts';
import { HttpProblem } from '../errors.ts';
import { deadLetterOf, type DeadLetterStore } from './dead-letters.ts';
import type { InProcessEngine } from './engine.ts';
import type { RedisExecutionStore } from './execution-store-redis.ts';
import { WORKER_GROUP, type ShardKeys } from './execution-keys.ts';
import type { Execution, ExecutionError, OutputValidator, StartRequest } from './ports.ts';
import type { ExecutionJob } from './queued-engine.ts';
import type { RedisRetryQueue } from './retry-queue-redis.ts';
import {
  acceptedTriggerRef,
  callbackSigning,
  runSigning,
  slotNamespaceOfKey,
} from './trigger-ref.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { errorMessage, sleep } from './util.ts';

/** XACK then XDEL of one entry (KEYS: stream; ARGV: group, entry id). */
const ACKNOWLEDGE = `redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return redis.call('XDEL', KEYS[1], ARGV[2])`;

/**
 * Removes a consumer from the group unless it has a pending entry (KEYS: stream; ARGV:
 * group, consumer). One script: XGROUP DELCONSUMER drops the consumer's pending
 * entries, so a job it holds must keep it (another worker claims the job from it).
 */
const LEAVE_GROUP = `if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
  return -1
end
return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])`;

/**
 * Removes the consumers that hold no pending entry and have been idle at least ARGV[2]
 * ms, other than ARGV[3] (KEYS: stream; ARGV: group, idle ms, this consumer); returns
 * how many. One script, for the reason above. Redis 7.2 counts `idle` from a
 * consumer's last read attempt, so a worker that is alive is never removed; Redis 7.0
 * from its last read that got something, so one whose queue has been empty that long
 * may be, and its next read makes it again.
 */
const FORGET_IDLE = `local removed = 0
for _, fields in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local c = {}
  for i = 1, #fields, 2 do c[fields[i]] = fields[i + 1] end
  if c['pending'] == 0 and c['idle'] >= tonumber(ARGV[2]) and c['name'] ~= ARGV[3] then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], c['name'])
    removed = removed + 1
  end
end
return removed`;

interface AcknowledgeCommand {
  hookgateAcknowledge(stream: string, group: string, entryId: string): Promise<number>;
  hookgateLeaveGroup(stream: string, group: string, consumer: string): Promise<number>;
  hookgateForgetIdle(
    stream: string,
    group: string,
    idleMs: number,
    consumer: string,
  ): Promise<number>;
}

/**
 * How long after a job of another namespace than the one before it a worker keeps
 * reading ahead (ADR 0049): a worker that only ever sees one namespace never does.
 */
export const READ_AHEAD_WINDOW_MS = 10 * 60_000;

export interface JobTarget {
  route: RouteRecord;
  workflow: WorkflowRegistration;
}

export interface ExecutionWorkerOptions {
  /** Commands (acknowledge, claim, read records). */
  redis: RedisClient;
  /**
   * A connection of its own for the blocking read (of the first shard; the worker
   * makes a copy of it for each other shard, and closes those).
   */
  blocking: RedisClient;
  /** Runs the jobs; built with the Redis store below and `streamEvents: true`. */
  engine: InProcessEngine;
  store: RedisExecutionStore;
  /**
   * The endpoint and the published workflow of a job, as they are now. `uncached`: the
   * route read from the store itself, not from a cache that may not have heard of a
   * change yet (asked before a job is failed as one of a re-created trigger).
   */
  resolve(job: ExecutionJob, uncached?: boolean): Promise<JobTarget | undefined>;
  outputValidator?: (route: RouteRecord) => OutputValidator | undefined;
  /** Name in the consumer group. Default: host name and pid. */
  consumer?: string;
  /** Jobs run at once by this worker (give the engine the same). Default 32. */
  concurrency?: number;
  /**
   * Jobs taken beyond the free run slots, waiting in the engine for a slot, while jobs of
   * more than one namespace come (see READ_AHEAD_WINDOW_MS; ADR 0049). Default
   * concurrency / 4, rounded up, when the engine runs `concurrency` jobs at once (one
   * that runs more would start them at once); 0 turns it off.
   */
  lookahead?: number;
  /** A job whose worker has not renewed its claim for this long is run again. Default 60 s. */
  claimIdleMs?: number;
  /**
   * A consumer of the group that holds no job and has not read for this long is removed
   * (a worker killed without close(), whose jobs were claimed by others). Default 1 h.
   */
  forgetIdleMs?: number;
  /** Longest blocking read (also how fast close() is noticed). Default 2 s. */
  blockMs?: number;
  onInternalError?: (error: unknown, where: string) => void;
  /** Moves due retry attempts to the stream; give the one the engine hands off to. */
  retries?: RedisRetryQueue;
  /** Where a record that says dead-lettered gets its entry when its worker died first. */
  deadLetters?: DeadLetterStore;
  /** How often due retry attempts are looked for. Default 500 ms. */
  retryPollMs?: number;
}

type StreamEntry = [id: string, fields: string[]];

/** A job off a stream: its entry, and its record when it was read with it (take). */
interface Job {
  entryId: string;
  fields: string[];
  record?: { execution: Execution | undefined; eventCount: number };
}

const jobOf = ([entryId, fields]: StreamEntry): Job => ({ entryId, fields });

/** The job an entry carries (null: none); throws when its JSON is broken. */
function readJob(fields: string[]): ExecutionJob | null {
  const at = fields.indexOf('job');
  return JSON.parse(fields[at + 1] ?? 'null') as ExecutionJob | null;
}

/** As readJob, undefined when its JSON is broken (the run reads it again and says so). */
function parseJob(fields: string[]): ExecutionJob | null | undefined {
  try {
    return readJob(fields);
  } catch {
    return undefined;
  }
}

/**
 * What the request that queued a job left in it for the run: its callback URL (signed
 * with the secrets `signing` names), its Idempotency-Key's window and what its view of
 * the workflow said of a success's record (ADR 0041): a job that does not say Discard
 * (queued under Keep, or by a gateway from before) keeps it, whatever this worker's view.
 */
function carried(
  job: ExecutionJob,
  signing: { secrets: readonly string[] },
): Partial<StartRequest> {
  const request: Partial<StartRequest> = job.callbackUrl
    ? { callbackUrl: job.callbackUrl, ...callbackSigning(signing) }
    : {};
  if (job.idempotencyWindowMs !== undefined) request.idempotencyWindowMs = job.idempotencyWindowMs;
  const discard = job.discardIfSucceeded;
  if (discard === 'responded') request.respondAwaited = true;
  else if (discard !== true) request.keepRecord = true;
  return request;
}

/** One shard's stream as this worker reads it. */
interface ShardReader {
  keys: ShardKeys;
  /** Its blocking connection. */
  blocking: RedisClient;
  /** Whether its consumer group exists (created by this worker or another). */
  grouped: boolean;
  lastClaim: number;
  /**
   * Its last read got fewer jobs than it asked for: the next one waits (BLOCK) at once
   * instead of first taking what there is (a read that would find nothing, at low rates).
   */
  drained: boolean;
}

/** A job this worker runs: its shard and stream entry, and the run. */
interface Running {
  shard: ShardReader;
  entryId: string;
  run: Promise<void>;
}

export class ExecutionWorker {
  readonly #o: Required<
    Omit<ExecutionWorkerOptions, 'outputValidator' | 'retries' | 'deadLetters' | 'lookahead'>
  > &
    Pick<ExecutionWorkerOptions, 'outputValidator' | 'retries' | 'deadLetters'>;
  /** Running jobs by `<shard> <entry id>` (entry ids are per stream). */
  readonly #inflight = new Map<string, Running>();
  readonly #shards: ShardReader[];
  readonly #redis: RedisClient & AcknowledgeCommand;
  /** Jobs one shard's loop waits for at a time (BLOCK), with several shards. */
  readonly #perShard: number;
  /** Jobs taken beyond the free slots while namespaces mix (0: never). */
  readonly #lookahead: number;
  /** The namespace of the last job taken. */
  #lastNamespace: string | undefined;
  /** When a job of another namespace than the one before it was last taken. */
  #mixedAt = -Infinity;
  /** Run slots held by loops reading now (several shards). */
  #reserved = 0;
  /** Loops waiting for a free run slot. */
  #waiting: (() => void)[] = [];
  /** Jobs still reading their record: close() waits until each reaches the engine. */
  readonly #starting = new Set<Promise<void>>();
  #loops: Promise<void>[] = [];
  #heartbeat: NodeJS.Timeout | undefined;
  #promoter: NodeJS.Timeout | undefined;
  #stopping = false;
  #closed: Promise<void> | undefined;

  constructor(options: ExecutionWorkerOptions) {
    this.#o = {
      // Unique per process: two containers can share a hostname (host network) and
      // both run as PID 1, and one consumer name for two workers would share claims.
      consumer: `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`,
      concurrency: 32,
      claimIdleMs: 60_000,
      forgetIdleMs: 3_600_000,
      blockMs: 2_000,
      retryPollMs: 500,
      onInternalError: (error, where) => console.error(`hookgate worker: ${where}:`, error),
      ...options,
    };
    const redis = options.redis as RedisClient & Partial<AcknowledgeCommand>;
    if (!redis.hookgateAcknowledge)
      redis.defineCommand('hookgateAcknowledge', { numberOfKeys: 1, lua: ACKNOWLEDGE });
    if (!redis.hookgateLeaveGroup)
      redis.defineCommand('hookgateLeaveGroup', { numberOfKeys: 1, lua: LEAVE_GROUP });
    if (!redis.hookgateForgetIdle)
      redis.defineCommand('hookgateForgetIdle', { numberOfKeys: 1, lua: FORGET_IDLE });
    this.#redis = redis as RedisClient & AcknowledgeCommand;
    const shards = options.store.layout.shards;
    this.#shards = shards.map((keys, k) => ({
      keys,
      blocking: k === 0 ? options.blocking : duplicateClient(options.blocking),
      grouped: false,
      lastClaim: 0,
      drained: false,
    }));
    this.#perShard = Math.max(1, Math.ceil(this.#o.concurrency / shards.length));
    const ownSlots = options.engine.concurrency <= this.#o.concurrency;
    this.#lookahead = Math.max(
      0,
      options.lookahead ?? (ownSlots ? Math.ceil(this.#o.concurrency / 4) : 0),
    );
  }

  /** Jobs taken and not done: running, or read ahead and waiting in the engine for a slot. */
  get running(): number {
    return this.#inflight.size;
  }

  /** Whether the worker can take jobs: its consumer groups exist and it is not stopping. */
  get ready(): boolean {
    return (
      this.#shards.every((s) => s.grouped) && !this.#stopping && this.#o.redis.status === 'ready'
    );
  }

  /**
   * Starts consuming. The consumer group is created first when Redis answers now;
   * when it does not (Redis down at start-up), the consume loop keeps trying, so the
   * process stays up and reports not-ready instead of failing to start. The group
   * reads the stream from its start, so jobs queued meanwhile are not missed.
   */
  async start(): Promise<void> {
    if (this.#o.redis.status === 'ready')
      await Promise.all(this.#shards.map((s) => this.#ensureGroup(s)));
    const every = Math.max(100, Math.floor(this.#o.claimIdleMs / 3));
    this.#heartbeat = setInterval(() => void this.#renewClaims(), every);
    if (this.#o.retries) {
      this.#promoter = setInterval(() => void this.#promote(), this.#o.retryPollMs);
    }
    this.#loops = this.#shards.map((s) => this.#consume(s));
  }

  /**
   * Stops taking jobs, lets the running ones finish for up to `timeoutMs` (then the
   * engine fails them as shut down), and acknowledges what finished.
   */
  close(timeoutMs = 25_000): Promise<void> {
    this.#closed ??= this.#close(timeoutMs);
    return this.#closed;
  }

  async #close(timeoutMs: number): Promise<void> {
    this.#stopping = true;
    this.#wake();
    clearInterval(this.#promoter);
    // A blocking read would hold the loop for up to blockMs: cut it short.
    for (const s of this.#shards) s.blocking.disconnect();
    await Promise.all(this.#loops);
    // A job between its reads and engine.resume would be refused once the engine closes.
    await Promise.all(this.#starting);
    await this.#o.engine.close(timeoutMs);
    await Promise.allSettled([...this.#inflight.values()].map((r) => r.run));
    clearInterval(this.#heartbeat);
    await Promise.all(this.#shards.map((s) => this.#leaveGroup(s)));
  }

  /**
   * Takes this worker's name out of a shard's consumer group once it has stopped: each
   * worker process has a name of its own, and the group kept every one it ever saw
   * (one more each restart, rollout or scale-down, for the life of the stream). Not
   * while a job of it is pending: another worker claims that job from it later.
   */
  async #leaveGroup(shard: ShardReader): Promise<void> {
    if (!shard.grouped || this.#o.redis.status !== 'ready') return;
    try {
      await this.#redis.hookgateLeaveGroup(shard.keys.stream, WORKER_GROUP, this.#o.consumer);
    } catch (error) {
      this.#o.onInternalError(error, 'leaving the consumer group');
    }
  }

  /**
   * Removes from a shard's group the consumers of workers that stopped without close()
   * (killed, out of memory): each had a name of its own, and the group kept them all.
   * Only those holding no job: a job held by a dead worker is claimed first (above).
   */
  async #forgetIdle(shard: ShardReader): Promise<void> {
    try {
      await this.#redis.hookgateForgetIdle(
        shard.keys.stream,
        WORKER_GROUP,
        this.#o.forgetIdleMs,
        this.#o.consumer,
      );
    } catch (error) {
      if (!this.#stopping)
        this.#o.onInternalError(error, 'removing the consumers of stopped workers');
    }
  }

  async #ensureGroup(shard: ShardReader): Promise<void> {
    try {
      await this.#o.redis.xgroup('CREATE', shard.keys.stream, WORKER_GROUP, '0', 'MKSTREAM');
    } catch (error) {
      if (!errorMessage(error).includes('BUSYGROUP')) throw error;
    }
    shard.grouped = true;
  }

  async #consume(shard: ShardReader): Promise<void> {
    while (!this.#stopping) {
      if (!shard.grouped) {
        try {
          await this.#ensureGroup(shard);
        } catch (error) {
          if (this.#stopping) break;
          this.#o.onInternalError(error, 'creating the consumer group');
          await sleep(1_000).catch(() => {});
          continue;
        }
      }
      // Jobs read ahead count in #inflight: `slots` is below 0 while some wait.
      const slots = this.#o.concurrency - this.#inflight.size - this.#reserved;
      // No slot free: only read ahead, and only from a shard that held jobs at the last
      // read (never waiting for new ones, which a worker with a free slot should get).
      const room = slots > 0 || !shard.drained ? slots + this.#readingAhead() : 0;
      if (room <= 0) {
        await new Promise<void>((resolve) => this.#waiting.push(resolve));
        continue;
      }
      try {
        for (const job of await this.#read(shard, room, slots > 0)) this.#take(shard, job);
      } catch (error) {
        if (this.#stopping) break;
        // The group is gone (a Redis that lost its data): create it again.
        if (errorMessage(error).includes('NOGROUP')) shard.grouped = false;
        this.#o.onInternalError(error, 'reading the queue');
        await sleep(1_000).catch(() => {});
      }
    }
  }

  /** Jobs to take beyond the free slots now: `lookahead` while namespaces mix, else 0. */
  #readingAhead(): number {
    if (this.#lookahead === 0) return 0;
    return Date.now() - this.#mixedAt < READ_AHEAD_WINDOW_MS ? this.#lookahead : 0;
  }

  /** A job of `namespace` was taken: namespaces mix when it is not the last one's. */
  #saw(namespace: string): void {
    if (this.#lastNamespace !== undefined && namespace !== this.#lastNamespace)
      this.#mixedAt = Date.now();
    this.#lastNamespace = namespace;
  }

  /** Wakes the loops waiting for a free run slot. */
  #wake(): void {
    for (const resolve of this.#waiting.splice(0)) resolve();
  }

  /**
   * Up to `free` jobs of one shard: abandoned ones first (at most every claimIdleMs /
   * 2), then what the shard has now, with their records (the free slots held meanwhile
   * when there are several shards); when it has none, or the last read found fewer
   * than it asked for, a blocking read, of at most concurrency / N with several shards
   * (over the limit by at most that a loop), unless `block` is false (no slot is free:
   * `free` is read-ahead room, ADR 0049).
   */
  async #read(shard: ShardReader, free: number, block: boolean): Promise<Job[]> {
    const several = this.#shards.length > 1;
    if (several) this.#reserved += free;
    let jobs: Job[];
    try {
      jobs = (await this.#claimed(shard, free)).map(jobOf);
      if (jobs.length === 0 && !shard.drained) {
        const taken = await this.#o.store.take(shard.keys, this.#o.consumer, free);
        jobs = taken.map(({ entryId, fields, execution, eventCount }) => ({
          entryId,
          fields,
          record: { execution, eventCount },
        }));
        shard.drained = jobs.length < free;
      }
    } finally {
      if (several) {
        this.#reserved -= free;
        // Taken synchronously by the caller; slots not used go back to the other loops.
        queueMicrotask(() => this.#wake());
      }
    }
    if (jobs.length > 0 || this.#stopping || !block) return jobs;
    const count = several ? Math.min(this.#perShard, free) : free;
    const waited = await this.#waitFor(shard, count);
    shard.drained = waited.length < count;
    return waited.map(jobOf);
  }

  /**
   * Jobs abandoned by their worker (XAUTOCLAIM), at most every claimIdleMs / 2; then
   * the names of workers gone for forgetIdleMs are taken out of the group.
   */
  async #claimed(shard: ShardReader, count: number): Promise<StreamEntry[]> {
    const now = Date.now();
    if (now - shard.lastClaim >= this.#o.claimIdleMs / 2) {
      shard.lastClaim = now;
      const claimed = (await this.#o.redis.xautoclaim(
        shard.keys.stream,
        WORKER_GROUP,
        this.#o.consumer,
        this.#o.claimIdleMs,
        '0-0',
        'COUNT',
        count,
      )) as [string, (StreamEntry | null)[], string[]?];
      void this.#forgetIdle(shard);
      return claimed[1].filter((e): e is StreamEntry => e !== null);
    }
    return [];
  }

  /** Waits for new jobs of an empty shard (XREADGROUP BLOCK on its own connection). */
  async #waitFor(shard: ShardReader, count: number): Promise<StreamEntry[]> {
    const read = (await shard.blocking.xreadgroup(
      'GROUP',
      WORKER_GROUP,
      this.#o.consumer,
      'COUNT',
      count,
      'BLOCK',
      this.#o.blockMs,
      'STREAMS',
      shard.keys.stream,
      '>',
    )) as [string, StreamEntry[]][] | null;
    return read?.[0]?.[1] ?? [];
  }

  #take(shard: ShardReader, job: Job): void {
    const { entryId } = job;
    const key = `${shard.keys.shard} ${entryId}`;
    if (this.#inflight.has(key)) return;
    const parsed = parseJob(job.fields);
    if (parsed !== undefined && parsed !== null && typeof parsed.triggerKey === 'string')
      this.#saw(slotNamespaceOfKey(parsed.triggerKey));
    let reached = (): void => {};
    const starting = new Promise<void>((resolve) => (reached = resolve));
    this.#starting.add(starting);
    void starting.then(() => this.#starting.delete(starting));
    const run = this.#run(shard, job, parsed, reached)
      .then(async (acknowledged) => {
        if (!acknowledged) await this.#acknowledge(shard, entryId);
      })
      .catch((error: unknown) => {
        // Read just before close(): left unacknowledged, another worker will run it.
        if (this.#stopping && error instanceof HttpProblem && error.code === 'HG_ERR_SHUTTING_DOWN')
          return;
        this.#o.onInternalError(error, `job ${entryId}`);
      })
      .finally(() => {
        this.#inflight.delete(key);
        this.#wake();
      });
    this.#inflight.set(key, { shard, entryId, run });
  }

  /**
   * `reached` is called once the job is in the engine, or will not go there. Resolves
   * true when the job was acknowledged with the final record (else the caller does it).
   */
  async #run(
    shard: ShardReader,
    job: Job,
    parsed: ExecutionJob | null | undefined,
    reached: () => void,
  ): Promise<boolean> {
    try {
      return await this.#runJob(shard, job, parsed, reached);
    } finally {
      reached();
    }
  }

  /** `parsed`: the entry's job, undefined when it could not be read (said here). */
  async #runJob(
    shard: ShardReader,
    entry: Job,
    parsed: ExecutionJob | null | undefined,
    reached: () => void,
  ): Promise<boolean> {
    const { entryId, fields } = entry;
    const job = parsed === undefined ? readJob(fields) : parsed;
    if (!job) return false; // not a job of ours: acknowledge and drop it
    const { execution, eventCount: afterSeq } = entry.record ?? (await this.#o.store.load(job.id));
    // No record: expired before its turn, or queued by a gateway of another key layout
    // (an upgrade without the drain docs/redis-layout.md asks for). Said, then dropped.
    if (!execution) {
      this.#o.onInternalError(
        new Error(
          `execution ${job.id} has no record (expired, or queued under another key layout: see docs/redis-layout.md, "Upgrading"); its job is dropped`,
        ),
        `job ${entryId}`,
      );
      return false;
    }
    // Finished by a worker that died before acknowledging: nothing to do, except the
    // dead-letter entry of a record that says it went there (the worker died between
    // the record and the entry; adding is idempotent).
    if (execution.status === 'succeeded') return false;
    if (execution.status === 'failed') {
      if (execution.deadLetteredAt && this.#o.deadLetters) {
        const listed = await this.#o.deadLetters.add(deadLetterOf(execution, job.callbackUrl));
        if (!listed) {
          this.#o.onInternalError(
            new Error(`execution ${job.id} is not in the dead-letter list: its record is gone`),
            `job ${entryId}`,
          );
        }
      }
      return false;
    }
    // The record has moved past this job's attempt (its worker handed the execution to
    // the retry queue, then died before acknowledging): the later attempt is the one.
    const attempt = job.attempt ?? 1;
    const pending = (execution.attempt ?? 1) + (execution.nextAttemptAt ? 1 : 0);
    if (attempt < pending) return false;
    const target = await this.#resolve(job, execution);
    if (!target) {
      await this.#failUnrunnable(execution, afterSeq, {
        message: `endpoint ${job.triggerKey} or its workflow ${job.workflowId} is no longer published`,
        code: 'HG_ERR_EXECUTION_FAILED',
      });
      return false;
    }
    // The route of its name is another WebhookTrigger's (deleted and re-created since the
    // request came in: another uid), whose workflow, schemas, response and callback
    // settings are not those the request was accepted under: not run, as for a trigger
    // gone (ADR 0018 and 0035, amended 2026-11-28). An execution without a uid (accepted
    // before uids were kept) is not checked.
    const signing = runSigning(execution.triggerUid, target.route);
    if ('unsigned' in signing) {
      await this.#failUnrunnable(execution, afterSeq, {
        message: `endpoint ${job.triggerKey} was deleted and re-created since this execution was accepted (another WebhookTrigger uid): it is not run under the new trigger`,
        code: 'HG_ERR_TRIGGER_RECREATED',
      });
      return false;
    }
    const validator = this.#o.outputValidator?.(target.route);
    const request: StartRequest = {
      workflow: target.workflow,
      // The uid the execution was accepted under: its callback is signed only while the
      // route is still that trigger's (ADR 0035).
      trigger: acceptedTriggerRef(target.route, execution),
      input: execution.input,
      ...(validator ? { outputValidator: validator } : {}),
      ...carried(job, signing),
    };
    // The store acknowledges the job with the final record when the entry is on the
    // stream of the execution's shard (always so: enqueue and retries put it there).
    const own = this.#o.store.layout.of(job.id).stream === shard.keys.stream;
    const done = this.#o.engine.resume(
      request,
      execution,
      afterSeq,
      attempt,
      own ? entryId : undefined,
    );
    reached();
    // Rejects when its end was not stored: left unacknowledged, another run (after
    // claimIdleMs) finishes it, so a Redis outage in between loses no accepted execution.
    return done;
  }

  /**
   * The job's target. Another uid on a route read from a cache may only be a cache that
   * has not heard of the change yet (a gateway took the request under the newcomer, and
   * this worker still has the route of the one before): the store says which trigger is
   * there now.
   */
  async #resolve(job: ExecutionJob, execution: Execution): Promise<JobTarget | undefined> {
    const target = await this.#o.resolve(job);
    if (target && 'unsigned' in runSigning(execution.triggerUid, target.route))
      return this.#o.resolve(job, true);
    return target;
  }

  /**
   * The endpoint or its workflow went away between the 202 and the run, or the endpoint
   * is another WebhookTrigger now: the execution fails (class unrunnable, never retried
   * nor dead-lettered) with `reason`, and no callback is sent.
   */
  async #failUnrunnable(
    execution: Execution,
    afterSeq: number,
    reason: Pick<ExecutionError, 'message' | 'code'>,
  ): Promise<void> {
    const error: ExecutionError = { ...reason, statusCode: 500, kind: 'unrunnable' };
    const finishedAt = new Date().toISOString();
    const failed: Execution = { ...execution, status: 'failed', error, finishedAt };
    delete failed.nextAttemptAt;
    await this.#o.store.save(failed);
    await this.#o.store.appendEvents([
      { type: 'failed', error, executionId: execution.id, seq: afterSeq + 1, at: finishedAt },
    ]);
  }

  /** XACK and XDEL in one script: unlike MULTI…EXEC it joins ioredis' auto-pipeline. */
  async #acknowledge(shard: ShardReader, entryId: string): Promise<void> {
    await this.#redis.hookgateAcknowledge(shard.keys.stream, WORKER_GROUP, entryId);
  }

  /** Moves due retry attempts to the stream (any worker; each job moves once). */
  async #promote(): Promise<void> {
    try {
      await this.#o.retries?.promote();
    } catch (error) {
      if (!this.#stopping) this.#o.onInternalError(error, 'moving due retries');
    }
  }

  /** Resets the idle time of the jobs this worker runs, so nobody claims them. */
  async #renewClaims(): Promise<void> {
    const byShard = new Map<ShardReader, string[]>();
    for (const { shard, entryId } of this.#inflight.values()) {
      const ids = byShard.get(shard) ?? [];
      ids.push(entryId);
      byShard.set(shard, ids);
    }
    await Promise.all(
      [...byShard].map(async ([shard, ids]) => {
        try {
          await this.#o.redis.call(
            'XCLAIM',
            shard.keys.stream,
            WORKER_GROUP,
            this.#o.consumer,
            0,
            ...ids,
            'JUSTID',
          );
        } catch (error) {
          this.#o.onInternalError(error, 'renewing claims');
        }
      }),
    );
  }
}
