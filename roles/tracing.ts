// Distributed tracing for a role: the OpenTelemetry adapter, imported only when the
// settings turn tracing on (a process whose OTEL_TRACES_EXPORTER lists neither otlp nor
// console loads no @opentelemetry SDK module), and its shutdown after the role's own close.
import type { Logger } from 'pino';
import type { LoggedSpan, Tracing } from '../runtime/tracing/tracing.ts';
import type { Closable } from './lifecycle.ts';
import type { Settings } from './settings.ts';
import { TRACING_SHUTDOWN_DEADLINE_MS } from './tracing-settings.ts';

/** The message of a span's log line (OTEL_TRACES_EXPORTER=console). */
const SPAN_LOG_MESSAGE = 'tracing: span';

/** The role's tracing, or undefined when it is off. */
export async function startTracing(
  config: Settings['tracing'],
  logger: Logger,
): Promise<Tracing | undefined> {
  if (config === undefined) return undefined;
  const { createOtelTracing } = await import('../runtime/tracing/otel.ts');
  const tracing = await createOtelTracing({
    ...config,
    onExportError: (err) =>
      logger.warn({ err, endpoint: config.endpoint }, 'tracing: exporting spans failed'),
    ...(config.console ? { logSpan: spanLog(logger) } : {}),
  });
  const to = [
    config.endpoint === undefined ? undefined : `${config.endpoint} (${config.protocol})`,
    config.console ? 'the log' : undefined,
  ].filter(Boolean);
  logger.info(
    `tracing: spans to ${to.join(' and ')} as ${config.serviceName} (sampler ${config.sampler})`,
  );
  return tracing;
}

/**
 * Spans as log lines: through the role's logger, so its destination (bounded, the lines
 * whole, never interleaved) writes them with the others. At `info` whatever LOG_LEVEL
 * says: OTEL_TRACES_EXPORTER=console asked for them, and is the switch.
 */
function spanLog(logger: Logger): (span: LoggedSpan) => void {
  const spans = logger.child({}, { level: 'info' });
  return (span) => spans.info({ span }, SPAN_LOG_MESSAGE);
}

/** The role's close, then what tracing buffered, exported within the deadline. */
export function closingTracing(role: Closable, tracing: Tracing | undefined): Closable {
  if (tracing === undefined) return role;
  return {
    async close() {
      try {
        await role.close();
      } finally {
        await tracing.shutdown(TRACING_SHUTDOWN_DEADLINE_MS);
      }
    },
  };
}
