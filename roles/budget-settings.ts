// Byte budgets of what a process keeps (docs/limits.md): the executions store, the
// stored bodies, record lifetime, idempotency answers, the SSE stream buffers, a
// listing page and the memory analytics; and the caps on open event streams (per
// execution, per process). Checked with the other settings before anything starts; a bad value
// exits 2 with a clear message (settings.ts).
import { parseBytes } from '../runtime/bounded.ts';

export const BUDGET_USAGE = `  HOOKGATE_EXECUTION_STORE_BYTES  executions kept, in bytes (as JSON; oldest dropped
                             first): default 128Mi in memory, 512Mi of finished ones in Redis
  HOOKGATE_STORED_BODY_BYTES request bodies, outputs and response bodies above this are
                             stored cut, flagged with their size (default 64Ki)
  HOOKGATE_EXECUTION_TTL_MS  lifetime of an execution record and its events (default
                             86400000, 24 h)
  HOOKGATE_IDEMPOTENCY_BYTES Idempotency-Key answers kept in memory (default 32Mi)
  HOOKGATE_STREAM_BUFFER_BYTES  unsent bytes of one SSE stream before a slow client is
                             cut off (default 1Mi)
  HOOKGATE_STREAMS_PER_EXECUTION  event streams of one execution open at once on one
                             listener; the next is refused 429 (default 16)
  HOOKGATE_STREAMS_PER_PROCESS  event streams open at once in the process, every
                             listener counted; the next is refused 503 (default 10000)
  HOOKGATE_LIST_PAGE_BYTES   one page of GET /api/executions (default 4Mi)
  HOOKGATE_ANALYTICS_BYTES   the memory analytics backend's minutes and series (default
                             64Mi; oldest minutes dropped first)
                             Sizes: bytes, or with a unit: 64Ki, 256Mi, 1Gi (k, M, G: 1024s)
`;

export interface Budgets {
  /** Executions store; undefined: the adapter's default (memory 128 MiB, Redis 512 MiB). */
  executionStoreBytes?: number;
  storedBodyBytes?: number;
  executionTtlMs?: number;
  idempotencyBytes?: number;
  streamBufferBytes?: number;
  listPageBytes?: number;
  /** The memory analytics backend (default 64 MiB). */
  analyticsBytes?: number;
  /** Event streams of one execution open at once on one listener (default 16). */
  streamsPerExecution?: number;
  /** Event streams open at once in the process (default 10,000). */
  streamsPerProcess?: number;
}

const SIZES = {
  HOOKGATE_EXECUTION_STORE_BYTES: 'executionStoreBytes',
  HOOKGATE_STORED_BODY_BYTES: 'storedBodyBytes',
  HOOKGATE_IDEMPOTENCY_BYTES: 'idempotencyBytes',
  HOOKGATE_STREAM_BUFFER_BYTES: 'streamBufferBytes',
  HOOKGATE_LIST_PAGE_BYTES: 'listPageBytes',
  HOOKGATE_ANALYTICS_BYTES: 'analyticsBytes',
} as const satisfies Record<string, keyof Budgets>;

const COUNTS = {
  HOOKGATE_STREAMS_PER_EXECUTION: 'streamsPerExecution',
  HOOKGATE_STREAMS_PER_PROCESS: 'streamsPerProcess',
} as const satisfies Record<string, keyof Budgets>;

/** The largest stream cap taken (a million open streams is far past what a process holds). */
export const MAX_STREAMS = 1_000_000;

/** The budgets set in the environment, or the problems with them. */
export function budgetSettings(env: NodeJS.ProcessEnv = process.env): {
  budgets: Budgets;
  problems: string[];
} {
  const budgets: Budgets = {};
  const problems: string[] = [];
  for (const [name, field] of Object.entries(SIZES)) {
    const raw = env[name];
    if (raw === undefined) continue;
    const bytes = parseBytes(raw);
    // Below 1 KiB nothing useful fits (a record's fixed fields alone are ~300 bytes).
    if (bytes === undefined || bytes < 1024)
      problems.push(`${name} must be a size of at least 1Ki (e.g. 64Ki, 256Mi), not "${raw}"`);
    else budgets[field] = bytes;
  }
  for (const [name, field] of Object.entries(COUNTS)) {
    const raw = env[name];
    if (raw === undefined) continue;
    if (!(/^\d+$/.test(raw.trim()) && Number(raw) >= 1 && Number(raw) <= MAX_STREAMS))
      problems.push(`${name} must be an integer from 1 to ${MAX_STREAMS}, not "${raw}"`);
    else budgets[field] = Number(raw);
  }
  const ttl = env.HOOKGATE_EXECUTION_TTL_MS;
  if (ttl !== undefined) {
    if (!(Number.isInteger(Number(ttl)) && Number(ttl) >= 1000))
      problems.push(`HOOKGATE_EXECUTION_TTL_MS must be an integer of at least 1000, not "${ttl}"`);
    else budgets.executionTtlMs = Number(ttl);
  }
  return { budgets, problems };
}
