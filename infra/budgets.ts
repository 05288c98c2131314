// The byte budgets and record lifetime of what the roles keep, and the caps on open
// event streams (docs/limits.md; chart config.budgets). Every key is optional: unset, the
// product's default applies and the chart renders no variable for it. Checked as the roles check them (roles/budget-settings.ts),
// so a bad value fails at `pulumi preview` instead of in a crash-looping pod.
import { parseBytes } from '../runtime/bounded.ts';

/** The sizes: bytes, or with a unit (`64Ki`, `512Mi`, `1Gi`; k, M, G count in 1024s). */
export const BUDGET_SIZE_KEYS = [
  'executionStoreBytes',
  'storedBodyBytes',
  'idempotencyBytes',
  'streamBufferBytes',
  'listPageBytes',
  'analyticsBytes',
] as const;
export type BudgetSizeKey = (typeof BUDGET_SIZE_KEYS)[number];

/** The caps on open event streams: whole numbers from 1 to MAX_STREAMS. */
export const BUDGET_COUNT_KEYS = ['streamsPerExecution', 'streamsPerProcess'] as const;
export type BudgetCountKey = (typeof BUDGET_COUNT_KEYS)[number];

export type BudgetArgs = Partial<Record<BudgetSizeKey, string | number>> &
  Partial<Record<BudgetCountKey, number>> & {
    /** HOOKGATE_EXECUTION_TTL_MS: lifetime of an execution record, at least 1000 ms. */
    executionTtlMs?: number;
  };

/** The smallest size the roles accept (roles/budget-settings.ts). */
export const MIN_BUDGET_BYTES = 1024;
/** The shortest record lifetime the roles accept (roles/budget-settings.ts). */
export const MIN_EXECUTION_TTL_MS = 1000;
/** The largest stream cap the roles accept (roles/budget-settings.ts). */
export const MAX_STREAMS = 1_000_000;

export function validateBudgets(budgets: BudgetArgs): string[] {
  const errors: string[] = [];
  for (const key of BUDGET_SIZE_KEYS) {
    const value = budgets[key];
    if (value === undefined) continue;
    const bytes = typeof value === 'number' ? value : parseBytes(value);
    if (bytes === undefined || !Number.isSafeInteger(bytes) || bytes < MIN_BUDGET_BYTES) {
      errors.push(
        `budgets.${key} must be a size of at least 1Ki (e.g. 64Ki, 256Mi), got ${JSON.stringify(value)}`,
      );
    }
  }
  for (const key of BUDGET_COUNT_KEYS) {
    const value = budgets[key];
    if (value !== undefined && !(Number.isInteger(value) && value >= 1 && value <= MAX_STREAMS))
      errors.push(
        `budgets.${key} must be a whole number from 1 to ${MAX_STREAMS}, got ${String(value)}`,
      );
  }
  const ttl = budgets.executionTtlMs;
  if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < MIN_EXECUTION_TTL_MS)) {
    errors.push(
      `budgets.executionTtlMs must be a whole number >= ${MIN_EXECUTION_TTL_MS}, got ${String(ttl)}`,
    );
  }
  return errors;
}

/** The chart's config.budgets: the keys that are set, as given (helm renders them as is). */
export function budgetValues(budgets: BudgetArgs): BudgetArgs {
  return Object.fromEntries(Object.entries(budgets).filter(([, value]) => value !== undefined));
}
