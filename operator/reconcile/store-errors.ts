// Status on the cleanup path: when removing an object's route or registration fails
// (the store is down), the object being deleted still says so before the error is
// returned for a retry with backoff.
import { Reason, type Condition } from '../../api/v1alpha1/index.ts';
import type { AnyResource, ObjectRef } from '../sources/ports.ts';
import { mergeConditions, storeError, type ConditionInput } from './conditions.ts';
import type { StatusWriter } from './status.ts';

/**
 * Write Ready=False/StoreError on `obj` (its other conditions kept), then throw `err`.
 * A failing status write does not hide the store error: the retry writes it again.
 */
export async function cleanupFailed(
  status: StatusWriter,
  ref: ObjectRef,
  obj: AnyResource,
  what: string,
  err: unknown,
  now: Date,
): Promise<never> {
  const previous = (obj.status ?? {}) as { conditions?: Condition[]; observedGeneration?: number };
  // Only Ready is computed now, for the generation the deletion made; the others stay
  // as they were, with the generation they were computed for (API conventions).
  const [ready] = mergeConditions(
    previous.conditions,
    [storeError('Ready', what, err)],
    obj.metadata.generation ?? 1,
    now,
  ) as [Condition];
  const kept = previous.conditions ?? [];
  const conditions = kept.some((c) => c.type === 'Ready')
    ? kept.map((c) => (c.type === 'Ready' ? ready : c))
    : [...kept, ready];
  const next = { ...previous, conditions };
  await status.write(ref, obj, previous, next).catch(() => {});
  throw err;
}

/** Whether a condition failed because the store did. */
export const isStoreError = (c: ConditionInput): boolean => c.reason === Reason.StoreError;
