// A separate listener for /metrics, /healthz and /readyz, for deployments that keep
// scraping and probes off the traffic port (the Helm chart's METRICS_PORT).
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

export async function serveMetrics(
  registry: Registry,
  options: { port: number; host: string; ready?: () => boolean },
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  app.get('/metrics', async (_request, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()),
  );
  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', (_request, reply) => {
    const ready = options.ready?.() ?? true;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'starting' });
  });
  await app.listen({ port: options.port, host: options.host });
  return app;
}
