// How a role's log lines wait for stdout (roles/log-destination.ts, ADR 0037): what may
// wait while stdout takes nothing, how long the exit waits on a stdout that takes
// nothing, and how long a synchronous write of what is left (a forced exit, a fatal
// line) holds the process. Checked with the other settings before anything starts; a
// bad value exits 2 with a clear message (settings.ts). The chart (config.logOutput)
// and the Pulumi program (infra/plan.ts) refuse the same values.
import { parseBytes } from '../runtime/bounded.ts';
import { LOG_BUFFER_BYTES, LOG_STALL_MS, LOG_SYNC_FLUSH_MS } from './log-destination.ts';

/**
 * The bounds. The buffer: at least one pipe's worth (64 KiB on Linux; less drops lines
 * in any burst a log copier is merely slow to read), at most 64 MiB (it is memory, held
 * while stdout is stuck: a quarter of the operator's 256 MiB limit). The stall: at
 * least two of the 50 ms retries (less gives up on a stdout that is only slow), at most
 * 20 s, inside the 25 s grace period with the role's own close. The synchronous write:
 * 0 (one try, no wait) to 4 s: the chart's terminationGracePeriodSeconds leaves 5 s
 * after the grace period by default, and keeps one of them as a margin for a forced
 * exit's late timer (it refuses a grace period shorter than this needs).
 */
export const LOG_OUTPUT_BOUNDS = {
  bufferBytes: { min: 64 * 1024, max: 64 * 1024 * 1024 },
  stallMs: { min: 100, max: 20_000 },
  syncFlushMs: { min: 0, max: 4_000 },
} as const;

export interface LogOutputSettings {
  /** HOOKGATE_LOG_BUFFER_BYTES: what waits while stdout takes nothing; beyond, dropped. */
  maxBufferedBytes: number;
  /** HOOKGATE_LOG_STALL_MS: a flush gives up on a stdout that took nothing this long. */
  stallMs: number;
  /** HOOKGATE_LOG_SYNC_FLUSH_MS: the longest a synchronous flush holds the process. */
  syncFlushMs: number;
}

export const LOG_OUTPUT_DEFAULTS: LogOutputSettings = {
  maxBufferedBytes: LOG_BUFFER_BYTES,
  stallMs: LOG_STALL_MS,
  syncFlushMs: LOG_SYNC_FLUSH_MS,
};

const { bufferBytes, stallMs, syncFlushMs } = LOG_OUTPUT_BOUNDS;

export const LOG_OUTPUT_USAGE = `  HOOKGATE_LOG_BUFFER_BYTES  every role: log lines stdout has not taken yet, kept in
                             memory (default 4Mi, 64Ki to 64Mi); lines beyond are dropped
                             whole, counted by hookgate_log_lines_dropped_total
  HOOKGATE_LOG_STALL_MS      every role: at shutdown the exit waits while stdout takes
                             the last lines, and gives up once it has taken nothing this
                             long (default 5000, ${stallMs.min} to ${stallMs.max})
  HOOKGATE_LOG_SYNC_FLUSH_MS  every role: any other exit (grace period out, second
                             signal, a fatal line) blocks while it writes what is left,
                             for this long at most (default 1000, ${syncFlushMs.min} to ${syncFlushMs.max})
`;

/** The settings from the environment (defaults for what is unset), or the problems. */
export function logOutputSettings(env: NodeJS.ProcessEnv = process.env): {
  settings: LogOutputSettings;
  problems: string[];
} {
  const settings = { ...LOG_OUTPUT_DEFAULTS };
  const problems: string[] = [];
  const size = env.HOOKGATE_LOG_BUFFER_BYTES;
  if (size !== undefined) {
    const bytes = parseBytes(size);
    if (bytes === undefined || bytes < bufferBytes.min || bytes > bufferBytes.max)
      problems.push(
        `HOOKGATE_LOG_BUFFER_BYTES must be a size from 64Ki to 64Mi (e.g. 4Mi), not "${size}"`,
      );
    else settings.maxBufferedBytes = bytes;
  }
  for (const [name, field] of [
    ['HOOKGATE_LOG_STALL_MS', 'stallMs'],
    ['HOOKGATE_LOG_SYNC_FLUSH_MS', 'syncFlushMs'],
  ] as const) {
    const raw = env[name];
    if (raw === undefined) continue;
    const { min, max } = LOG_OUTPUT_BOUNDS[field];
    if (/^\d{1,9}$/.test(raw) && Number(raw) >= min && Number(raw) <= max)
      settings[field] = Number(raw);
    else problems.push(`${name} must be an integer from ${min} to ${max}, not "${raw}"`);
  }
  return { settings, problems };
}
