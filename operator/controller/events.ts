// An event recorder: core v1 Events about our objects, visible in `kubectl describe`.
// Modelled on client-go's EventRecorder + EventCorrelator, reduced to what we need:
//
// - The same event (object, type, reason, message) repeated within the aggregation
//   window is not created again: the existing Event's `count` and `lastTimestamp` are
//   patched instead (client-go's EventLogger dedup).
// - Each involved object has a token bucket (client-go defaults: burst 25, refilled
//   one token every 5 minutes); events over the limit are dropped.
// - Recording never throws and never blocks a reconcile: it is fire-and-forget, and a
//   failure is only logged.
// - Bounded, as client-go's broadcaster and correlator are: at most 1000 events wait
//   to be written (more are dropped and counted), a few writes are in flight at once,
//   and the per-object buckets and the aggregation records are LRU caches of 4096
//   entries. Ten thousand objects turning Ready at once cost a bounded queue, not ten
//   thousand requests in flight and a bucket per object for ever.
import { randomBytes } from 'node:crypto';
import { realClock, type Clock } from './clock.ts';
import { PatchType, type KubeClient } from './kube-client.ts';
import { BucketRateLimiter } from './rate-limiter.ts';

export const EventType = { Normal: 'Normal', Warning: 'Warning' } as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/**
 * Reasons of the operator's own lifecycle events. Events about a condition use the
 * condition `Reason` constants of the API module (Deployed, Published, SecretNotFound,
 * PathConflict, ...), so `kubectl describe` and the status tell the same story.
 */
export const EventReason = {
  /** A reconcile failed and will be retried with backoff (Warning). */
  ReconcileError: 'ReconcileError',
  /** A reconcile failed in a way retrying cannot fix (Warning). */
  ReconcileFailed: 'ReconcileFailed',
  /** The finalizer was added before the first side effect (Normal). */
  FinalizerAdded: 'FinalizerAdded',
  /** Cleanup on deletion failed and will be retried; the object stays (Warning). */
  CleanupFailed: 'CleanupFailed',
  /** Cleanup finished and the finalizer was removed (Normal). */
  CleanedUp: 'CleanedUp',
} as const;
export type EventReason = (typeof EventReason)[keyof typeof EventReason];

/** The object an event is about. */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorderOptions {
  client: KubeClient;
  /** `source.component` and `reportingComponent`, e.g. `hookgate-operator`. */
  component: string;
  /** `reportingInstance`, e.g. the pod name. */
  instance?: string;
  /** Repeat window in which identical events are aggregated. Default 10 min. */
  aggregateWindowMs?: number;
  /** Per-object rate limit. Default burst 25, 1 per 300 s. */
  burst?: number;
  qps?: number;
  /** Events waiting to be written before new ones are dropped. Default 1000. */
  maxQueued?: number;
  /** Event writes in flight at once. Default 4. */
  maxInFlight?: number;
  /**
   * Event writes per second across all objects, and their burst (client-go's event
   * sink goes through its client's rate limiter). Default 20/s, burst 100.
   */
  writeQps?: number;
  writeBurst?: number;
  /** Entries of the per-object buckets and of the aggregation records. Default 4096. */
  cacheSize?: number;
  clock?: Clock;
  /** Wall time for timestamps. Default Date.now. */
  wallTime?: () => number;
  log?: (msg: string, fields?: object) => void;
}

interface Seen {
  name: string;
  namespace: string;
  count: number;
  at: number;
}

interface Queued {
  obj: InvolvedObject;
  type: EventType;
  reason: string;
  message: string;
}

export class EventRecorder {
  readonly #o: EventRecorderOptions;
  readonly #clock: Clock;
  readonly #wallTime: () => number;
  readonly #cacheSize: number;
  readonly #seen = new Map<string, Seen>();
  readonly #limiters = new Map<string, BucketRateLimiter>();
  readonly #queue: Queued[] = [];
  readonly #writes: BucketRateLimiter;
  #wake: NodeJS.Timeout | undefined;
  #inFlight = 0;
  #idle: (() => void)[] = [];
  /** Events dropped by the rate limiter or a full queue (observability and tests). */
  dropped = 0;

