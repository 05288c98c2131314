// Execution-level retries (a Workflow's spec.retry): which failures retry, and how long
// to wait before the next attempt. The engine (engine.ts) asks `nextAttempt` when an
// attempt fails; docs/retries-and-replay.md describes the policy.
import {
  DEFAULT_RETRY_ON,
  RETRYABLE_FAILURES,
  type RetryableFailure,
  type RetryPolicy,
} from '../../api/v1alpha1/workflow.ts';
import { ExecutionFailure } from './execution-failure.ts';
import { HttpNetworkError, HttpNodeError } from './nodes/http.ts';
import { OutboundRefusedError } from './outbound/guard.ts';
import { OutboundTimeoutError } from './outbound/request.ts';
import type { FailureKind } from './ports.ts';
import { parseDuration } from './util.ts';

/** A retry policy with its defaults filled in; waits in milliseconds. */
export interface ResolvedRetryPolicy {
  attempts: number;
  initialMs: number;
  maxMs: number;
  multiplier: number;
  jitter: number;
  on: ReadonlySet<RetryableFailure>;
}

const resolved = new WeakMap<RetryPolicy, ResolvedRetryPolicy>();

export function resolveRetryPolicy(policy: RetryPolicy): ResolvedRetryPolicy {
  let done = resolved.get(policy);
  if (!done) {
    const backoff = policy.backoff;
    done = {
      attempts: Math.max(1, policy.attempts ?? 3),
      initialMs: parseDuration(backoff?.initial ?? '1s'),
      maxMs: parseDuration(backoff?.max ?? '5m'),
      multiplier: Math.max(1, backoff?.multiplier ?? 2),
      jitter: Math.min(1, Math.max(0, backoff?.jitter ?? 0.2)),
      on: new Set(policy.on ?? DEFAULT_RETRY_ON),
    };
    resolved.set(policy, done);
  }
  return done;
}

/**
 * The wait after attempt `failed` (1-based) before the next one: initial × multiplier^(failed − 1),
 * capped at max, then reduced by up to `jitter` of itself at random:
 * within [(1 − jitter) × wait, wait].
 */
export function retryDelay(
  policy: ResolvedRetryPolicy,
  failed: number,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, failed - 1);
  const wait = Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** exponent);
  return Math.round(wait * (1 - policy.jitter * random()));
}

export function isRetryable(kind: FailureKind): kind is RetryableFailure {
  return (RETRYABLE_FAILURES as readonly string[]).includes(kind);
}

/**
 * The wait before the next attempt, or undefined when the execution ends now: no
 * policy, the failure's class is not in `on`, or `attempt` was the last one allowed.
 */
export function nextAttempt(
  policy: RetryPolicy | undefined,
  kind: FailureKind,
  attempt: number,
  random?: () => number,
): number | undefined {
  if (!policy) return undefined;
  const p = resolveRetryPolicy(policy);
  if (attempt >= p.attempts || !isRetryable(kind) || !p.on.has(kind)) return undefined;
  return retryDelay(p, attempt, random);
}

/** The class of a node's error (thrown by the node, after its own onError policy). */
export function classifyNodeError(error: unknown): FailureKind {
  if (error instanceof ExecutionFailure) return error.kind;
  if (error instanceof OutboundTimeoutError) return 'timeout';
  if (error instanceof OutboundRefusedError) return 'refused';
  if (error instanceof HttpNodeError && error.status !== undefined) {
    if (error.status === 429) return 'http429';
    return error.status >= 500 ? 'http5xx' : 'http4xx';
  }
  if (error instanceof HttpNetworkError) return 'network';
  return 'nodeError';
}
