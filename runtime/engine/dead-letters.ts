// The dead-letter list: executions that exhausted their workflow's retry policy, kept
// until someone retries them (admin API) or they expire, a lifetime after they were
// dead-lettered (the executions store keeps their records a minute longer: ADR 0039).
// Bounded and TTL'd; a memory adapter here, the Redis one in dead-letters-redis.ts.
import type { Execution, ExecutionError } from './ports.ts';

export interface DeadLetter {
  executionId: string;
  /** `<namespace>/<name>` of the WebhookTrigger. */
  triggerKey: string;
  namespace: string;
  workflowId: string;
  /** When the execution was created (the request came in). */
  createdAt: string;
  deadLetteredAt: string;
  /** Attempts made. */
  attempts: number;
  /** The last attempt's failure. */
  error: ExecutionError;
  /** The caller's callback URL (Async Callback mode): a retry delivers there again. */
  callbackUrl?: string;
}

export interface DeadLetterFilter {
  triggerKey?: string;
  namespace?: string;
  workflowId?: string;
  /** Default 50, at most 1000. */
  limit?: number;
}

export interface DeadLetterStore {
  /** Adds an entry, or replaces the one of the same execution (idempotent). */
  add(entry: DeadLetter): Promise<void>;
  get(executionId: string): Promise<DeadLetter | undefined>;
  /** Newest first. */
  list(filter: DeadLetterFilter): Promise<DeadLetter[]>;
  /**
   * Removes the entry and returns it, atomically: of two concurrent calls for one
   * execution only one gets it (a retry claims its entry this way).
   */
  take(executionId: string): Promise<DeadLetter | undefined>;
  /** Entries held (the dead-letter gauge). */
  count(): Promise<number>;
}

export interface DeadLetterStoreOptions {
  /** Entries at most; the oldest go first. Default 10 000. */
  maxEntries?: number;
  /**
   * An entry is dropped this long after its execution was dead-lettered (deadLetterTime),
   * however often it is added again. Default 24 h. Give it the executions store's
   * lifetime (HOOKGATE_EXECUTION_TTL_MS): the store keeps a dead-lettered record a
   * lifetime and a minute from then, so an entry listed can be read and retried.
   */
  ttlMs?: number;
  /** Clock (tests). */
  now?: () => number;
}

export const DEAD_LETTER_DEFAULTS = { maxEntries: 10_000, ttlMs: 24 * 3_600_000 } as const;
export const MAX_DEAD_LETTER_LIST = 1000;

/** The entry of an execution that has just been dead-lettered. */
export function deadLetterOf(execution: Execution, callbackUrl?: string): DeadLetter {
  const slash = execution.triggerKey.indexOf('/');
  const entry: DeadLetter = {
    executionId: execution.id,
    triggerKey: execution.triggerKey,
    namespace: slash < 0 ? '' : execution.triggerKey.slice(0, slash),
    workflowId: execution.workflowId,
    createdAt: execution.createdAt,
    deadLetteredAt: execution.deadLetteredAt ?? execution.finishedAt ?? new Date().toISOString(),
    attempts: execution.attempt ?? 1,
    error: execution.error ?? { message: 'failed' },
  };
  if (callbackUrl) entry.callbackUrl = callbackUrl;
  return entry;
}

/**
 * Where an entry's lifetime starts: when its execution was dead-lettered, at the latest
 * `nowMs` (a clock ahead, or no time at all). Not when it was added: adding it again
 * (a worker taking over a dead worker's job, a retry that could not start putting its
 * entry back) must not let it outlive the record it names (ADR 0039).
 */
export function deadLetterTime(entry: DeadLetter, nowMs: number): number {
  const at = Date.parse(entry.deadLetteredAt);
  return Number.isNaN(at) ? nowMs : Math.min(at, nowMs);
}

export function matchesDeadLetter(entry: DeadLetter, filter: DeadLetterFilter): boolean {
  if (filter.triggerKey !== undefined && entry.triggerKey !== filter.triggerKey) return false;
  if (filter.namespace !== undefined && entry.namespace !== filter.namespace) return false;
  if (filter.workflowId !== undefined && entry.workflowId !== filter.workflowId) return false;
  return true;
}

export function listLimit(filter: DeadLetterFilter): number {
  return Math.min(Math.max(1, filter.limit ?? 50), MAX_DEAD_LETTER_LIST);
}

/** One process (embedded mode): lost with the process, like its executions. */
export class MemoryDeadLetterStore implements DeadLetterStore {
  /** In dead-letter order (deadLetterTime), oldest first. */
  #entries = new Map<string, { entry: DeadLetter; addedMs: number }>();
  /** The latest dead-letter time added (an entry added with an earlier one is put in order). */
  #latestMs = -Infinity;
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: DeadLetterStoreOptions = {}) {
    this.#max = options.maxEntries ?? DEAD_LETTER_DEFAULTS.maxEntries;
    this.#ttlMs = options.ttlMs ?? DEAD_LETTER_DEFAULTS.ttlMs;
    this.#now = options.now ?? Date.now;
  }

  add(entry: DeadLetter): Promise<void> {
    const held = { entry: structuredClone(entry), addedMs: deadLetterTime(entry, this.#now()) };
    this.#entries.delete(entry.executionId);
    this.#entries.set(entry.executionId, held);
    if (held.addedMs >= this.#latestMs) this.#latestMs = held.addedMs;
    else {
      // Added again with its earlier time (rare): back in order, for the sweep and list.
      const all = [...this.#entries.values()].sort((a, b) => a.addedMs - b.addedMs);
      this.#entries = new Map(all.map((h) => [h.entry.executionId, h]));
    }
    this.#sweep();
    return Promise.resolve();
  }

  get(executionId: string): Promise<DeadLetter | undefined> {
    this.#sweep();
    const held = this.#entries.get(executionId);
    return Promise.resolve(held ? structuredClone(held.entry) : undefined);
  }

  list(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    this.#sweep();
    const limit = listLimit(filter);
    const found: DeadLetter[] = [];
    for (const { entry } of [...this.#entries.values()].reverse()) {
      if (!matchesDeadLetter(entry, filter)) continue;
      found.push(structuredClone(entry));
      if (found.length === limit) break;
    }
    return Promise.resolve(found);
  }

  take(executionId: string): Promise<DeadLetter | undefined> {
    this.#sweep();
    const held = this.#entries.get(executionId);
    this.#entries.delete(executionId);
    return Promise.resolve(held?.entry);
  }

  count(): Promise<number> {
    this.#sweep();
    return Promise.resolve(this.#entries.size);
  }

  #sweep(): void {
    const cutoff = this.#now() - this.#ttlMs;
    for (const [id, held] of this.#entries) {
      if (this.#entries.size <= this.#max && held.addedMs >= cutoff) break;
      this.#entries.delete(id);
    }
  }
}
