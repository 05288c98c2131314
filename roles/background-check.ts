// A start-up check that needs Redis, run in the background (the Redis version, how the
// queue shards fall on a cluster's masters, the replicas of HOOKGATE_QUEUE_ACK_REPLICAS).
// The roles start while Redis is unreachable (they report that on their own) and a
// gateway often starts before its Redis, so a check never gives up: while Redis does
// not answer it is asked again, less and less often, until it does. One mechanism for
// all of them, with a stop function for shutdown.

/** What a check makes of an answer: said all it had to say, or ask again later. */
export type Verdict = 'done' | 'again';

export interface BackgroundCheckOptions {
  /** Pause before asking again after an answer judged 'again' (ms); default 3 s. */
  everyMs?: number;
  /**
   * Longest pause while Redis does not answer (ms; the pause doubles from `everyMs`);
   * default 60 s.
   */
  maxBackoffMs?: number;
}

/**
 * Asks `ask` now; a rejection (Redis unreachable, no master known yet, a reply without
 * what was asked) asks again after a pause that doubles up to `maxBackoffMs`. An answer
 * goes to `judge`, which logs what there is to log and says whether to ask again
 * (after `everyMs`). Nothing is judged once stopped, not even an answer under way.
 * Returns the stop function.
 */
export function checkInBackground<T>(
  ask: () => Promise<T>,
  judge: (answer: T) => Verdict,
  options: BackgroundCheckOptions = {},
): () => void {
  const everyMs = options.everyMs ?? 3_000;
  const maxBackoffMs = options.maxBackoffMs ?? 60_000;
  let pause = everyMs;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => void attempt(), pause);
    timer.unref();
  };
  const attempt = async (): Promise<void> => {
    let answer: T;
    try {
      answer = await ask();
    } catch {
      pause = Math.min(pause * 2, maxBackoffMs);
      return schedule();
    }
    if (stopped) return;
    pause = everyMs;
    let verdict: Verdict;
    try {
      verdict = judge(answer);
    } catch {
      // A check that cannot judge (a reply of an unexpected shape) has nothing to say;
      // it must not take the process down.
      return;
    }
    if (verdict === 'again') schedule();
  };
  void attempt();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
