// Idempotency keys (G13): the same key with the same request replays the stored
// response; a different request under the key is a mismatch (422); a request still
// being processed is in progress (409). begin() is atomic per key: of many concurrent
// begins exactly one gets 'new'. The Redis adapter does the same with SET NX + TTL.
// A claim keeps the execution its request will start (id and link token, chosen before
// the claim: begin's `hint`) while in progress, so that one whose lease ran out before
// it was answered or given back (the process died mid-start, the engine answered late)
// resumes that execution. A claim given back after the engine was asked (it refused,
// or did not answer in time and may have queued the execution all the same) remembers
// that execution's id and link token too: the retry of the same request gets them with
// its 'new', and starts that execution, which exists already or not, instead of another
// one.
// Each 'new' comes with an owner id, the claim's own: complete() and abandon() act only
// while the caller still holds the claim, so a request whose lease ran out cannot
// free or answer the claim another request has taken since (ADR 0027).
import { createHash } from 'node:crypto';
import {
  jsonBytes,
  noEvictions,
  type BoundedStore,
  type BoundedStoreStats,
} from '../../bounded.ts';
import { HttpProblem } from '../../errors.ts';

/** What a replay sends back. */
export interface IdempotencyRecord {
  status: number;
  headers: Record<string, string>;
  body: unknown;
  executionId?: string;
}

/**
 * What a claim remembers for the retry: the execution its request starts or asked the
 * engine to start (which may exist), and the token of that execution's links.
 */
export interface ResumeHint {
  executionId: string;
  token: string;
}

export type BeginResult<R = IdempotencyRecord> =
  | { state: 'new'; owner: string; resume?: ResumeHint }
  | { state: 'replay'; record: R }
  | { state: 'in-progress' }
  | { state: 'mismatch' };

export interface IdempotencyStore<R = IdempotencyRecord> {
  /**
   * Claims `key` for a request with this fingerprint. 'new': the caller owns the key
   * (`owner`, an id of this claim alone) and must complete() or abandon() it; the key
   * expires after `ttlMs` either way. A claim neither completed nor abandoned within
   * `leaseMs` (default `ttlMs`: the request's answer was lost, e.g. a store that
   * answered too late) is no longer in progress: the same request claims it again
   * ('new' with a new owner, and the hint it was given back with, if any), within the
   * key's first `ttlMs`.
   *
   * `hint`: the execution this request will start, chosen before it claims (ADR 0027,
   * amended 2026-11-28 (night)). Kept with a claim it takes that has none (a new one, or
   * one taken again after its lease whose request never named one), and handed to the
   * next begin of the request should the claim's lease run out before it is answered or
   * given back: a claim taken again returns the hint it has, and the caller starts that
   * execution instead of its own. Kept in the same write as the claim: no command more.
   */
  begin(
    key: string,
    fingerprint: string,
    ttlMs: number,
    leaseMs?: number,
    hint?: ResumeHint,
  ): Promise<BeginResult<R>>;
  /**
   * Stores the response to replay; it lives `ttlMs` (default: the begin TTL) from now.
   * The claim's hint goes: the answer is replayed, nothing resumes. Only while `owner`
   * holds the claim (false, and nothing stored, otherwise: the lease ran out and another
   * request claimed the key, the claim was given back, or the key expired).
   */
  complete(key: string, owner: string, record: R, ttlMs?: number): Promise<boolean>;
  /**
   * Releases a claim without a response (the request failed before it was accepted).
   * With `resume`, the key stays taken by its request (another one under it is a
   * mismatch) and the next begin of that request gets 'new' with the hint; without,
   * the key is free (the hint it was claimed with goes too: no execution was asked
   * for). Only while `owner` holds the claim (false, and nothing changed, otherwise).
   */
  abandon(key: string, owner: string, resume?: ResumeHint): Promise<boolean>;
}

export interface MemoryIdempotencyStoreOptions {
  /** Keys held at most; the oldest are dropped first. Default 100 000. */
  maxKeys?: number;
  /** Bytes held at most (keys, fingerprints and answers); the oldest are dropped first. Default 32 MiB. */
  maxBytes?: number;
  now?: () => number;
}

/** Default key bound of the memory idempotency store. */
export const DEFAULT_IDEMPOTENCY_KEYS = 100_000;
/** Default byte budget of the memory idempotency store (32 MiB). */
export const DEFAULT_IDEMPOTENCY_BYTES = 32 * 1024 * 1024;
/** Bytes counted per key besides the key and the answer (fingerprint, times, Map entry). */
const ENTRY_OVERHEAD = 160;

interface Entry<R> {
  fingerprint: string;
  /** The owner id of the claim in progress (none once answered or given back). */
  owner?: string;
  record?: R;
  /** The execution a retry resumes: claimed with, or last given back with. */
  resume?: ResumeHint;
  /** Until when the claim is in progress (0: given back with a hint). */
  leaseUntil: number;
  ttlMs: number;
  expiresAt: number;
  bytes: number;
}

