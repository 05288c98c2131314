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

export class EventRecorder {
  readonly #o: EventRecorderOptions;
  readonly #clock: Clock;
  readonly #wallTime: () => number;
  readonly #seen = new Map<string, Seen>();
  readonly #limiters = new Map<string, BucketRateLimiter>();
  #pending = new Set<Promise<void>>();
  /** Events dropped by the rate limiter (observability and tests). */
  dropped = 0;

  constructor(options: EventRecorderOptions) {
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#wallTime = options.wallTime ?? Date.now;
  }

  /** Record an event; returns at once. `flush()` waits for the writes in flight. */
  event(obj: InvolvedObject, type: EventType, reason: string, message: string): void {
    const p = this.#record(obj, type, reason, message).catch((err: unknown) =>
      this.#o.log?.('failed to record event', {
        reason,
        object: `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`,
        error: err instanceof Error ? err.message : String(err),
      }),
    );
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }

  /** Wait for every event write in flight (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  async #record(obj: InvolvedObject, type: EventType, reason: string, message: string) {
    const namespace = obj.metadata.namespace ?? 'default';
    const objectKey = `${obj.kind}/${namespace}/${obj.metadata.name}/${obj.metadata.uid ?? ''}`;
    if (!this.#allow(objectKey)) {
      this.dropped++;
      return;
    }
    const key = `${objectKey}|${type}|${reason}|${message}`;
    const now = this.#clock.now();
    const nowIso = new Date(this.#wallTime()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const seen = this.#seen.get(key);
    const windowMs = this.#o.aggregateWindowMs ?? 10 * 60_000;
    if (seen && now - seen.at < windowMs) {
      seen.count++;
      seen.at = now;
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
    this.#seen.set(key, { name, namespace, count: 1, at: now });
  }

  #allow(objectKey: string): boolean {
    let limiter = this.#limiters.get(objectKey);
    if (!limiter) {
      limiter = new BucketRateLimiter(this.#o.qps ?? 1 / 300, this.#o.burst ?? 25, this.#clock);
      this.#limiters.set(objectKey, limiter);
    }
    return limiter.allow();
  }

  #prune(now: number, windowMs: number): void {
    if (this.#seen.size < 4096) return;
    for (const [k, v] of this.#seen) if (now - v.at >= windowMs) this.#seen.delete(k);
  }
}
