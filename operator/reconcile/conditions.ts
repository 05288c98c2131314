// Condition bookkeeping per Kubernetes API conventions: keyed by type, carrying
// observedGeneration; lastTransitionTime moves only when the status flips.
import { Reason, type Condition } from '../../api/v1alpha1/index.ts';

export interface ConditionInput {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** A condition that holds. */
export const ok = (type: string, reason: string, message: string): ConditionInput => ({
  type,
  status: 'True',
  reason,
  message,
});

/** A condition that does not hold, with the reason why. */
export const notOk = (type: string, reason: string, message: string): ConditionInput => ({
  type,
  status: 'False',
  reason,
  message,
});

/** Merge `next` conditions into `previous`, keeping order stable and transition times honest. */
export function mergeConditions(
  previous: Condition[] | undefined,
  next: ConditionInput[],
  generation: number,
  now: Date,
): Condition[] {
  const byType = new Map((previous ?? []).map((c) => [c.type, c]));
  return next.map((c) => {
    const old = byType.get(c.type);
    const lastTransitionTime =
      old && old.status === c.status
        ? old.lastTransitionTime
        : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
    return { ...c, lastTransitionTime, observedGeneration: generation };
  });
}

export function findCondition(
  conditions: Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** The Ready summary: True when every input is True, else the first one that is not. */
export function summarize(
  readyType: string,
  parts: ConditionInput[],
  readyMessage: string,
): ConditionInput {
  const failing = parts.find((p) => p.status !== 'True');
  if (!failing)
    return { type: readyType, status: 'True', reason: 'Succeeded', message: readyMessage };
  return {
    type: readyType,
    status: failing.status,
    reason: failing.reason,
    message: failing.message,
  };
}

/**
 * A condition that could not be computed because the shared store failed: False with
 * reason StoreError and the error's message (credentials in URLs masked, length bounded).
 */
export function storeError(type: string, what: string, err: unknown): ConditionInput {
  return notOk(type, Reason.StoreError, `${what}: ${storeErrorMessage(err)}`);
}

/** The message of a store error, safe to show in status: no URL credentials, at most 512 characters. */
export function storeErrorMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const masked = message.replace(/(\/\/)[^/@\s]*@/g, '$1***@');
  return masked.length > 512 ? `${masked.slice(0, 511)}…` : masked;
}
