// One logger set-up for every role: pino, human-readable (pino-pretty's format) when
// stdout is a terminal, one JSON object per line otherwise (what log collectors read).
// Lines go to stdout through a LogDestination (log-destination.ts): a stdout nobody
// reads neither holds the process nor fills its memory, and what is left is written at
// shutdown and at exit within a bound. pino-pretty formats in this thread, not as a
// pino transport: the transport's worker thread has its own exit flush (10 s, then
// exit code 1, with a stdout nobody reads), and a terminal needs no throughput.
// Fastify gets the same instance; the operator and worker parts that take a plain
// `(msg, fields)` function get `logFunction(logger)`. The lines and bytes stdout did
// not take are counted on the role's /metrics (`registerMetrics`).
import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import type * as PinoPretty from 'pino-pretty';
import { Counter, type Registry } from 'prom-client';
import { LOG_DROP_REASONS, LogDestination } from './log-destination.ts';
import type { LogOutputSettings } from './log-settings.ts';

/** pino-pretty, loaded only when a role prints for a terminal (20-60 ms at start). */
function prettyFormat(): (line: string) => string {
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
  return prettyFactory({ translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** How the operator's and worker's parts log: a message and structured fields. */
export type LogFunction = (msg: string, fields?: object) => void;

export interface LoggerOptions {
  level?: LogLevel;
  /** Human-readable lines; default: when stdout is a terminal. */
  pretty?: boolean;
  /** Fields on every line, e.g. the role. */
  base?: Record<string, string>;
  /** How lines wait for stdout (HOOKGATE_LOG_*; log-settings.ts); the destination's defaults. */
  output?: Partial<LogOutputSettings>;
}

/** A role's logger, and what counts the lines its stdout did not take. */
export interface RoleLogger {
  logger: Logger;
  /**
   * Registers hookgate_log_lines_dropped_total and hookgate_log_bytes_dropped_total
   * (by `reason`, 0 until something is dropped) in the role's registry.
   */
  registerMetrics: (registry: Registry) => void;
}

export function createLogger(options: LoggerOptions = {}): RoleLogger {
  // Touching process.stdout first matters: Node then opens it, and libuv puts a pipe
  // or socket into the non-blocking mode the destination relies on.
  const stdout = process.stdout;
  const pretty = options.pretty ?? stdout.isTTY === true;
  const destination = new LogDestination({
    ...options.output,
    fd: stdout.fd,
    ...(pretty ? { format: prettyFormat() } : {}),
  });
  const logger = pino({ level: options.level ?? 'info', base: options.base ?? {} }, destination);
  destination.onDropped = ({ lines, bytes }) =>
    logger.warn({ lines, bytes }, 'log lines dropped: stdout did not take them');
  // Every way out (the grace period running out, a second signal, process.exit
  // anywhere) writes what is left, for HOOKGATE_LOG_SYNC_FLUSH_MS (1 s) at most.
  process.once('exit', () => destination.flushSync());
  return { logger, registerMetrics: (registry) => registerLogMetrics(registry, destination) };
}

/** The destination's drops as counters, read when /metrics is scraped (like RedisHealth). */
export function registerLogMetrics(
  registry: Registry,
  destination: Pick<LogDestination, 'dropped'>,
): void {
  const what =
    'stdout did not take, dropped whole, by reason: buffer_full (stdout took nothing ' +
    'and the buffer was full), write_error (the write failed: nobody reads stdout any more)';
  for (const [name, field, help] of [
    ['hookgate_log_lines_dropped_total', 'lines', `Log lines ${what}`],
    ['hookgate_log_bytes_dropped_total', 'bytes', `Bytes of the log lines ${what}`],
  ] as const) {
    new Counter({
      name,
      help,
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        for (const reason of LOG_DROP_REASONS)
          this.inc({ reason }, destination.dropped[reason][field]);
      },
    });
  }
}

export function logFunction(logger: Logger): LogFunction {
  return (msg, fields) => {
    const level = (fields as { level?: unknown } | undefined)?.level;
    if (level === 'warn' || level === 'error') logger[level](fields, msg);
    else logger.info(fields ?? {}, msg);
  };
}
