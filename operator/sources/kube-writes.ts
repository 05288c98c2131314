// What the Kubernetes source writes: status and our finalizer.
//
// - Status is written with PUT on the `/status` subresource carrying the
//   resourceVersion; a 409 re-reads the object and tries again (client-go DefaultRetry)
//   (O4). Conditions are merged by type onto what the server holds, so a condition type
//   another writer owns is kept and `lastTransitionTime` only moves on a status flip.
//   A 409 whose re-read shows another value of what we write (our condition types, our
//   status fields) than the write started from (another writer's since: a replica
//   that lost the Lease beside the new leader) is not retried: the status was computed from an older look at the world, and
//   applying it over the newer one would stick (same generation: no watch event has
//   the object reconciled again, ADR 0008). StatusChangedError fails the reconcile,
//   which runs again from what is there now (controller-runtime's requeue on a
//   conflict). A 409 for anything else (a label, the spec, another controller's
//   condition type) is retried as before.
//   The body is the object's identity and its status: the API server takes nothing
//   else from a `/status` write.
// - Finalizers are added and removed with a merge patch on the main resource carrying
//   the resourceVersion (controller-runtime's MergeFromWithOptimisticLock), so it is
//   just as conflict-safe as a PUT and cannot drop the fields the cache leaves out
//   (kube-cache.ts); only our own finalizer is touched (O6).
// - Every write is for one object, the one the reconcile read: its uid (given, else
//   that of the first read). A conflict's re-read that finds another uid under the name
//   (the object deleted and created again meanwhile: a cache behind a `kubectl delete`
//   + `apply`, a replica that lost the Lease finishing a reconcile after the new
//   leader's) counts as the object gone: nothing computed for the old object lands on
//   the new one, not its status, not the removal of the new one's finalizer (whose
//   delete would then skip its cleanup), not a finalizer the new one's own reconcile
//   has not asked for. The server refuses the first write already (its resourceVersion
//   is the old object's, a status PUT also carries its uid); only the re-read decided.
// - Read your own writes: the object a write returns is the base of the next write in
//   the same reconcile until the informer has caught up, as controller-runtime's
//   client updates the object it is given. Otherwise each write after the first would
//   start from the informer's older copy, fail with 409 and read the server again.
//   Reads see it too (`latest`, used by the source's `get`): a reconcile that starts
//   while the informer lags behind the previous one's writes would otherwise take a
//   new object for one never visited and set its conditions back to Unknown.
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import { jsonEqual } from '../controller/json-equal.ts';
import { isNotFound, PatchType, type KubeClient } from '../controller/kube-client.ts';
import {
  DEFAULT_RETRY,
  retryOnConflict,
  type Backoff,
  type RetryDeps,
} from '../controller/retry.ts';
import { slim } from './kube-cache.ts';
import { KINDS, resourcePath, type KubeObject } from './kube-resources.ts';
import type { ObjectRef } from './ports.ts';

interface Condition {
  type: string;
  status: string;
  lastTransitionTime?: string;
  [k: string]: unknown;
}

/**
 * Merge `desired` onto `current` the way meta.SetStatusCondition does, keyed by
 * condition type: our types replace theirs (keeping the server's lastTransitionTime
 * when the status did not flip), other types already on the server are kept.
 */
export function mergeStatus(current: unknown, desired: unknown): unknown {
  if (!isRecord(desired)) return desired;
  const ours = desired.conditions;
  const theirs = isRecord(current) ? current.conditions : undefined;
  if (!Array.isArray(ours) || !Array.isArray(theirs)) return desired;
  const byType = new Map<string, Condition>();
  for (const c of theirs as Condition[]) byType.set(c.type, c);
  const merged: Condition[] = (ours as Condition[]).map((c) => {
    const old = byType.get(c.type);
    byType.delete(c.type);
    if (old && old.status === c.status && old.lastTransitionTime !== undefined) {
      return { ...c, lastTransitionTime: old.lastTransitionTime };
    }
    return c;
  });
  return { ...desired, conditions: [...merged, ...byType.values()] };
}

