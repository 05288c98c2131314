// What an executions store keeps of a record is bounded in bytes: the request body, the
// output and the respond node's body are each stored cut to `maxBodyBytes` (64 KiB by
// default), with `truncated` saying which part was cut and how large it was. The
// workflow, a waiting caller and a callback still get the whole value: only the copy a
// store keeps is cut.
//
// Sizes are measured cheaply: `jsonBytes` walks a value and adds up about what its
// JSON would take (UTF-8), stopping as soon as it passes a limit, so a 1 MiB body costs
// a walk of its first 64 KiB; the whole text is made only for a part that is cut.
import { jsonBytes } from '../bounded.ts';
import type { Execution, ExecutionEvent, NodeRun, SequencedEvent, Truncated } from './ports.ts';
import { inputSummaryOnDemand } from './run-log.ts';

export { jsonBytes } from '../bounded.ts';

/** Default largest body, output or response body a store keeps whole (64 KiB). */
export const DEFAULT_STORED_BODY_BYTES = 64 * 1024;

/** Bytes counted for a record's fixed fields (ids, status, times, keys, punctuation). */
const RECORD_OVERHEAD = 320;
/** Bytes counted for one log line's fixed fields (an unread lazy summary: its length). */
const LOG_LINE_OVERHEAD = 160;

/**
 * `text` cut to at most `max` UTF-8 bytes, on a character boundary. Always a fresh
 * string: a slice would be a V8 sliced string that keeps the whole text alive.
 */
export function utf8Prefix(text: string, max: number): string {
  const head = text.length > max ? text.slice(0, max) : text;
  const bytes = Buffer.from(head);
  const cut = bytes.length > max ? bytes.subarray(0, max).toString('utf8') : bytes.toString('utf8');
  // A character cut in half decodes as U+FFFD: drop it.
  return bytes.length > max && cut.endsWith('\uFFFD') ? cut.slice(0, -1) : cut;
}

/**
 * A part too large to keep whole: its first `max` bytes (of the string itself, or of
 * its JSON), and its whole size in bytes. Undefined when it fits.
 */
export function cutPart(value: unknown, max: number): { cut: string; size: number } | undefined {
  if (value === undefined || jsonBytes(value, max) <= max) return undefined;
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
  const size = Buffer.byteLength(text);
  if (size <= max) return undefined;
  return { cut: utf8Prefix(text, max), size };
}

/**
 * What `boundExecution` learnt of an input (an execution is saved several times with
 * one input), kept on the input object under a symbol key that is not enumerable:
 * JSON, structuredClone, spreads and equality in tests leave it out. A WeakMap set per
 * execution cost a write barrier and an ephemeron, about a sixth of a memory store's
 * save. A frozen input gets no mark and is measured again at each save.
 */
const BOUND_INPUT = Symbol('hookgate.boundInput');

interface InputBound {
  max: number;
  /** The input as kept: the marked input itself, or a copy with its body cut. */
  kept: Execution['input'];
  /** The whole body's size when it was cut. */
  cutSize: number | undefined;
  /** jsonBytes of `kept`. */
  bytes: number;
}

type MarkedInput = Execution['input'] & { [BOUND_INPUT]?: InputBound };

function mark(input: MarkedInput, bound: InputBound): void {
  if (!Object.isExtensible(input)) return;
  Object.defineProperty(input, BOUND_INPUT, { value: bound, writable: true, configurable: true });
}

function boundInput(input: Execution['input'], max: number): InputBound {
  const marked = input as MarkedInput;
  const known = marked[BOUND_INPUT];
  if (known !== undefined && known.max === max) return known;
  const cut = cutPart(input.body, max);
  const kept: MarkedInput = cut ? { ...input, body: cut.cut } : input;
  const bound: InputBound = { max, kept, cutSize: cut?.size, bytes: jsonBytes(kept) };
  mark(marked, bound);
  // The cut copy's mark names nothing but itself (it must not keep the whole body
  // alive as long as the store keeps the copy): saved again, it is kept as it is.
  if (kept !== marked) mark(kept, bound);
  return bound;
}

