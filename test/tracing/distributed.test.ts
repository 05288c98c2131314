// Distributed tracing across the queue: a gateway that queues executions in a real
// redis-server and a worker that runs them, each with its own tracing (as two pods
// would be), exporting to one OTLP/HTTP receiver. The request's context travels on the
// execution record through Redis: the worker's execution span is a child of the
// gateway's SERVER span, in the caller's trace, and the service the workflow calls
// sees the worker's CLIENT span as its parent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import type { Tracing } from '../../runtime/tracing/tracing.ts';
import { trigger, workflow } from '../support/manifests.ts';
import {
  SPAN_KIND,
  STATUS,
  startOtlpReceiver,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';
import { startReceiver } from '../support/receiver.ts';
import { redisAvailable } from '../support/redis.ts';
import { startQueueStack, type QueueStack } from '../support/queue-stack.ts';
import { one, traceOf, tracingConfig } from '../support/tracing.ts';

const CALLER_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER_SPAN = 'b7ad6b7169203331';
const wf = '/webhook/default_production_relay';

describe.skipIf(!redisAvailable())('tracing through the Redis queue: gateway and worker', () => {
  let otlp: OtlpReceiver;
  let downstream: Awaited<ReturnType<typeof startReceiver>>;
  let gatewayTracing: Tracing;
  let workerTracing: Tracing;
  let stack: QueueStack;
  let base = '';

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    downstream = await startReceiver((r) => (r.url === '/boom' ? 503 : 200));
    const outbound = { allow: [`127.0.0.1:${downstream.port}`] };
    gatewayTracing = await createOtelTracing(
      tracingConfig(otlp.endpoint, { serviceName: 'hookgate-gateway' }),
    );
    workerTracing = await createOtelTracing(
      tracingConfig(otlp.endpoint, { serviceName: 'hookgate-worker' }),
    );
    stack = await startQueueStack({
      manifests: {
        file: 'relay.yaml',
        docs: [
          workflow('relay', {
            nodes: [
              { id: 'shape', type: 'transform', expression: '{ "n": body.n }' },
              {
                id: 'forward',
                type: 'http',
                request: { method: 'POST', url: `${downstream.url}/ok` },
              },
            ],
          }),
          workflow('broken', {
            nodes: [{ id: 'stop', type: 'fail', expression: '"the ledger is closed"' }],
          }),
          trigger('relay', {
            workflowRef: { name: 'relay' },
            pathSegment: 'relay',
            response: { mode: 'immediateAck' },
          }),
          trigger('broken', {
            workflowRef: { name: 'broken' },
            pathSegment: 'broken',
            response: { mode: 'immediateAck' },
          }),
        ],
        ready: ['relay', 'broken'],
      },
      gateway: {
        engine: { outbound },
        // Open endpoints: let their callers' trace context through.
        traceContext: 'all',
        tracing: gatewayTracing,
      },
      worker: { engine: { outbound, tracing: workerTracing }, blockMs: 200 },
    });
    ({ base } = stack);
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await gatewayTracing?.shutdown(2000);
    await workerTracing?.shutdown(2000);
    await downstream?.close();
    await otlp?.close();
  });

  it("the worker's execution span is a child of the gateway's request span, through Redis", async () => {
    const res = await fetch(`${base}${wf}/relay`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      },
      body: '{"n":3}',
    });
    expect(res.status).toBe(202);
    const { executionId } = (await res.json()) as { executionId: string };
    const spans = await traceOf(otlp, (s) => s.traceId === CALLER_TRACE, 5);
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    expect(server.parentSpanId).toBe(CALLER_SPAN);
    expect(server.resource['service.name']).toBe('hookgate-gateway');
    expect(server.attributes).toMatchObject({
      'hookgate.execution.id': executionId,
      'http.response.status_code': 202,
    });
    const execution = one(spans, (s) => s.name === 'execute default_production_relay');
    expect(execution.resource['service.name']).toBe('hookgate-worker');
    expect(execution.kind).toBe(SPAN_KIND.consumer);
    expect(execution.parentSpanId).toBe(server.spanId);
    expect(execution.attributes['hookgate.execution.id']).toBe(executionId);
    const node = one(spans, (s) => s.name === 'http forward');
    expect(node.parentSpanId).toBe(execution.spanId);
    const client = one(spans, (s) => s.kind === SPAN_KIND.client);
    expect(client.parentSpanId).toBe(node.spanId);
    const call = downstream.received.find((r) => r.body.includes('"n":3'));
    expect(call?.headers.traceparent).toBe(`00-${CALLER_TRACE}-${client.spanId}-01`);
    // What carried it: the record in Redis keeps the request span's context.
    const record = await stack.gateway.engine.get(executionId);
    expect(record?.trace?.traceparent).toBe(`00-${CALLER_TRACE}-${server.spanId}-01`);
  });

  it("a failing workflow: the worker's execution span and the fail node's span say ERROR", async () => {
    const res = await fetch(`${base}${wf.replace('relay', 'broken')}/broken`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(202);
    const { executionId } = (await res.json()) as { executionId: string };
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.execution.id'] === executionId,
      3,
    );
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    // The 202 was no error of the gateway's.
    expect(server.status.code).toBe(STATUS.unset);
    const execution = one(spans, (s) => s.name === 'execute default_production_broken');
    expect(execution.parentSpanId).toBe(server.spanId);
    expect(execution.status).toMatchObject({ code: STATUS.error, message: 'the ledger is closed' });
    const node = one(spans, (s) => s.name === 'fail stop');
    expect(node.parentSpanId).toBe(execution.spanId);
    expect(node.status.code).toBe(STATUS.error);
  });
});
