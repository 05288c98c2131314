// Probes and metrics, the same for every role: GET /metrics (the role's Prometheus
// registry), /healthz (liveness: the process answers) and /readyz (readiness: the
// role says whether it can do its work now). Registered on the role's main app, or
// on a listener of its own (METRICS_PORT) for deployments that keep scraping and
// probes off the traffic port.
import Fastify, { type FastifyInstance, type FastifyPluginCallback } from 'fastify';
import type { Registry } from 'prom-client';

export interface Readiness {
  ready: boolean;
  /** Shown in the body, e.g. `ready`, `starting`, `standby`, `leading`. */
  status: string;
}

export interface ProbeOptions {
  registry: Registry;
  /** Default: always ready. */
  readiness?: () => Readiness;
  /**
   * Serve /metrics (default). Off on a public listener when METRICS_PORT serves it:
   * its series name endpoints and consumers, for the scraper only (docs/security.md).
   */
  metrics?: boolean;
}

export const probes: FastifyPluginCallback<ProbeOptions> = (app, options, done) => {
  const { registry } = options;
  if (options.metrics !== false)
    app.get('/metrics', async (_request, reply) => {
      void reply.header('content-type', registry.contentType);
      void reply.header('cache-control', 'no-store');
      return registry.metrics();
    });
  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', (_request, reply) => {
    const { ready, status } = options.readiness?.() ?? { ready: true, status: 'ready' };
    return reply.code(ready ? 200 : 503).send({ status });
  });
  done();
};

/** A listener that serves only the probes. */
export async function serveProbes(
  options: ProbeOptions & { port: number; host: string },
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  await app.register(probes, options);
  await app.listen({ port: options.port, host: options.host });
  return app;
}