  constructor(options: EventRecorderOptions) {
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#wallTime = options.wallTime ?? Date.now;
    this.#cacheSize = options.cacheSize ?? 4096;
    this.#writes = new BucketRateLimiter(
      options.writeQps ?? 20,
      options.writeBurst ?? 100,
      this.#clock,
    );
  }

  /** Record an event; returns at once. `flush()` waits until every queued one is written. */
  event(obj: InvolvedObject, type: EventType, reason: string, message: string): void {
    const namespace = obj.metadata.namespace ?? 'default';
    const objectKey = `${obj.kind}/${namespace}/${obj.metadata.name}/${obj.metadata.uid ?? ''}`;
    if (this.#queue.length >= (this.#o.maxQueued ?? 1000) || !this.#allow(objectKey)) {
      this.dropped++;
      return;
    }
    this.#queue.push({ obj, type, reason, message });
    this.#pump();
  }

  /** Wait until no event is queued or being written (tests, shutdown). */
  flush(): Promise<void> {
    if (this.#queue.length === 0 && this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #pump(): void {
    while (this.#inFlight < (this.#o.maxInFlight ?? 4) && this.#queue.length > 0) {
      if (!this.#writes.allow()) {
        // Out of write tokens: look again once one has come back. An unref'd timer:
        // events waiting to be written never keep a stopping process alive.
        if (this.#wake) return;
        this.#wake = setTimeout(
          () => {
            this.#wake = undefined;
            this.#pump();
          },
          1000 / (this.#o.writeQps ?? 20),
        ).unref();
        return;
      }
      const next = this.#queue.shift() as Queued;
      this.#inFlight++;
      void this.#record(next.obj, next.type, next.reason, next.message)
        .catch((err: unknown) =>
          this.#o.log?.('failed to record event', {
            reason: next.reason,
            object: `${next.obj.metadata.namespace ?? ''}/${next.obj.metadata.name}`,
            error: err instanceof Error ? err.message : String(err),
          }),
        )
        .finally(() => {
          this.#inFlight--;
          this.#pump();
          if (this.#queue.length === 0 && this.#inFlight === 0) {
            for (const resolve of this.#idle.splice(0)) resolve();
          }
        });
    }
  }

  async #record(obj: InvolvedObject, type: EventType, reason: string, message: string) {
    const namespace = obj.metadata.namespace ?? 'default';
    const objectKey = `${obj.kind}/${namespace}/${obj.metadata.name}/${obj.metadata.uid ?? ''}`;
    const key = `${objectKey}|${type}|${reason}|${message}`;
    const now = this.#clock.now();
    const nowIso = new Date(this.#wallTime()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const seen = this.#seen.get(key);
    const windowMs = this.#o.aggregateWindowMs ?? 10 * 60_000;
    if (seen && now - seen.at < windowMs) {
      seen.count++;
      seen.at = now;
      touch(this.#seen, key, seen);
      try {
        await this.#o.client.request(
          'PATCH',
          `/api/v1/namespaces/${encodeURIComponent(seen.namespace)}/events/${encodeURIComponent(seen.name)}`,
          {
            contentType: PatchType.merge,
            body: { count: seen.count, lastTimestamp: nowIso },
          },
        );
        return;
      } catch {
        // The Event expired or was deleted: create a fresh one below.
      }
    }
    this.#prune(now, windowMs);
    const name = `${obj.metadata.name}.${(BigInt(this.#wallTime()) * 1_000_000n).toString(16)}${randomBytes(2).toString('hex')}`;
    await this.#o.client.request(
      'POST',
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      {
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name, namespace },
          involvedObject: {
            apiVersion: obj.apiVersion,
            kind: obj.kind,
            name: obj.metadata.name,
            namespace,
            ...(obj.metadata.uid ? { uid: obj.metadata.uid } : {}),
            ...(obj.metadata.resourceVersion
              ? { resourceVersion: obj.metadata.resourceVersion }
              : {}),
          },
          type,
          reason,
          message,
          count: 1,
          firstTimestamp: nowIso,
          lastTimestamp: nowIso,
          source: { component: this.#o.component },
          reportingComponent: this.#o.component,
          reportingInstance: this.#o.instance ?? '',
        },
      },
    );
    touch(this.#seen, key, { name, namespace, count: 1, at: now }, this.#cacheSize);
  }

  #allow(objectKey: string): boolean {
    let limiter = this.#limiters.get(objectKey);
    if (!limiter) {
      limiter = new BucketRateLimiter(this.#o.qps ?? 1 / 300, this.#o.burst ?? 25, this.#clock);
    }
    touch(this.#limiters, objectKey, limiter, this.#cacheSize);
    return limiter.allow();
  }

  /** Forget aggregation records past the window; the least recently used come first. */
  #prune(now: number, windowMs: number): void {
    for (const [k, v] of this.#seen) {
      if (now - v.at < windowMs) return;
      this.#seen.delete(k);
    }
  }
}

/**
 * Make `key` the most recently used entry of `map` (a Map iterates in insertion
 * order), and evict the least recently used ones beyond `max` (client-go's LRU caches).
 */
function touch<V>(map: Map<string, V>, key: string, value: V, max = Infinity): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done) break;
    map.delete(oldest.value);
  }
}
