// The reconcile core, shared by the embedded server and the operator.
//
// Level-based and idempotent: `reconcile(ref)` reads the current state of the world
// (resource cache, route store, registry), makes the stores match the spec, and
// writes status once, only when it changed. It never looks at what event led here.
//
// This file dispatches by kind to one narrow controller per concern (triggers.ts,
// workflows.ts; path-claims.ts holds which trigger claims which URL, status.ts the
// status writes) and maps a change to the objects to revisit (`dependents`, and
// `servedChanged` for a change of what the gateways serve).
import type { GatewayChange, GatewayStore } from '../../api/records/gateways.ts';
import type { RouteStore, WorkflowRegistry } from '../../api/records/records.ts';
import type { AnyResource, ObjectRef, ResourceSource } from '../sources/ports.ts';
import { referencedSecrets } from './credentials.ts';
import { PathClaims } from './path-claims.ts';
import { keyOf, triggerRef, triggersOf, type Trigger } from './resources.ts';
import type { RecheckOptions } from './served.ts';
import { StatusWriter, type RecordEvent } from './status.ts';
import { TriggerReconciler } from './triggers.ts';
import { WorkflowReconciler } from './workflows.ts';

export interface ReconcilerOptions {
  source: ResourceSource;
  routes: RouteStore;
  workflows: WorkflowRegistry;
  /** What the live gateways serve: a route is Deployed once all of them serve it. */
  gateways: Pick<GatewayStore, 'served'>;
  /** Public base URL of the gateway, e.g. https://hooks.example.com */
  baseUrl: string;
  /**
   * How soon a route not yet served everywhere is looked at again: a first delay that
   * doubles, per trigger, while nothing changes (recheck.ts).
   */
  recheck?: RecheckOptions;
  now?: () => Date;
  /**
   * Ask for an object to be reconciled later. Called when a workflow's registration
   * changes, so its triggers see it (the registry is not a watched resource).
   */
  enqueue?: (ref: ObjectRef) => void;
  /** Kubernetes Events: told when an object's Ready condition changes, and on cleanup. */
  recordEvent?: RecordEvent;
}

export interface ReconcileResult {
  requeueAfterMs?: number;
}

export class Reconciler {
  readonly #source: ResourceSource;
  readonly #claims: PathClaims;
  readonly #triggers: TriggerReconciler;
  readonly #workflows: WorkflowReconciler;
  /** Whether every cached trigger's path claim has been indexed (see reconcile()). */
  #claimsIndexed = false;

  constructor(options: ReconcilerOptions) {
    const o: Required<ReconcilerOptions> = {
      recheck: {},
      now: () => new Date(),
      enqueue: () => {},
      recordEvent: () => {},
      ...options,
    };
    this.#source = o.source;
    this.#claims = new PathClaims(o.source);
    const status = new StatusWriter({ source: o.source, now: o.now, recordEvent: o.recordEvent });
    this.#workflows = new WorkflowReconciler({
      source: o.source,
      workflows: o.workflows,
      status,
      now: o.now,
      enqueue: o.enqueue,
      recordEvent: o.recordEvent,
    });
    this.#triggers = new TriggerReconciler({
      source: o.source,
      routes: o.routes,
      workflows: o.workflows,
      gateways: o.gateways,
      baseUrl: o.baseUrl,
      recheck: o.recheck,
      claims: this.#claims,
      status,
      now: o.now,
      recordEvent: o.recordEvent,
    });
  }

  async reconcile(ref: ObjectRef): Promise<ReconcileResult | void> {
    // The path index must know every trigger before any trigger is judged against it.
    // dependents() does not fill it for objects that are already settled (ADR 0008),
    // which after a restart or a leader change is every object listed: without this, a
    // trigger that lost its URL and is reconciled before the holder would take it (ADR
    // 0006). The first reconcile runs after the source synced (O8); later changes keep
    // the index current through dependents(). Synchronous: no other reconcile interleaves.
    if (!this.#claimsIndexed) {
      this.#claimsIndexed = true;
      for (const t of this.#source.list('WebhookTrigger')) this.#claims.update(t as Trigger);
    }
    if (ref.kind === 'Workflow') return this.#workflows.reconcile(ref);
    if (ref.kind === 'WebhookTrigger') return this.#triggers.reconcile(ref);
    // Secrets are never reconciled themselves; their dependents are (see dependents()).
  }

  /**
   * Objects to reconcile when what the gateways serve changed: the triggers of the
   * routes named; every trigger when the set of gateways changed; everything after the
   * feed reconnected (the store may have restarted empty and need rewriting).
   */
  servedChanged(change: GatewayChange): ObjectRef[] {
    const source = this.#source;
    // Something changed for them: triggers waiting for the gateways look again soon
    // after this look, not after the delay their unchanged wait had grown to.
    this.#triggers.servedChanged(change.kind === 'routes' ? change.keys : undefined);
    if (change.kind === 'routes') {
      return change.keys
        .map((key): ObjectRef => {
          const slash = key.indexOf('/');
          return {
            kind: 'WebhookTrigger',
            namespace: key.slice(0, slash),
            name: key.slice(slash + 1),
          };
        })
        .filter((ref) => source.get(ref) !== undefined);
    }
    const triggers = source.list('WebhookTrigger').map(triggerRef);
    if (change.kind === 'gateways') return triggers;
    const workflows = source.list('Workflow').map((w): ObjectRef => ({
      kind: 'Workflow',
      namespace: w.metadata.namespace ?? 'default',
      name: w.metadata.name,
    }));
    return [...workflows, ...triggers];
  }

  /** Objects to reconcile when `changed` was added, modified or removed. */
  dependents(changed: ObjectRef): ObjectRef[] {
    const source = this.#source;
    const claims = this.#claims;
    const current = source.get(changed);
    // Our own status or finalizer write: nothing that others depend on has changed.
    if (current && isSettled(current)) return [];
    if (changed.kind === 'Secret') {
      return (source.list('WebhookTrigger') as Trigger[])
        .filter(
          (t) =>
            t.metadata.namespace === changed.namespace &&
            referencedSecrets(t.spec).includes(changed.name),
        )
        .map(triggerRef);
    }
    if (changed.kind === 'Workflow') {
      // Its triggers, and the triggers that want (or wanted) the URLs they move to or from.
      const shapes = new Set<string>();
      const triggers = triggersOf(source, changed);
      for (const t of triggers) claims.update(t, shapes);
      return [
        changed,
        ...triggers.map(triggerRef),
        ...claims.claimants(shapes, new Set(triggers.map(keyOf))),
      ];
    }
    // A trigger: itself, plus every trigger that wants (or wanted) the same URL.
    const key = `${changed.namespace}/${changed.name}`;
    const shapes = new Set<string>();
    const previous = claims.shapeOf(key);
    if (previous !== undefined) shapes.add(previous);
    if (current) claims.update(current as Trigger, shapes);
    else claims.release(key);
    return [changed, ...claims.claimants(shapes, new Set([key]))];
  }
}

/**
 * Whether the last change can only have been to status or metadata we manage: the
 * spec is the one the status was computed from, and the object is not being deleted.
 */
function isSettled(obj: AnyResource): boolean {
  if (obj.kind === 'Secret' || obj.metadata.deletionTimestamp) return false;
  const status = obj.status as { observedGeneration?: number } | undefined;
  return (
    status?.observedGeneration !== undefined &&
    status.observedGeneration === (obj.metadata.generation ?? 1)
  );
}
