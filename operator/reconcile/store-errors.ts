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
  const ready = storeError('Ready', what, err);
  const inputs: ConditionInput[] = (previous.conditions ?? [])
    .filter((c) => c.type !== 'Ready')
    .map(({ type, status: s, reason, message }) => ({ type, status: s, reason, message }));
  const next = {
    ...previous,
    conditions: mergeConditions(
      previous.conditions,
      [...inputs, ready],
      obj.metadata.generation ?? 1,
      now,
    ),
  };
  await status.write(ref, obj, previous, next).catch(() => {});
  throw err;
}

/** Whether a condition failed because the store did. */
export const isStoreError = (c: ConditionInput): boolean => c.reason === Reason.StoreError;