/**
 * What of `status` a write of `desired` would replace: the fields it sets, and of the
 * conditions only its types (another writer's types are kept by mergeStatus).
 */
function ownPart(status: unknown, desired: unknown): unknown {
  if (!isRecord(desired)) return status;
  const current = isRecord(status) ? status : {};
  const ours = new Set(
    Array.isArray(desired.conditions) ? (desired.conditions as Condition[]).map((c) => c.type) : [],
  );
  const part: Record<string, unknown> = {};
  for (const key of Object.keys(desired)) {
    if (key !== 'conditions') part[key] = current[key];
    else {
      const conditions = Array.isArray(current.conditions)
        ? (current.conditions as Condition[])
        : [];
      part[key] = conditions.filter((c) => ours.has(c.type));
    }
  }
  return part;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const refKey = (ref: ObjectRef): string => `${ref.kind}/${ref.namespace}/${ref.name}`;

/** What our last write of an object returned, and the versions it supersedes. */
interface Written {
  /**
   * Versions the informer may still hold that `object` is newer than: the one it held
   * when we started writing, and those of our own earlier writes it has not sent yet.
   */
  behind: Set<string>;
  object: KubeObject;
}

/** The base of a read-modify-write, and the versions it supersedes (as in Written). */
interface Read {
  base: KubeObject;
  behind: Set<string>;
}

export interface KubeWriterOptions {
  client: KubeClient;
  /** The object from the informer cache, tried first (a conflict reads the server). */
  cached: (ref: ObjectRef) => KubeObject | undefined;
  /** Conflict retry. Default client-go DefaultRetry. */
  retry?: Backoff;
  retryDeps?: RetryDeps;
}

/** Status and finalizer writes, each a read-modify-write retried on conflict. */
export class KubeWriter {
  readonly #o: KubeWriterOptions;
  /**
   * Per object, what our last write returned, kept only while the informer holds a
   * version it supersedes: once the informer has our last write (or anyone else's),
   * `observed` drops it, so this holds at most the objects written since the watch
   * last caught up.
   */
  readonly #written = new Map<string, Written>();

  constructor(options: KubeWriterOptions) {
    this.#o = options;
  }

  /**
   * The informer has a new version of `ref` (or lost it). Our own copy stays the base
   * of the next write only while the informer's is one of our own earlier writes.
   */
  observed(ref: ObjectRef): void {
    const key = refKey(ref);
    const written = this.#written.get(key);
    const rv = this.#o.cached(ref)?.metadata.resourceVersion;
    if (written && (rv === undefined || !written.behind.has(rv))) this.#written.delete(key);
  }

  /**
   * Our last write of `ref` while the informer still holds a version it supersedes,
   * else undefined (read the informer). Reads see our own writes through it: a
   * reconcile that starts before the informer caught up with the previous one must
   * not take the object for one never reconciled (and write every condition Unknown
   * again, or announce Ready again).
   */
  latest(ref: ObjectRef): KubeObject | undefined {
    const written = this.#written.get(refKey(ref));
    const rv = this.#o.cached(ref)?.metadata.resourceVersion;
    return written && rv !== undefined && written.behind.has(rv) ? written.object : undefined;
  }

  /** How many objects are read from our own writes rather than the informer (tests). */
  get pendingWrites(): number {
    return this.#written.size;
  }

  /**
   * Write `status` onto the object `uid` names (default: the one first read); an
   * object of that name with another uid is left alone, as a gone one is.
   */
  async writeStatus(ref: ObjectRef, status: unknown, uid?: string): Promise<void> {
    const path = resourcePath(ref.kind, ref.namespace, ref.name);
    const pin = new UidPin(uid);
    /** The status the first attempt started from. */
    let startedFrom: unknown;
    await retryOnConflict(
      this.#o.retry ?? DEFAULT_RETRY,
      async (attempt) => {
        const read = pin.check(await this.#read(ref, attempt === 0));
        if (!read) return;
        const { base } = read;
        if (attempt === 0) startedFrom = base.status;
        else if (!jsonEqual(ownPart(base.status, status), ownPart(startedFrom, status))) {
          throw new StatusChangedError(ref);
        }
        const next = mergeStatus(base.status, status);
        if (jsonEqual(base.status, next)) return;
        const { name, namespace, uid, resourceVersion } = base.metadata;
        const body = {
          apiVersion: base.apiVersion,
          kind: base.kind,
          metadata: { name, namespace, uid, resourceVersion },
          status: next,
        };
        const written = await ignoreNotFound(
          this.#o.client.request<KubeObject>('PUT', `${path}/status`, { body }),
        );
        this.#remember(ref, read, written);
      },
      this.#o.retryDeps,
    );
  }

  /**
   * Put our finalizer on the object. True when it is on a live object (added now or
   * there already): side effects may go ahead. False when it is being deleted, when the
   * API server takes no new finalizer (K10): nothing may then be deployed for it, the
   * caller cleans up instead (O6); also when the name now holds another object than
   * `uid` (default: the one first read). Rejects on a 404 (see below) as on any error.
   */
  async addFinalizer(ref: ObjectRef, uid?: string): Promise<boolean> {
    const obj = await this.#updateFinalizers(
      ref,
      (list) => {
        if (list.includes(FINALIZER)) return undefined;
        return [...list, FINALIZER];
      },
      true,
      uid,
    );
    if (obj === REPLACED) return false;
    if (obj === undefined) {
      // A 404 (to the PATCH or to a re-read) for an object our informer holds: gone, or
      // its custom resource's handler being rebuilt after a CRD update, which answers
      // 404 to every verb for a moment. Not a verdict to tear a live object's route down
      // on: an error, so the reconcile is retried; a real deletion arrives as the
      // informer's DELETED event, and the reconcile then cleans up.
      throw new Error(
        `${ref.kind} ${ref.namespace}/${ref.name}: not found while adding our finalizer`,
      );
    }
    return !obj.metadata.deletionTimestamp && (obj.metadata.finalizers ?? []).includes(FINALIZER);
  }

  /** Take our finalizer off the object `uid` names (default: the one first read). */
  async removeFinalizer(ref: ObjectRef, uid?: string): Promise<void> {
    await this.#updateFinalizers(
      ref,
      (list) => {
        if (!list.includes(FINALIZER)) return undefined;
        return list.filter((f) => f !== FINALIZER);
      },
      false,
      uid,
    );
  }

  /**
   * Read-modify-write of metadata.finalizers through the main resource (a merge patch
   * with the resourceVersion). `edit` returns undefined when nothing needs to change.
   * Returns the object as last known (what the PATCH returned, or the base when nothing
   * was written), undefined when it is gone, REPLACED when the name holds another
   * object than the one pinned (`uid`, else the first read).
   */
  async #updateFinalizers(
    ref: ObjectRef,
    edit: (finalizers: string[]) => string[] | undefined,
    adding: boolean,
    uid: string | undefined,
  ): Promise<KubeObject | typeof REPLACED | undefined> {
    const path = resourcePath(ref.kind, ref.namespace, ref.name);
    const pin = new UidPin(uid);
    return retryOnConflict(
      this.#o.retry ?? DEFAULT_RETRY,
      async (attempt) => {
        const fromCache = attempt === 0;
        let read = pin.check(await this.#read(ref, fromCache));
        if (pin.replaced) return REPLACED;
        if (!read) return undefined;
        let next = edit(read.base.metadata.finalizers ?? []);
        if (!next && fromCache && !adding) {
          // The cache may lag behind our own add: confirm "nothing to remove" with the
          // server, or a deleting object could keep our finalizer for good.
          read = pin.check(await this.#read(ref, false));
          if (pin.replaced) return REPLACED;
          if (!read) return undefined;
          next = edit(read.base.metadata.finalizers ?? []);
        }
        if (!next) return read.base;
        if (adding && read.base.metadata.deletionTimestamp) {
          // The API server refuses new finalizers on a deleting object (K10).
          return read.base;
        }
        // The resourceVersion makes the patch conditional: 409 when the object moved on.
        const written = await ignoreNotFound(
          this.#o.client.request<KubeObject>('PATCH', path, {
            contentType: PatchType.merge,
            body: {
              metadata: { resourceVersion: read.base.metadata.resourceVersion, finalizers: next },
            },
          }),
        );
        this.#remember(ref, read, written);
        // A 404: gone, as far as this answer tells (addFinalizer does not take it so).
        return written;
      },
      this.#o.retryDeps,
    );
  }

  /**
   * The object on a first attempt: our own last write while the informer has not
   * caught up with it, else the informer's copy. From the API server after a conflict.
   */
  async #read(ref: ObjectRef, fromCache: boolean): Promise<Read | undefined> {
    const cached = this.#o.cached(ref);
    const informerRv = cached?.metadata.resourceVersion;
    if (fromCache && cached) {
      const written = this.#written.get(refKey(ref));
      if (written && informerRv !== undefined && written.behind.has(informerRv)) {
        return { base: written.object, behind: written.behind };
      }
      return { base: cached, behind: new Set() };
    }
    try {
      const fresh = await this.#o.client.request<KubeObject>(
        'GET',
        resourcePath(ref.kind, ref.namespace, ref.name),
      );
      const base = slim(fresh, ref.kind, KINDS[ref.kind].apiVersion);
      return { base, behind: new Set(informerRv === undefined ? [] : [informerRv]) };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Keep what a write returned as the base of the next write, while the informer holds
   * a version it supersedes (the base's, or one the base superseded). A 404 keeps
   * nothing; a no-op write (same resourceVersion) changes nothing.
   */
  #remember(ref: ObjectRef, read: Read, written: KubeObject | undefined): void {
    const key = refKey(ref);
    const rv = written?.metadata?.resourceVersion;
    const baseRv = read.base.metadata.resourceVersion;
    if (rv !== undefined && rv === baseRv) return;
    const behind = new Set(read.behind);
    if (baseRv !== undefined) behind.add(baseRv);
    const informerRv = this.#o.cached(ref)?.metadata.resourceVersion;
    if (!written || rv === undefined || informerRv === undefined || !behind.has(informerRv)) {
      this.#written.delete(key);
      return;
    }
    this.#written.set(key, { behind, object: slim(written, ref.kind, KINDS[ref.kind].apiVersion) });
  }
}

/**
 * A status write met a status another writer wrote since the reconcile's read: not
 * written over; the reconcile fails and is retried from what is there now.
 */
export class StatusChangedError extends Error {
  constructor(ref: ObjectRef) {
    super(
      `${ref.kind} ${ref.namespace}/${ref.name}: its status was written by another writer since this reconcile read it; reconciling again`,
    );
    this.name = 'StatusChangedError';
  }
}

/** What #updateFinalizers returns when the name holds another object than the pinned one. */
const REPLACED = Symbol('replaced');

/**
 * The uid a write is for: the one given, else the first read's. A read of another uid
 * is none (the pinned object is gone), and `replaced` says so.
 */
class UidPin {
  #uid: string | undefined;
  replaced = false;

  constructor(uid: string | undefined) {
    this.#uid = uid;
  }

  check(read: Read | undefined): Read | undefined {
    const found = read?.base.metadata.uid;
    if (read === undefined || typeof found !== 'string') return read;
    this.#uid ??= found;
    if (found === this.#uid) return read;
    this.replaced = true;
    return undefined;
  }
}

async function ignoreNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (!isNotFound(err)) throw err;
    return undefined;
  }
}
