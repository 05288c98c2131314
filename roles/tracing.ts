// Distributed tracing for a role: the OpenTelemetry adapter, imported only when the
// settings turn tracing on (a process without OTEL_TRACES_EXPORTER=otlp loads no
// @opentelemetry module), and its shutdown after the role's own close.
import type { Logger } from 'pino';
import type { Tracing } from '../runtime/tracing/tracing.ts';
import type { Closable } from './lifecycle.ts';
import type { Settings } from './settings.ts';
import { TRACING_SHUTDOWN_DEADLINE_MS } from './tracing-settings.ts';

/** The role's tracing, or undefined when it is off. */
export async function startTracing(
  config: Settings['tracing'],
  logger: Logger,
): Promise<Tracing | undefined> {
  if (config === undefined) return undefined;
  const { createOtelTracing } = await import('../runtime/tracing/otel.ts');
  const tracing = createOtelTracing({
    ...config,
    onExportError: (err) =>
      logger.warn({ err, endpoint: config.endpoint }, 'tracing: exporting spans failed'),
  });
  logger.info(
    `tracing: spans to ${config.endpoint} as ${config.serviceName} (sampler ${config.sampler})`,
  );
  return tracing;
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
