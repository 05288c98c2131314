// Port of client-go's util/retry: run a read-modify-write function again when it
// fails with a conflict (409), re-reading the object each time.
import { isConflict } from './kube-client.ts';

/** client-go wait.Backoff, restricted to what retry uses. */
export interface Backoff {
  /** Number of attempts. */
  steps: number;
  /** Initial sleep between attempts, in milliseconds. */
  durationMs: number;
  /** Each sleep is the previous one multiplied by this. */
  factor: number;
  /** Each sleep is lengthened by up to this fraction, at random. */
  jitter: number;
  /** Upper bound for a sleep. */
  capMs?: number;
}

/** client-go retry.DefaultRetry: 5 steps, 10 ms, factor 1, jitter 0.1. */
export const DEFAULT_RETRY: Readonly<Backoff> = {
  steps: 5,
  durationMs: 10,
  factor: 1,
  jitter: 0.1,
};

/** client-go retry.DefaultBackoff, for writes that may conflict a lot. */
export const DEFAULT_BACKOFF: Readonly<Backoff> = {
  steps: 4,
  durationMs: 10,
  factor: 5,
  jitter: 0.1,
};

export interface RetryDeps {
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

const defaultSleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Call `fn` until it succeeds, fails with an error `retriable` rejects, or the
 * backoff runs out of steps (then the last retriable error is thrown).
 * `fn` receives the 0-based attempt number.
 */
export async function retryOnError<T>(
  backoff: Backoff,
  retriable: (err: unknown) => boolean,
  fn: (attempt: number) => Promise<T>,
  deps: RetryDeps = {},
): Promise<T> {
  const sleep = deps.sleep ?? defaultSleep;
  const random = deps.random ?? Math.random;
  let duration = backoff.durationMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (!retriable(err) || attempt >= backoff.steps - 1) throw err;
    }
    let wait = duration;
    if (backoff.jitter > 0) wait += random() * backoff.jitter * duration;
    if (backoff.capMs !== undefined) wait = Math.min(wait, backoff.capMs);
    duration *= backoff.factor;
    if (backoff.capMs !== undefined) duration = Math.min(duration, backoff.capMs);
    await sleep(wait);
  }
}

/** client-go retry.RetryOnConflict. */
export function retryOnConflict<T>(
  backoff: Backoff,
  fn: (attempt: number) => Promise<T>,
  deps: RetryDeps = {},
): Promise<T> {
  return retryOnError(backoff, isConflict, fn, deps);
}
