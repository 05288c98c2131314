// The status written when an object's cleanup fails (operator/reconcile/store-errors.ts):
// Ready becomes False/StoreError for the generation the deletion made; the other
// conditions stay as they were, with the generation they were computed for (copying
// them stamped the new generation on conditions nobody had computed for it).
import { describe, expect, it } from 'vitest';
import type { Condition } from '../../../api/v1alpha1/index.ts';
import { cleanupFailed } from '../../../operator/reconcile/store-errors.ts';
import type { StatusWriter } from '../../../operator/reconcile/status.ts';
import type { AnyResource, ObjectRef } from '../../../operator/sources/ports.ts';

const at = '2026-11-27T10:00:00Z';
const condition = (type: string, status: Condition['status']): Condition => ({
  type,
  status,
  reason: status === 'True' ? 'Succeeded' : 'InvalidSpec',
  message: type,
  lastTransitionTime: at,
  observedGeneration: 3,
});

describe('cleanupFailed', () => {
  it('writes Ready=False/StoreError for the new generation and keeps the others untouched', async () => {
    const written: { conditions?: Condition[] }[] = [];
    const writer = {
      write: (_r: ObjectRef, _o: AnyResource, _p: object, next: { conditions?: Condition[] }) => {
        written.push(next);
        return Promise.resolve();
      },
    } as unknown as StatusWriter;
    const previous = [
      condition('Valid', 'True'),
      condition('Ready', 'True'),
      condition('Deployed', 'True'),
    ];
    const obj = {
      metadata: { name: 'w', namespace: 'n', generation: 4 },
      status: { observedGeneration: 3, conditions: previous },
    } as unknown as AnyResource;
    const ref = { kind: 'Workflow', namespace: 'n', name: 'w' } as ObjectRef;
    const error = new Error('connect ECONNREFUSED');
    await expect(
      cleanupFailed(writer, ref, obj, 'Cannot unregister', error, new Date('2026-11-27T11:00:00Z')),
    ).rejects.toBe(error);
    const conditions = written[0]?.conditions ?? [];
    expect(conditions.map((c) => c.type)).toEqual(['Valid', 'Ready', 'Deployed']);
    expect(conditions[0]).toEqual(previous[0]);
    expect(conditions[2]).toEqual(previous[2]);
    expect(conditions[1]).toMatchObject({
      status: 'False',
      reason: 'StoreError',
      observedGeneration: 4,
      lastTransitionTime: '2026-11-27T11:00:00Z',
    });
    expect(conditions[1]?.message).toMatch(/^Cannot unregister: connect ECONNREFUSED/);
  });
});
