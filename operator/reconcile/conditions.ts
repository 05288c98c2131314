// Condition bookkeeping per Kubernetes API conventions: keyed by type, carrying
// observedGeneration; lastTransitionTime moves only when the status flips.
import { CONDITION_MESSAGE_MAX_LENGTH, Reason, type Condition } from '../../api/v1alpha1/index.ts';

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
    const message = boundedMessage(c.message);
    return { ...c, message, lastTransitionTime, observedGeneration: generation };
  });
}

/**
 * `message` cut to what the API server accepts in a condition (maxLength counts
 * characters; a JS string's length is at least that): a longer one fails the whole
 * status write with a 422, and the status would freeze at its last good state.
 */
export function boundedMessage(message: string, max = CONDITION_MESSAGE_MAX_LENGTH): string {
  if (message.length <= max) return message;
  let cut = message.slice(0, max - 1);
  // Not half of a surrogate pair.
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/**
 * Problems as one message: the first `max` of them, then how many more (a spec with
 * hundreds of mistakes reads better as its first ones; the rest show once they are
 * fixed).
 */
export function problemsMessage(problems: string[], max = 20): string {
  const shown = problems.slice(0, max).join('; ');
  const more = problems.length - max;
  return more > 0 ? `${shown}; and ${more} more` : shown;
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
