// Ports for the state the operator writes and the gateway and engine read.
// Two adapters each: memory (embedded default, unit tests) and Redis (shared).
import type { WebhookTriggerSpec, WorkflowSpec, Environment } from '../v1alpha1/index.ts';

/** Auth material resolved from Secrets when the route is deployed. Keys are stored hashed. */
export interface ResolvedCredentials {
  /** API keys as SHA-256 hex digests, each naming the consumer id it belongs to. */
  apiKeys?: { consumer: string; sha256: string }[];
  /** Static JWT verification key (PEM, JWK JSON or HMAC secret) from bearer/oauth2 keySecretRef. */
  jwtKey?: string;
  /**
   * Active signing secrets of a signed-delivery trigger (auth.method signature), each
   * with the Secret key it came from (the consumer a delivery it signed is counted as).
   * Kept as they are: an HMAC needs the secret itself.
   */
  signingSecrets?: { key: string; secret: string }[];
  /**
   * The `whsec_` secrets that sign this trigger's Async Callbacks
   * (response.callbackSecretRef), in key order; absent: the engine's own.
   */
  callbackSecrets?: string[];
  /** OAuth 2.0 introspection client secret. */
  introspectionClientSecret?: string;
  /** The test credential (API key or token) saved for Send Test Request. */
  testCredential?: string;
}

/** A deployed endpoint: everything the gateway needs to serve one WebhookTrigger. */
export interface RouteRecord {
  /** `<namespace>/<name>` of the WebhookTrigger. */
  key: string;
  namespace: string;
  name: string;
  uid: string;
  generation: number;
  workflowId: string;
  /** Path template served, e.g. `/webhook/shop_production_orders/ingest/:id`. */
  path: string;
  application: string;
  environment: Environment;
  /** The admitted (defaulted) trigger spec. */
  spec: WebhookTriggerSpec;
  credentials: ResolvedCredentials;
}

/** A published workflow: what the engine runs. */
export interface WorkflowRegistration {
  workflowId: string;
  namespace: string;
  name: string;
  /**
   * The Workflow's uid: a Workflow created again under the same name writes a
   * registration that differs from the deleted one's, which the orphan sweep's
   * compare-and-delete then keeps. Absent in registrations written before 2026-11-28.
   */
  uid?: string;
  generation: number;
  application: string;
  environment: Environment;
  spec: WorkflowSpec;
}

/** Told which key changed; `undefined`: anything may have changed. */
export type ChangeListener = (key?: string) => void;

/** A key/value store of records with a change feed. */
export interface RecordStore<T> {
  put(key: string, value: T): Promise<void>;
  /** Idempotent: deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  /**
   * Delete `key` only while it holds `expected`, a record as `get` or `list` returned it
   * (compared as its JSON): true when deleted; false when another record was put there
   * since, or none is left. A decision taken on an old read deletes nothing newer, as a
   * Kubernetes delete precondition (uid, resourceVersion) guards an object: the sweep
   * of orphaned records deletes this way (operator/reconcile/orphans.ts).
   */
  deleteIf(key: string, expected: T): Promise<boolean>;
  get(key: string): Promise<T | undefined>;
  list(): Promise<T[]>;
  /**
   * Called after every change with the key that changed, or with no key when anything
   * may have changed (e.g. after a reconnect: re-read everything). Coalescing allowed.
   * Returns the unsubscribe function.
   */
  subscribe(listener: ChangeListener): () => void;
}

/** The object a record was written for, as far as ordering two writes of it goes. */
export interface WrittenFor {
  /** The object's uid; empty or absent: not known, so not ordered. */
  uid?: string;
  /** The object's `metadata.generation` the record was computed from. */
  generation: number;
}

/**
 * Whether `stored` (a record as read, or any value) was written from a later generation
 * of the object `writer` was computed from: the same non-empty uid, a greater
 * generation. Records of another object (another uid: an object deleted and created
 * again under the name; uids are not ordered), without a uid, or that are no record at
 * all are never newer. The Redis adapter applies the same rule in its script.
 */
export function supersedes(stored: unknown, writer: WrittenFor): boolean {
  if (!writer.uid || typeof stored !== 'object' || stored === null) return false;
  const { uid, generation } = stored as Partial<Record<keyof WrittenFor, unknown>>;
  return uid === writer.uid && typeof generation === 'number' && generation > writer.generation;
}

/**
 * A store of records that say which object, at which generation, they were written for
 * (top-level `uid` and `generation`). A writer working from an older look at an object
 * (a leader that lost the Lease and has not noticed yet, finishing a reconcile after the
 * new leader's) cannot put back, or delete, a record written from a newer generation of
 * it: the check and the write are one step (one Redis script), as a Kubernetes update's
 * resourceVersion precondition. ADR 0051 says what this does not cover.
 */
export interface VersionedRecordStore<T extends WrittenFor> extends RecordStore<T> {
  /**
   * Put `value` unless `key` holds a record that `supersedes` it: true when written
   * (and announced), false when a newer one is there (nothing written or announced).
   */
  putUnlessSuperseded(key: string, value: T): Promise<boolean>;
  /**
   * Delete `key` unless it holds a record that `supersedes` `writer`: true when deleted
   * (announced) or already missing, false when a newer one is there (kept).
   */
  deleteUnlessSuperseded(key: string, writer: WrittenFor): Promise<boolean>;
}

/**
 * A write refused by `putUnlessSuperseded` or `deleteUnlessSuperseded`: the store holds
 * a record of a later generation of the object than the writer looked at.
 */
export class SupersededRecordError extends Error {
  constructor(what: string, key: string, writer: WrittenFor) {
    super(
      `${what} ${key} holds a record of a later generation than ${writer.generation} ` +
        '(written by a newer look at the object): not replaced',
    );
    this.name = 'SupersededRecordError';
  }
}

/** Routes keyed by trigger key (`<namespace>/<name>`). */
export type RouteStore = VersionedRecordStore<RouteRecord>;
/** Workflows keyed by workflow identifier. */
export type WorkflowRegistry = VersionedRecordStore<WorkflowRegistration>;
