// An execution's record as its Redis hash holds it (docs/redis-layout.md): field `r`
// is the record without its input, which is field `i`, and without the summary of that
// input in the log line of the node that got it (made again on read). Written by the
// executions store, the gateway's enqueue (queued-engine.ts) and the retry queue; read
// back by the store and by an enqueue that finds its idempotent execution there.
import type { Execution, NodeRun } from './ports.ts';
import { inputSummaryOnDemand } from './run-log.ts';
import { summarize } from './util.ts';

/**
 * A log line as `r` holds it: one whose input is the execution's input keeps no
 * summary of it, but the length the summary was cut to (made again on read).
 */
type StoredRun = NodeRun & { inputSummaryOfInput?: number };

/**
 * A record read from the hash (`r`) with its input put back (`i`; a record from before
 * the input was apart has it inside, and no `i`), and the input summaries `r` leaves
 * out made again from it.
 */
export function withStoredInput(execution: Execution, input: string | null): Execution {
  if (input) execution.input = JSON.parse(input) as Execution['input'];
  for (const run of execution.log as StoredRun[]) {
    const max = run.inputSummaryOfInput;
    if (max === undefined) continue;
    delete run.inputSummaryOfInput;
    run.inputSummary = summarize(execution.input, max);
  }
  return execution;
}

/**
 * A record as the hash's `r` holds it: everything but the input (field `i`), and no
 * summary of the input in the log line of the node that got it (run-log.ts makes that
 * one on demand): about a kilobyte less to write, send and keep per execution. Only for
 * a record whose input `i` holds as it is (not cut: a cut record's lines are plain).
 */
export function recordJson(execution: Execution): string {
  const { input: _input, ...rest } = execution;
  // Copied only when a line changes (one on-demand line at most, in practice).
  let log: NodeRun[] | undefined;
  rest.log.forEach((run, at) => {
    const max = inputSummaryOnDemand(run);
    if (max !== undefined) (log ??= [...rest.log])[at] = withoutSummary(run, max);
  });
  if (log) rest.log = log;
  return JSON.stringify(rest);
}

/** `run` as `r` holds it: no summary, the length it was cut to instead. */
function withoutSummary(run: NodeRun, max: number): StoredRun {
  // Copied field by field: a spread would call the summary's getter, the work saved.
  const stored: Record<string, unknown> = {};
  for (const key of Object.keys(run)) {
    if (key !== 'inputSummary') stored[key] = run[key as keyof NodeRun];
  }
  stored.inputSummaryOfInput = max;
  // Every field of `run` but the summary, which the type has as optional.
  return stored as unknown as StoredRun;
}