/**
 * The record a store keeps: `execution` itself when every part fits, else a shallow
 * copy with the large parts cut and `truncated` listing them. The log array is shared,
 * so a store keeping the copy of a running execution still sees its log grow.
 */
export function boundExecution(execution: Execution, max: number): Execution {
  let truncated: Truncated | undefined;
  const bound = boundInput(execution.input, max);
  const input = bound.kept;
  if (bound.cutSize !== undefined) truncated = { 'input.body': bound.cutSize };
  const output = cutPart(execution.output, max);
  if (output) (truncated ??= {}).output = output.size;
  const responseBody = execution.response ? cutPart(execution.response.body, max) : undefined;
  if (responseBody) (truncated ??= {})['response.body'] = responseBody.size;
  if (!truncated) return execution;
  const bounded: Execution = {
    ...execution,
    input,
    truncated: { ...execution.truncated, ...truncated },
  };
  if (output) bounded.output = output.cut;
  if (responseBody && execution.response) {
    bounded.response = { ...execution.response, body: responseBody.cut };
  }
  // A finished record's log lines with a lazy input summary (run-log.ts) would keep
  // the whole input alive through their getter: made now, as plain values.
  if (
    bound.cutSize !== undefined &&
    (execution.status === 'succeeded' || execution.status === 'failed')
  ) {
    bounded.log = execution.log.map((run) =>
      inputSummaryOnDemand(run) !== undefined ? { ...run } : run,
    );
  }
  return bounded;
}

/** The event a store keeps: `event` itself when its payload fits, else a cut copy. */
export function boundEvent<E extends SequencedEvent | ExecutionEvent>(event: E, max: number): E {
  if (event.type === 'completed') {
    const cut = cutPart(event.output, max);
    if (cut) return { ...event, output: cut.cut, truncated: { output: cut.size } };
  } else if (event.type === 'respond') {
    const cut = cutPart(event.response.body, max);
    if (cut) {
      return {
        ...event,
        response: { ...event.response, body: cut.cut },
        truncated: { 'response.body': cut.size },
      };
    }
  }
  return event;
}

/** Whether a store may have cut this event's payload (only these carry bodies). */
export function carriesBody(event: ExecutionEvent): boolean {
  return event.type === 'completed' || event.type === 'respond';
}

/**
 * About how many bytes a (bounded) record takes, without serialising it. A log line's
 * lazy input summary (see run-log.ts) is counted at its largest, not made.
 */
export function recordBytes(execution: Execution): number {
  let total =
    RECORD_OVERHEAD +
    execution.id.length +
    execution.workflowId.length +
    execution.triggerKey.length +
    (execution.triggerUid?.length ?? 0) +
    inputBytes(execution.input) +
    jsonBytes(execution.output) +
    (execution.response ? jsonBytes(execution.response) : 0) +
    (execution.error ? jsonBytes(execution.error) : 0);
  for (const run of execution.log) total += logLineBytes(run);
  return total;
}

/** jsonBytes of an input, as boundExecution measured it (with any max) when it did. */
function inputBytes(input: Execution['input']): number {
  const known = (input as MarkedInput)[BOUND_INPUT];
  return known !== undefined && known.kept === input ? known.bytes : jsonBytes(input);
}

function logLineBytes(run: NodeRun): number {
  let total = LOG_LINE_OVERHEAD + run.nodeId.length + run.type.length;
  const lazy = inputSummaryOnDemand(run);
  total += lazy !== undefined ? lazy : (run.inputSummary?.length ?? 0);
  total += (run.outputSummary?.length ?? 0) + (run.error?.length ?? 0);
  return total;
}

/** About how many bytes a (bounded) event takes. */
export function eventBytes(event: SequencedEvent): number {
  return jsonBytes(event);
}
