// One logger set-up for every role: pino, human-readable (pino-pretty) when stdout is
// a terminal, one JSON object per line otherwise (what log collectors read).
// Fastify gets the same instance; the operator and worker parts that take a plain
// `(msg, fields)` function get `logFunction(logger)`.
import { pino, type Logger } from 'pino';

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
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const pretty = options.pretty ?? process.stdout.isTTY === true;
  return pino({
    level: options.level ?? 'info',
    base: options.base ?? {},
    ...(pretty
      ? {
          transport: {
            target: 'pino-pretty',
            options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' },
          },
        }
      : {}),
  });
}

export function logFunction(logger: Logger): LogFunction {
  return (msg, fields) => {
    const level = (fields as { level?: unknown } | undefined)?.level;
    if (level === 'warn' || level === 'error') logger[level](fields, msg);
    else logger.info(fields ?? {}, msg);
  };
}
