// The index of which WebhookTrigger claims which URL. A claim is the trigger's path
// shape (parameter names do not matter: `orders/:id` and `orders/:orderId` collide)
// with its creation order. The oldest active claim keeps a URL; a newer one gets
// PathConflict until the holder goes. The index also finds the rivals of a changed or
// deleted trigger (to revisit them) without scanning every trigger.
import { pathShape, routePath, workflowIdentifier } from '../../api/identity.ts';
import type { AnyResource, ObjectRef, ResourceSource } from '../sources/ports.ts';
import { keyOf, workflowOf, type Trigger } from './resources.ts';

interface Claim {
  shape: string;
  /** Creation time, then namespace/name: the older claim sorts first. */
  order: string;
  /** Only a deployed trigger that is not being deleted keeps others off its URL. */
  active: boolean;
}

export class PathClaims {
  readonly #source: Pick<ResourceSource, 'get'>;
  /** By trigger key (`<namespace>/<name>`). */
  readonly #claims = new Map<string, Claim>();
  /** Trigger keys by shape. */
  readonly #byShape = new Map<string, Set<string>>();

  /** `source` gives each trigger's Workflow, whose identifier is part of the URL. */
  constructor(source: Pick<ResourceSource, 'get'>) {
    this.#source = source;
  }

  /** The shape the trigger with this key claims, if it claims one. */
  shapeOf(key: string): string | undefined {
    return this.#claims.get(key)?.shape;
  }

  /**
   * Refresh one trigger's claim from its current spec (no claim while its Workflow is
   * missing); add its old and new shapes to `shapes`.
   */
  update(t: Trigger, shapes: Set<string> = new Set()): void {
    const key = keyOf(t);
    const old = this.#claims.get(key);
    if (old) shapes.add(old.shape);
    this.release(key);
    const shape = this.#wantedShape(t);
    if (shape === undefined) return;
    shapes.add(shape);
    this.#claims.set(key, {
      shape,
      order: claimOrder(t),
      active: !t.metadata.deletionTimestamp && t.spec.deploy,
    });
    let keys = this.#byShape.get(shape);
    if (!keys) this.#byShape.set(shape, (keys = new Set()));
    keys.add(key);
  }

  /** Forget the claim of the trigger with this key (deleted, or its route removed). */
  release(key: string): void {
    const old = this.#claims.get(key);
    if (!old) return;
    this.#claims.delete(key);
    const keys = this.#byShape.get(old.shape);
    keys?.delete(key);
    if (keys?.size === 0) this.#byShape.delete(old.shape);
  }

  /** Triggers claiming any of `shapes`, except those in `skip` (which grows with each one). */
  claimants(shapes: Iterable<string>, skip: Set<string>): ObjectRef[] {
    const refs: ObjectRef[] = [];
    for (const shape of shapes) {
      for (const key of this.#byShape.get(shape) ?? []) {
        if (skip.has(key)) continue;
        skip.add(key);
        const [namespace = 'default', name = ''] = key.split('/');
        refs.push({ kind: 'WebhookTrigger', namespace, name });
      }
    }
    return refs;
  }

  /**
   * The key of the oldest active trigger, older than `t`, that claims the URL `t`
   * wants under `workflowId`; undefined when `t` may have it.
   */
  olderRival(t: Trigger, workflowId: string): string | undefined {
    const mine = pathShape(routePath(workflowId, t.spec.pathSegment));
    const myKey = keyOf(t);
    const myOrder = claimOrder(t);
    let best: { order: string; key: string } | undefined;
    for (const key of this.#byShape.get(mine) ?? []) {
      const claim = this.#claims.get(key);
      if (key === myKey || !claim?.active) continue;
      if (claim.order < myOrder && (!best || claim.order < best.order))
        best = { order: claim.order, key };
    }
    return best?.key;
  }

  #wantedShape(t: Trigger): string | undefined {
    const ns = t.metadata.namespace ?? 'default';
    const wf = workflowOf(this.#source, ns, t);
    if (!wf) return undefined;
    return pathShape(
      routePath(workflowIdentifier(ns, wf.spec.environment, wf.metadata.name), t.spec.pathSegment),
    );
  }
}

/** Creation time, then namespace/name: the order in which rival claims are honoured. */
function claimOrder(t: AnyResource): string {
  return `${t.metadata.creationTimestamp ?? ''}|${t.metadata.namespace ?? ''}/${t.metadata.name}`;
}
