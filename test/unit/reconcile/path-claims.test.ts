// The path-claim index on its own: who holds a URL, who waits for it, and which
// triggers to revisit when one changes.
import { beforeEach, describe, expect, it } from 'vitest';
import { PathClaims } from '../../../operator/reconcile/path-claims.ts';
import type { Trigger, WorkflowResource } from '../../../operator/reconcile/resources.ts';
import type { AnyResource, ObjectRef } from '../../../operator/sources/ports.ts';

const WORKFLOW_ID = 'default_production_orders';
const orders = {
  apiVersion: 'hookgate.dev/v1alpha1',
  kind: 'Workflow',
  metadata: { name: 'orders', namespace: 'default' },
  spec: { application: 'shop', environment: 'production', publish: true, nodes: [] },
} as unknown as WorkflowResource;

/** A source holding one Workflow, `orders`, and nothing else. */
const source = {
  get: (ref: ObjectRef): AnyResource | undefined =>
    ref.kind === 'Workflow' && ref.namespace === 'default' && ref.name === 'orders'
      ? orders
      : undefined,
};

function trigger(
  name: string,
  pathSegment: string,
  createdAt: string,
  options: { deploy?: boolean; deleting?: boolean; workflow?: string } = {},
): Trigger {
  return {
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'WebhookTrigger',
    metadata: {
      name,
      namespace: 'default',
      creationTimestamp: `2026-11-23T10:${createdAt}:00Z`,
      ...(options.deleting ? { deletionTimestamp: '2026-11-23T11:00:00Z' } : {}),
    },
    spec: {
      workflowRef: { name: options.workflow ?? 'orders' },
      pathSegment,
      deploy: options.deploy ?? true,
    },
  } as unknown as Trigger;
}

const T = (name: string): ObjectRef => ({ kind: 'WebhookTrigger', namespace: 'default', name });
const shape = (pathSegment: string) =>
  `/webhook/${WORKFLOW_ID}/${pathSegment.replace(/:[^/]+/g, ':')}`;

let claims: PathClaims;
beforeEach(() => {
  claims = new PathClaims(source);
});

describe('PathClaims', () => {
  it('the oldest claim wins, whatever order the triggers are seen in', () => {
    const a = trigger('a', 'orders', '00');
    const b = trigger('b', 'orders', '05');
    const c = trigger('c', 'orders', '10');
    for (const t of [c, a, b]) claims.update(t);
    expect(claims.olderRival(a, WORKFLOW_ID)).toBeUndefined();
    expect(claims.olderRival(b, WORKFLOW_ID)).toBe('default/a');
    expect(claims.olderRival(c, WORKFLOW_ID)).toBe('default/a');
  });

  it('same creation time: namespace/name decides', () => {
    const a = trigger('a', 'orders', '00');
    const b = trigger('b', 'orders', '00');
    claims.update(b);
    claims.update(a);
    expect(claims.olderRival(a, WORKFLOW_ID)).toBeUndefined();
    expect(claims.olderRival(b, WORKFLOW_ID)).toBe('default/a');
  });

  it('parameter names do not matter: orders/:id and orders/:orderId collide', () => {
    const first = trigger('first', 'orders/:id', '00');
    const second = trigger('second', 'orders/:orderId', '05');
    claims.update(first);
    claims.update(second);
    expect(claims.shapeOf('default/first')).toBe(shape('orders/:id'));
    expect(claims.shapeOf('default/second')).toBe(claims.shapeOf('default/first'));
    expect(claims.olderRival(second, WORKFLOW_ID)).toBe('default/first');
  });

  it('different literal segments do not collide', () => {
    const first = trigger('first', 'orders/:id', '00');
    const second = trigger('second', 'orders/all', '05');
    claims.update(first);
    claims.update(second);
    expect(claims.olderRival(second, WORKFLOW_ID)).toBeUndefined();
  });

  it('releasing the holder hands the URL to the next oldest, and names who to revisit', () => {
    const a = trigger('a', 'orders/:id', '00');
    const b = trigger('b', 'orders/:orderId', '05');
    const c = trigger('c', 'orders/:n', '10');
    for (const t of [a, b, c]) claims.update(t);
    const held = claims.shapeOf('default/a');
    expect(held).toBeDefined();
    claims.release('default/a');
    expect(claims.shapeOf('default/a')).toBeUndefined();
    expect(claims.olderRival(b, WORKFLOW_ID)).toBeUndefined();
    expect(claims.olderRival(c, WORKFLOW_ID)).toBe('default/b');
    // The rivals of the released trigger: the ones to reconcile so one takes over.
    expect(claims.claimants([held ?? ''], new Set(['default/a']))).toEqual([T('b'), T('c')]);
  });

  it('a trigger that is not deployed, or is being deleted, holds nothing', () => {
    const a = trigger('a', 'orders', '00', { deploy: false });
    const b = trigger('b', 'orders', '05', { deleting: true });
    const c = trigger('c', 'orders', '10');
    for (const t of [a, b, c]) claims.update(t);
    expect(claims.olderRival(c, WORKFLOW_ID)).toBeUndefined();
    // Still indexed: they are revisited when the URL changes hands.
    expect(claims.claimants([shape('orders')], new Set())).toEqual([T('a'), T('b'), T('c')]);
  });

  it('moving to another path reports the old and the new shape, and frees the old URL', () => {
    const a = trigger('a', 'x', '00');
    const b = trigger('b', 'x', '05');
    claims.update(a);
    claims.update(b);
    const shapes = new Set<string>();
    claims.update(trigger('a', 'y', '00'), shapes);
    expect([...shapes]).toEqual([shape('x'), shape('y')]);
    expect(claims.olderRival(b, WORKFLOW_ID)).toBeUndefined();
    expect(claims.claimants(shapes, new Set(['default/a']))).toEqual([T('b')]);
  });

  it('no claim while the workflow is missing', () => {
    const ghost = trigger('ghost', 'orders', '00', { workflow: 'ghost' });
    const shapes = new Set<string>();
    claims.update(ghost, shapes);
    expect(claims.shapeOf('default/ghost')).toBeUndefined();
    expect(shapes.size).toBe(0);
  });

  it('claimants skips the given keys and lists each trigger once', () => {
    for (const t of [trigger('a', 'x', '00'), trigger('b', 'x', '05'), trigger('c', 'y', '10')])
      claims.update(t);
    const skip = new Set(['default/a']);
    expect(claims.claimants([shape('x'), shape('y'), shape('x')], skip)).toEqual([T('b'), T('c')]);
    expect(skip).toEqual(new Set(['default/a', 'default/b', 'default/c']));
  });
});
