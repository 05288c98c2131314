// Stores that keep data in a process are bounded in bytes: each reports what it holds
// and what it dropped, for the metrics (hookgate_store_bytes, hookgate_store_entries,
// hookgate_store_evictions_total; runtime/analytics/metrics.ts).

/** Why a store dropped an entry: its byte budget, its entry cap, or its lifetime. */
export type EvictionReason = 'bytes' | 'count' | 'expired';

export interface BoundedStoreStats {
  /** Bytes held now (about the size of the data as JSON). */
  bytes: number;
  /** Entries held now. */
  entries: number;
  /** Entries dropped so far, by reason. */
  evictions: Record<EvictionReason, number>;
}

/** A store that reports what it holds (the `store` label of the metrics). */
export interface BoundedStore {
  readonly storeName: string;
  stats(): BoundedStoreStats | Promise<BoundedStoreStats>;
}

export function noEvictions(): Record<EvictionReason, number> {
  return { bytes: 0, count: 0, expired: 0 };
}

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  ki: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
};

/**
 * A byte size from settings: a whole number of bytes, or with a unit (`64KiB`, `256Mi`,
 * `1gb`; k, M and G count in 1024s, as Redis and Kubernetes quantities of memory do).
 * Undefined when it is not one.
 */
export function parseBytes(raw: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(raw);
  if (!match) return undefined;
  const unit = UNITS[(match[2] ?? '').toLowerCase()];
  if (unit === undefined) return undefined;
  const bytes = Math.floor(Number(match[1]) * unit);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

/**
 * About the size in bytes of `JSON.stringify(value)` (UTF-8; escapes not counted), or
 * some number above `stopAbove` as soon as it is clear the size is larger.
 */
export function jsonBytes(value: unknown, stopAbove = Infinity): number {
  // A scalar (most values measured on their own) needs no stack at all.
  if (typeof value !== 'object' || value === null) return scalarBytes(value);
  // One stack for every walk, used above where it stands (a getter that measures
  // something walks above this walk): an array made per call was a tenth of what a
  // memory store's save allocated. Left as found, however the walk ends.
  const stack = walkStack;
  const base = stack.length;
  stack.push(value);
  let total = 0;
  try {
    while (stack.length > base && total <= stopAbove) {
      const v = stack.pop();
      if (typeof v !== 'object' || v === null) {
        total += scalarBytes(v);
      } else if (Array.isArray(v)) {
        total += 2 + v.length;
        for (let i = 0; i < v.length && total <= stopAbove; i++) stack.push(v[i]);
      } else {
        total += 2;
        const o = v as Record<string, unknown>;
        for (const key in o) {
          if (!Object.hasOwn(o, key)) continue;
          total += key.length + 4;
          stack.push(o[key]);
          if (total > stopAbove) break;
        }
      }
    }
  } finally {
    // Only when the walk stopped early or threw: setting the length, even to what it
    // is, would give the array a new backing store at the next push.
    if (stack.length > base) stack.length = base;
  }
  return total;
}

const walkStack: unknown[] = [];

function scalarBytes(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return (v.length < 256 ? v.length : Buffer.byteLength(v)) + 2;
    case 'number':
    case 'bigint':
      return 8;
    case 'boolean':
      return 5;
    case 'object':
      return 4; // null
    default:
      return 0; // undefined, functions, symbols: JSON leaves them out
  }
}
