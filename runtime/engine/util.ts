// Small helpers shared by the engine, the http node and the callback sender.

import type { TriggerOutput } from './ports.ts';

export { parseDuration } from '../../api/v1alpha1/common.ts';

/** The error a cancelled wait rejects with. */
export class AbortedError extends Error {
  constructor(message = 'aborted') {
    super(message);
    this.name = 'AbortedError';
  }
}

/** Waits `ms`; rejects with AbortedError as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new AbortedError(abortReason(signal)));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new AbortedError(abortReason(signal)));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortReason(signal: AbortSignal | undefined): string {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'string') return reason;
  return 'aborted';
}

/**
 * Exponential backoff with jitter: attempt 1 waits between half and all of `baseMs`,
 * attempt 2 of 2×baseMs, and so on, capped at `maxMs`.
 */
export function backoffDelay(baseMs: number, attempt: number, maxMs = 30_000): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

/**
 * `text` cut to `max` characters (an ellipsis marks the cut). A copy, not a slice: V8
 * makes a slice of a long string a view that keeps the whole string alive, so a 1 KiB
 * summary in a stored log line held its 1 MiB JSON (measured: 1 MiB per execution).
 */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  return Buffer.from(`${text.slice(0, max)}…`, 'utf16le').toString('utf16le');
}

/** JSON of `value`, cut to `max` characters (an ellipsis marks the cut). */
export function summarize(value: unknown, max = 1024): string {
  let text: string;
  try {
    text = value === undefined ? 'undefined' : (JSON.stringify(value) ?? typeof value);
  } catch {
    text = `[unserialisable ${typeof value}]`;
  }
  return cut(text, max);
}

/**
 * A plain JSON copy of a value (drops functions and undefined, turns JSONata sequences
 * into arrays), so that outputs can be stored, cloned and sent.
 */
export function toJson(value: unknown): unknown {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text === undefined ? undefined : (JSON.parse(text) as unknown);
}

/**
 * `toJson(value)` and `summarize()` of that copy, from one serialisation: the JSON text
 * of the copy is the text the copy was parsed from (JSON.stringify ∘ JSON.parse is the
 * identity on JSON.stringify's output), so it need not be made twice.
 */
export function toJsonSummarized(value: unknown, max: number): { json: unknown; summary: string } {
  const text = value === undefined ? undefined : JSON.stringify(value);
  if (text === undefined) return { json: undefined, summary: 'undefined' };
  return { json: JSON.parse(text) as unknown, summary: cut(text, max) };
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && 'message' in error) {
    return String(error.message);
  }
  return String(error);
}

/**
 * The trigger output with `executionId` in its metadata: `input` itself when it names
 * that id already (the gateway's, always: it is not copied), else a copy that does.
 */
export function withExecutionId(input: TriggerOutput, id: string): TriggerOutput {
  if (input.metadata.executionId === id) return input;
  return { ...input, metadata: { ...input.metadata, executionId: id } };
}
