// Wires a resource source to the reconciler through a controller work queue:
// every change enqueues the objects it affects; nothing is reconciled before the
// source has synced; then every known object is reconciled once. A change of what
// the gateways serve (their reports' change feed) enqueues the triggers it affects.
// Once the workers run, the records of objects gone while no operator was looking are
// swept (orphans.ts): this runs only where the loop runs, in the leader.
import { realClock, type CancelTimer } from '../controller/clock.ts';
import type { Leadership } from '../controller/leader-election.ts';
import { Controller, type ControllerOptions } from '../controller/controller.ts';
import type { GatewayStore } from '../../api/records/gateways.ts';
import type { RouteStore, WorkflowRegistry } from '../../api/records/records.ts';
import type { ObjectRef, ResourceSource } from '../sources/ports.ts';
import { sweepOrphans, type SweepResult } from './orphans.ts';
import { parseRefKey, refKey } from './refs.ts';
import { Reconciler, type ReconcilerOptions } from './reconciler.ts';

export interface ReconcileLoopOptions {
  source: ResourceSource;
  routes: RouteStore;
  workflows: WorkflowRegistry;
  /** What the gateways serve: read for Deployed, its change feed enqueues triggers. */
  gateways: Pick<GatewayStore, 'served' | 'subscribe'>;
  baseUrl: string;
  recheck?: ReconcilerOptions['recheck'];
  controller?: Partial<Omit<ControllerOptions, 'reconcile'>>;
  recordEvent?: ReconcilerOptions['recordEvent'];
  /** The loop's own messages (each orphaned record swept). Default `controller.log`. */
  log?: ControllerOptions['log'];
  /**
   * The leader's, from the manager: the orphan sweep confirms it before each delete.
   * Omitted: one process, no leader election.
   */
  leadership?: Leadership;
}

export interface ReconcileLoop {
  reconciler: Reconciler;
  controller: Controller;
  /**
   * The sweep of orphaned routes and registrations: what it deleted, once it has run
   * (retried after a failure, 1 s doubling to 5 min; cut short by `stop`, and by the
   * loss of the Lease: `leadershipLost`); undefined when the loop stopped before a
   * sweep got through its reads.
   */
  swept: Promise<SweepResult | undefined>;
  stop(drainTimeoutMs?: number): Promise<void>;
}

/** Retry of a sweep that failed (the store or the API server unreachable). */
export const SWEEP_RETRY = { initialMs: 1_000, maxMs: 5 * 60_000 };

/**
 * Reconciles in flight at once. A reconcile mostly waits: on a trigger's first visit
 * three API writes in a row, plus the route and registry stores. Against a real API
 * server each is a network round trip (at 5 ms a write, 4 workers would cap a large
 * initial list near 200 reconciles a second); 16 keep it moving. (Against the
 * in-process test API server, whose round trips are sub-millisecond, 4 and 16 finish
 * 10,000 triggers in the same time: its CPU is the bound.) Different keys only; one
 * reconcile per key at a time still holds.
 */
export const DEFAULT_WORKERS = 16;

export async function startReconcileLoop(options: ReconcileLoopOptions): Promise<ReconcileLoop> {
  const { source } = options;
  // The two refer to each other; neither calls the other before both exist.
  const controller: Controller = new Controller({
    name: 'hookgate',
    workers: DEFAULT_WORKERS,
    ...options.controller,
    reconcile: (key) => reconciler.reconcile(parseRefKey(key)),
  });
  const reconciler: Reconciler = new Reconciler({
    source,
    routes: options.routes,
    workflows: options.workflows,
    gateways: options.gateways,
    baseUrl: options.baseUrl,
    ...(options.recheck ? { recheck: options.recheck } : {}),
    enqueue: (ref) => controller.enqueue(refKey(ref)),
    ...(options.recordEvent ? { recordEvent: options.recordEvent } : {}),
  });
  const loop = controller;
  await source.start(
    (ref) => {
      for (const dep of reconciler.dependents(ref)) loop.enqueue(refKey(dep));
    },
    // Allowed or refused the Secrets of a namespace: its triggers say so, or recover.
    (namespace) => {
      for (const t of source.list('WebhookTrigger')) {
        const ns = t.metadata.namespace ?? 'default';
        if (namespace === undefined || ns === namespace)
          loop.enqueue(refKey({ kind: 'WebhookTrigger', namespace: ns, name: t.metadata.name }));
      }
    },
  );
  const unsubscribe = options.gateways.subscribe((change) => {
    for (const dep of reconciler.servedChanged(change)) loop.enqueue(refKey(dep));
  });
  for (const kind of ['Workflow', 'WebhookTrigger'] as const) {
    for (const r of source.list(kind)) {
      loop.enqueue(
        refKey({ kind, namespace: r.metadata.namespace ?? 'default', name: r.metadata.name }),
      );
    }
  }
  loop.start();
  const sweep = sweepUntilDone(options, (ref) => loop.enqueue(refKey(ref)));
  return {
    reconciler,
    controller: loop,
    swept: sweep.done,
    async stop(drainTimeoutMs) {
      unsubscribe();
      sweep.stop();
      await loop.stop(drainTimeoutMs);
      await sweep.done;
      await source.stop();
    },
  };
}

/** Sweep orphaned records once, retrying with backoff until it succeeds or is stopped. */
function sweepUntilDone(
  options: ReconcileLoopOptions,
  enqueue: (ref: ObjectRef) => void,
): { done: Promise<SweepResult | undefined>; stop(): void } {
  const log = options.log ?? options.controller?.log ?? (() => {});
  const clock = options.controller?.clock ?? realClock;
  let stopped = false;
  let cancelWait: CancelTimer = () => {};
  let wake: () => void = () => {};
  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      wake = resolve;
      cancelWait = clock.setTimer(resolve, ms);
    });
  const run = async (): Promise<SweepResult | undefined> => {
    for (let delay = SWEEP_RETRY.initialMs; !stopped;) {
      try {
        const result = await sweepOrphans({
          source: options.source,
          routes: options.routes,
          workflows: options.workflows,
          enqueue,
          log,
          stopped: () => stopped,
          ...(options.leadership ? { leadership: options.leadership } : {}),
        });
        return result;
      } catch (err) {
        if (stopped) return undefined;
        log('Sweep of orphaned routes and registrations failed; retrying', {
          error: err instanceof Error ? err.message : String(err),
          inMs: delay,
        });
        await wait(delay);
        delay = Math.min(delay * 2, SWEEP_RETRY.maxMs);
      }
    }
    return undefined;
  };
  return {
    done: run(),
    stop() {
      stopped = true;
      cancelWait();
      wake();
    },
  };
}