export class MemoryIdempotencyStore<R = IdempotencyRecord>
  implements IdempotencyStore<R>, BoundedStore
{
  readonly storeName = 'idempotency';
  readonly #entries = new Map<string, Entry<R>>();
  readonly #maxKeys: number;
  readonly #maxBytes: number;
  readonly #now: () => number;
  #bytes = 0;
  /** Owner ids: one per claim, never reused by this store. */
  #claims = 0;
  readonly #evictions = noEvictions();

  constructor(options: MemoryIdempotencyStoreOptions = {}) {
    this.#maxKeys = options.maxKeys ?? DEFAULT_IDEMPOTENCY_KEYS;
    this.#maxBytes = options.maxBytes ?? DEFAULT_IDEMPOTENCY_BYTES;
    this.#now = options.now ?? Date.now;
  }

  stats(): BoundedStoreStats {
    return { bytes: this.#bytes, entries: this.#entries.size, evictions: { ...this.#evictions } };
  }

  begin(
    key: string,
    fingerprint: string,
    ttlMs: number,
    leaseMs = ttlMs,
    hint?: ResumeHint,
  ): Promise<BeginResult<R>> {
    // Synchronous from lookup to insert: atomic on the event loop.
    const now = this.#now();
    const entry = this.#entries.get(key);
    if (entry && entry.expiresAt > now) {
      if (entry.fingerprint !== fingerprint) return Promise.resolve({ state: 'mismatch' });
      if (entry.record !== undefined) {
        return Promise.resolve({ state: 'replay', record: structuredClone(entry.record) });
      }
      if (entry.leaseUntil > now) return Promise.resolve({ state: 'in-progress' });
      entry.leaseUntil = now + leaseMs;
      const owner = (entry.owner = this.#owner());
      const resume = entry.resume;
      if (resume) return Promise.resolve({ state: 'new', owner, resume: { ...resume } });
      if (hint) this.#hint(entry, hint);
      return Promise.resolve({ state: 'new', owner });
    }
    this.#delete(key, entry);
    const bytes = ENTRY_OVERHEAD + key.length + fingerprint.length;
    const owner = this.#owner();
    const created: Entry<R> = {
      fingerprint,
      owner,
      ttlMs,
      expiresAt: now + ttlMs,
      leaseUntil: now + leaseMs,
      bytes,
    };
    this.#entries.set(key, created);
    this.#bytes += bytes;
    if (hint) this.#hint(created, hint);
    this.#sweep(now);
    return Promise.resolve({ state: 'new', owner });
  }

  complete(key: string, owner: string, record: R, ttlMs?: number): Promise<boolean> {
    const now = this.#now();
    const entry = this.#held(key, owner, now);
    if (!entry) return Promise.resolve(false);
    entry.owner = undefined;
    this.#unhint(entry);
    entry.record = structuredClone(record);
    entry.expiresAt = now + (ttlMs ?? entry.ttlMs);
    const bytes = jsonBytes(record);
    entry.bytes += bytes;
    this.#bytes += bytes;
    this.#sweep(now);
    return Promise.resolve(true);
  }

  abandon(key: string, owner: string, resume?: ResumeHint): Promise<boolean> {
    const entry = this.#held(key, owner, this.#now());
    if (!entry) return Promise.resolve(false);
    if (resume === undefined) {
      this.#delete(key, entry);
    } else {
      entry.owner = undefined;
      this.#hint(entry, resume);
      entry.leaseUntil = 0;
    }
    return Promise.resolve(true);
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The key's entry while `owner` holds its claim: not answered, not given back, not
   * expired, and not claimed again since (its lease may have run out, as long as
   * nobody took it: the answer is still the first one).
   */
  #held(key: string, owner: string, now: number): Entry<R> | undefined {
    const entry = this.#entries.get(key);
    return entry && entry.owner === owner && entry.expiresAt > now ? entry : undefined;
  }

  /** Sets the entry's hint, counting its bytes. */
  #hint(entry: Entry<R>, resume: ResumeHint): void {
    const grown = resume.executionId.length + resume.token.length - hintBytes(entry.resume);
    entry.resume = { executionId: resume.executionId, token: resume.token };
    entry.bytes += grown;
    this.#bytes += grown;
  }

  /** Drops the entry's hint (answered: nothing resumes), counting its bytes. */
  #unhint(entry: Entry<R>): void {
    const bytes = hintBytes(entry.resume);
    entry.resume = undefined;
    entry.bytes -= bytes;
    this.#bytes -= bytes;
  }

  #owner(): string {
    return (++this.#claims).toString(36);
  }

  #delete(key: string, entry: Entry<R> | undefined): void {
    if (!entry) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }

  /** Oldest first: drops keys while there are too many, they take too many bytes or expired. */
  #sweep(now: number): void {
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt <= now) this.#evictions.expired++;
      else if (this.#entries.size > this.#maxKeys) this.#evictions.count++;
      else if (this.#bytes > this.#maxBytes && this.#entries.size > 1) this.#evictions.bytes++;
      else break;
      this.#delete(key, entry);
    }
  }
}

function hintBytes(hint: ResumeHint | undefined): number {
  return hint ? hint.executionId.length + hint.token.length : 0;
}

/** SHA-256 (hex) over method, path with query, and the raw body: the request identity. */
export function requestFingerprint(
  method: string,
  pathWithQuery: string,
  body: string | Uint8Array | undefined,
): string {
  const hash = createHash('sha256');
  hash.update(`${method.toUpperCase()}\n${pathWithQuery}\n`);
  if (body !== undefined) hash.update(body);
  return hash.digest('hex');
}

/**
 * Parses an Idempotency-Key header: an sf-string (`"abc"`, per the IETF draft) or a bare
 * value; 1-255 visible ASCII characters. Throws HG_ERR_IDEMPOTENCY_KEY_INVALID.
 */
export function parseIdempotencyKey(header: string): string {
  let key = header.trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1);
  if (key.length < 1 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new HttpProblem(
      'HG_ERR_IDEMPOTENCY_KEY_INVALID',
      'Idempotency-Key must be 1-255 visible ASCII characters',
    );
  }
  return key;
}
