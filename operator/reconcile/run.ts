// Wires a resource source to the reconciler through a controller work queue:
// every change enqueues the objects it affects; nothing is reconciled before the
// source has synced; then every known object is reconciled once.
import { Controller, type ControllerOptions } from '../controller/controller.ts';
import type { RouteStore, WorkflowRegistry } from '../../api/records/records.ts';
import type { ResourceSource } from '../sources/ports.ts';
import { parseRefKey, refKey } from './refs.ts';
import { Reconciler, type ReconcilerOptions } from './reconciler.ts';

export interface ReconcileLoopOptions {
  source: ResourceSource;
  routes: RouteStore;
  workflows: WorkflowRegistry;
  baseUrl: string;
  controller?: Partial<Omit<ControllerOptions, 'reconcile'>>;
  recordEvent?: ReconcilerOptions['recordEvent'];
}

export interface ReconcileLoop {
  reconciler: Reconciler;
  controller: Controller;
  stop(drainTimeoutMs?: number): Promise<void>;
}

export async function startReconcileLoop(options: ReconcileLoopOptions): Promise<ReconcileLoop> {
  const { source } = options;
  // The two refer to each other; neither calls the other before both exist.
  const controller: Controller = new Controller({
    name: 'hookgate',
    ...options.controller,
    reconcile: (key) => reconciler.reconcile(parseRefKey(key)),
  });
  const reconciler: Reconciler = new Reconciler({
    source,
    routes: options.routes,
    workflows: options.workflows,
    baseUrl: options.baseUrl,
    enqueue: (ref) => controller.enqueue(refKey(ref)),
    ...(options.recordEvent ? { recordEvent: options.recordEvent } : {}),
  });
  const loop = controller;
  await source.start((ref) => {
    for (const dep of reconciler.dependents(ref)) loop.enqueue(refKey(dep));
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
      await loop.stop(drainTimeoutMs);
      await source.stop();
    },
  };
}
