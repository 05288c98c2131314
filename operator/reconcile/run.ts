// Wires a resource source to the reconciler through a controller work queue:
// every change enqueues the objects it affects; nothing is reconciled before the
// source has synced; then every known object is reconciled once. A change of what
// the gateways serve (their reports' change feed) enqueues the triggers it affects.
import { Controller, type ControllerOptions } from '../controller/controller.ts';
import type { GatewayStore } from '../../api/records/gateways.ts';
import type { RouteStore, WorkflowRegistry } from '../../api/records/records.ts';
import type { ResourceSource } from '../sources/ports.ts';
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
}

export interface ReconcileLoop {
  reconciler: Reconciler;
  controller: Controller;
  stop(drainTimeoutMs?: number): Promise<void>;
}

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
  return {
    reconciler,
    controller: loop,
    async stop(drainTimeoutMs) {
      unsubscribe();
      await loop.stop(drainTimeoutMs);
      await source.stop();
    },
  };
}
