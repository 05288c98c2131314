// How every role's log lines wait for stdout (chart config.logOutput; roles/log-settings.ts,
// docs/availability.md "Log lines at shutdown"). Checked as the roles check them, so a bad
// value fails at `pulumi preview` instead of in a crash-looping pod.
import { parseBytes } from '../runtime/bounded.ts';
import { LOG_OUTPUT_BOUNDS } from '../roles/log-settings.ts';

/** The chart's defaults (values.yaml config.logOutput), the log destination's own. */
export const DEFAULT_LOG_OUTPUT = {
  /** HOOKGATE_LOG_BUFFER_BYTES: what waits in memory while stdout takes nothing. */
  bufferBytes: '4Mi',
  /** HOOKGATE_LOG_STALL_MS: how long the exit waits on a stdout that takes nothing. */
  stallMs: 5_000,
  /** HOOKGATE_LOG_SYNC_FLUSH_MS: how long a forced exit blocks while it writes what is left. */
  syncFlushMs: 1_000,
} as const;

export interface LogOutputArgs {
  /** Bytes, or a size with a unit (`512Ki`, `16Mi`; k, M, G count in 1024s). */
  bufferBytes: string | number;
  stallMs: number;
  syncFlushMs: number;
}

/** The bounds the roles accept: theirs (roles/log-settings.ts). */
export { LOG_OUTPUT_BOUNDS };

export function validateLogOutput(logOutput: LogOutputArgs): string[] {
  const errors: string[] = [];
  const { bufferBytes } = logOutput;
  const bytes = typeof bufferBytes === 'number' ? bufferBytes : parseBytes(bufferBytes);
  const size = LOG_OUTPUT_BOUNDS.bufferBytes;
  if (bytes === undefined || !Number.isSafeInteger(bytes) || bytes < size.min || bytes > size.max)
    errors.push(
      `logOutput.bufferBytes must be a size from 64Ki to 64Mi (e.g. 4Mi), got ${JSON.stringify(bufferBytes)}`,
    );
  for (const key of ['stallMs', 'syncFlushMs'] as const) {
    const n = logOutput[key];
    const { min, max } = LOG_OUTPUT_BOUNDS[key];
    if (!Number.isInteger(n) || n < min || n > max)
      errors.push(
        `logOutput.${key} must be a whole number from ${min} to ${max}, got ${String(n)}`,
      );
  }
  return errors;
}
