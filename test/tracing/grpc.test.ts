// OTLP over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc): requests through the embedded
// server, traced as the roles configure it from the standard variables, and their spans
// as a collector's gRPC port receives them (test/support/otlp-grpc-receiver.ts: grpc-js
// serving TraceService/Export, the request decoded with the OTLP schema): in the
// caller's trace, with the names, attributes and resource the OTLP/HTTP exports carry,
// and with the same redaction. A collector away, refusing or never answering, costs
// requests nothing and shutdown keeps its deadline. TLS, metadata from
// OTEL_EXPORTER_OTLP_HEADERS and the lazy load are in process.test.ts.
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracingSettings } from '../../roles/tracing-settings.ts';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import type { TracingConfig } from '../../runtime/tracing/tracing.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { startOtlpGrpcReceiver, type OtlpGrpcReceiver } from '../support/otlp-grpc-receiver.ts';
import { SPAN_KIND, STATUS } from '../support/otlp-receiver.ts';
import {
  startTracedRuntime,
  type Downstream,
  type TracedRuntime,
} from '../support/traced-runtime.ts';
import { expectCallsTrace, one, traceOf, tracingConfig } from '../support/tracing.ts';

const CALLER_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER_SPAN = 'b7ad6b7169203331';
const wf = '/webhook/default_production_';
/** In every value a caller or a workflow puts where a secret may be: never in a span. */
const SECRET = 's3cr3t';

/** The roles' tracing configuration from the standard variables, for a gRPC endpoint. */
function fromVariables(endpoint: string, env: Record<string, string> = {}): TracingConfig {
  const { config, problems } = tracingSettings('dev', {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    ...env,
  });
  expect(problems).toEqual([]);
  if (config === undefined) throw new Error('tracing is off');
  expect(config.protocol).toBe('grpc');
  return config;
}

describe('OTLP/gRPC export', () => {
  let otlp: OtlpGrpcReceiver;
  let downstream: Downstream;
  let base = '';
  let traced: TracedRuntime<OtlpGrpcReceiver> | undefined;

  beforeAll(async () => {
    traced = await startTracedRuntime({
      receiver: () => startOtlpGrpcReceiver(),
      // A plaintext collector named without a scheme, as a platform may inject it.
      config: (receiver) =>
        fromVariables(receiver.address, { OTEL_EXPORTER_OTLP_INSECURE: 'true' }),
      answer: (r) => (r.url.includes('boom') ? 503 : 200),
      file: 'grpc.yaml',
      manifests: (downstreamUrl) => [
        secret('keys', { acme: 'key-acme-123456' }),
        workflow('calls', {
          nodes: [
            { id: 'shape', type: 'transform', expression: '{ "n": body.n }' },
            {
              id: 'notify',
              type: 'http',
              request: { method: 'POST', url: `${downstreamUrl}/ok` },
            },
          ],
        }),
        workflow('chatdown', {
          nodes: [
            {
              id: 'post',
              type: 'http',
              request: { method: 'POST', url: `${downstreamUrl}/bot${SECRET}-boom/sendMessage` },
            },
          ],
        }),
        trigger('keyed', {
          workflowRef: { name: 'calls' },
          pathSegment: 'keyed',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
          response: { mode: 'waitForCompletion' },
        }),
        trigger('chatdown', {
          workflowRef: { name: 'chatdown' },
          pathSegment: 'hooks/:team/:token',
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ready: ['keyed', 'chatdown'],
    });
    ({ otlp, downstream, base } = traced);
  }, 30_000);
  afterAll(() => traced?.stop());

  it('a request’s spans arrive over gRPC, with its trace id, names, attributes and resource', async () => {
    const res = await fetch(`${base}${wf}calls/keyed`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'key-acme-123456',
        traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      },
      body: JSON.stringify({ n: 7 }),
    });
    expect(res.status).toBe(200);
    const spans = await traceOf(otlp, (s) => s.traceId === CALLER_TRACE, 5);
    // Sent by the official gRPC exporter (its user agent), over the insecure channel the
    // scheme-less address with OTEL_EXPORTER_OTLP_INSECURE=true asked for.
    expect(otlp.metadata.length).toBeGreaterThan(0);
    expect(otlp.metadata[0]?.['user-agent']).toMatch(/^OTel-OTLP-Exporter-JavaScript\/0\.301\./);

    expectCallsTrace(spans, { wf, callerSpan: CALLER_SPAN, downstream });
  });

  it('redacts as over HTTP: path parameters, outbound paths and failure messages carry no secret', async () => {
    const res = await fetch(`${base}${wf}chatdown/hooks/T000/${SECRET}-token?sig=${SECRET}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': `agent-${SECRET}` },
      body: '{"n":1}',
    });
    expect(res.status).toBeGreaterThanOrEqual(500);
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === 'chatdown',
      4,
    );
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    expect(server.attributes).toMatchObject({
      'http.route': `${wf}chatdown/hooks/:team/:token`,
      'url.path': `${wf}chatdown/hooks/REDACTED/REDACTED`,
    });
    const client = one(spans, (s) => s.kind === SPAN_KIND.client);
    expect(client.attributes['url.full']).toBe(`${downstream.url}/REDACTED`);
    expect(client.status.code).toBe(STATUS.error);
    const node = one(spans, (s) => s.name === 'http post');
    expect(node.status.code).toBe(STATUS.error);
    expect(node.status.message).toContain(`${downstream.url}/REDACTED`);
    // The whole trace as the collector got it: no secret, no path value anywhere.
    expect(JSON.stringify(spans)).not.toContain(SECRET);
    expect(JSON.stringify(spans)).not.toContain('T000');
  });
});

/** A collector that accepts connections and never answers (a stalled or black-holed one). */
async function stalledCollector(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A gRPC port that was just free: connections to it are refused. */
async function refusingCollector(): Promise<{ url: string; close(): Promise<void> }> {
  const gone = await startOtlpGrpcReceiver();
  await gone.close();
  return { url: gone.url, close: () => Promise.resolve() };
}

describe('OTLP/gRPC with the collector away', () => {
  it.each([
    ['refusing connections', refusingCollector],
    ['accepting and never answering', stalledCollector],
  ])(
    '%s: requests are answered as fast; the failed export is reported; shutdown keeps its deadline',
    async (_, collector) => {
      const away = await collector();
      const errors: Error[] = [];
      const tracing = await createOtelTracing(
        tracingConfig(away.url, {
          protocol: 'grpc',
          onExportError: (e) => errors.push(e),
          maxQueueSize: 8,
          maxExportBatchSize: 4,
          exportTimeoutMs: 1000,
        }),
      );
      const rt = await startRuntime({ engine: { tracing }, tracing });
      try {
        await rt.apply(
          'echo.yaml',
          [
            workflow('echo'),
            trigger('echo', {
              workflowRef: { name: 'echo' },
              response: { mode: 'waitForCompletion' },
            }),
          ],
          ['echo'],
        );
        const base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
        const started = Date.now();
        // More spans than the queue holds: the rest are dropped, nothing waits.
        for (let i = 0; i < 20; i++) {
          const res = await fetch(`${base}${wf}echo/default`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{"n":1}',
          });
          expect(res.status).toBe(200);
        }
        expect(Date.now() - started).toBeLessThan(5_000);
        // A stalled export fails at its deadline (1 s), and its retries within it.
        await eventually(() => expect(errors.length).toBeGreaterThan(0), 10_000);
      } finally {
        await rt.stop();
      }
      const closing = Date.now();
      await tracing.shutdown(500);
      expect(Date.now() - closing).toBeLessThan(1_500);
      await away.close();
    },
    30_000,
  );
});
