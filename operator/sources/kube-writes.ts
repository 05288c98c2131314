// What the Kubernetes source writes: status and our finalizer.
//
// - Status is written with PUT on the `/status` subresource carrying the
//   resourceVersion; a 409 re-reads the object and tries again (client-go DefaultRetry)
//   (O4). Conditions are merged by type onto what the server holds, so a condition type
//   another writer owns is kept and `lastTransitionTime` only moves on a status flip.
// - Finalizers are added and removed with PUT on the main resource, also conditional on
//   the resourceVersion and retried on conflict; only our own finalizer is touched (O6).
import { isDeepStrictEqual } from 'node:util';
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import { isNotFound, type KubeClient } from '../controller/kube-client.ts';
import {
  DEFAULT_RETRY,
  retryOnConflict,
  type Backoff,
  type RetryDeps,
} from '../controller/retry.ts';
import { resourcePath, type KubeObject } from './kube-resources.ts';
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

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON round trip: drops `undefined`, so comparisons match what the server would store. */
function normalize(v: unknown): unknown {
  return v === undefined ? undefined : (JSON.parse(JSON.stringify(v)) as unknown);
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

  constructor(options: KubeWriterOptions) {
    this.#o = options;
  }

  async writeStatus(ref: ObjectRef, status: unknown): Promise<void> {
    const path = resourcePath(ref.kind, ref.namespace, ref.name);
    await retryOnConflict(
      this.#o.retry ?? DEFAULT_RETRY,
      async (attempt) => {
        const base = await this.#read(ref, attempt === 0);
        if (!base) return;
        const next = normalize(mergeStatus(base.status, status));
        if (isDeepStrictEqual(normalize(base.status), next)) return;
        await ignoreNotFound(
          this.#o.client.request('PUT', `${path}/status`, { body: { ...base, status: next } }),
        );
      },
      this.#o.retryDeps,
    );
  }

  addFinalizer(ref: ObjectRef): Promise<void> {
    return this.#updateFinalizers(
      ref,
      (list) => {
        if (list.includes(FINALIZER)) return undefined;
        return [...list, FINALIZER];
      },
      true,
    );
  }

  removeFinalizer(ref: ObjectRef): Promise<void> {
    return this.#updateFinalizers(
      ref,
      (list) => {
        if (!list.includes(FINALIZER)) return undefined;
        return list.filter((f) => f !== FINALIZER);
      },
      false,
    );
  }

  /**
   * Read-modify-write of metadata.finalizers through the main resource (PUT with the
   * resourceVersion). `edit` returns undefined when nothing needs to change.
   */
  async #updateFinalizers(
    ref: ObjectRef,
    edit: (finalizers: string[]) => string[] | undefined,
    adding: boolean,
  ): Promise<void> {
    const path = resourcePath(ref.kind, ref.namespace, ref.name);
    await retryOnConflict(
      this.#o.retry ?? DEFAULT_RETRY,
      async (attempt) => {
        const fromCache = attempt === 0;
        let base = await this.#read(ref, fromCache);
        if (!base) {
          if (adding) throw new Error(`${ref.kind} ${ref.namespace}/${ref.name} not found`);
          return;
        }
        let next = edit(base.metadata.finalizers ?? []);
        if (!next && fromCache && !adding) {
          // The cache may lag behind our own add: confirm "nothing to remove" with the
          // server, or a deleting object could keep our finalizer for good.
          const fresh = await this.#read(ref, false);
          if (!fresh) return;
          base = fresh;
          next = edit(base.metadata.finalizers ?? []);
        }
        if (!next) return;
        if (adding && base.metadata.deletionTimestamp) {
          // The API server refuses new finalizers on a deleting object (K10).
          return;
        }
        await ignoreNotFound(
          this.#o.client.request('PUT', path, {
            body: { ...base, metadata: { ...base.metadata, finalizers: next } },
          }),
        );
      },
      this.#o.retryDeps,
    );
  }

  /** The object from the cache on a first attempt, from the API server after a conflict. */
  async #read(ref: ObjectRef, fromCache: boolean): Promise<KubeObject | undefined> {
    if (fromCache) {
      const cached = this.#o.cached(ref);
      if (cached) return cached;
    }
    try {
      return await this.#o.client.request<KubeObject>(
        'GET',
        resourcePath(ref.kind, ref.namespace, ref.name),
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

async function ignoreNotFound(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
