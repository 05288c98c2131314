// Durations on the command line: `30s`, `2m`, `1h`, `500ms` as in the resources (and
// kubectl's --request-timeout), or a bare number of seconds (`10`, `2.5`), as
// `events --timeout` always took.
import { parseDuration } from '../api/v1alpha1/common.ts';
import { usageError } from './errors.ts';

/**
 * The longest wait a timer takes (2^31 - 1 ms, about 596 h): Node fires a longer one
 * after 1 ms, so `--request-timeout 1000h` timed every call out at once.
 */
export const MAX_DURATION_MS = 2 ** 31 - 1;

/** Milliseconds of `value`; `flag` names it in the usage error of a value that is none. */
export function durationMs(value: string, flag: string): number {
  const text = value.trim();
  let ms: number;
  if (/^[0-9]+(\.[0-9]+)?$/.test(text)) ms = Math.round(Number(text) * 1000);
  else {
    try {
      ms = parseDuration(text);
    } catch {
      throw usageError(
        `${flag} must be a duration such as 30s, 2m or 1h, or seconds; not "${value}"`,
      );
    }
  }
  if (ms > MAX_DURATION_MS)
    throw usageError(`${flag} is at most 596h (the longest wait a timer takes); not "${value}"`);
  return ms;
}

/** `ms` as the shortest of `500ms`, `30s`, `2m`, `1h` that says it exactly. */
export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
