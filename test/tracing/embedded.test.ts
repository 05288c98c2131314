// Distributed tracing in the embedded server (the dev runtime, the in-process engine),
// exported with the real OTLP/HTTP exporter to a receiver on loopback: the trace tree
// of a request (SERVER span, execution span, node spans, CLIENT spans of http nodes and
// callbacks), the caller's context continued only where HOOKGATE_TRACE_CONTEXT trusts
// the caller, the traceparent sent downstream naming our CLIENT span, a failing node's
// status, and an unreachable collector that costs requests nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import { eventually } from '../support/eventually.ts';
import { one, traceOf, tracingConfig } from '../support/tracing.ts';
import { startRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import {
  SPAN_KIND,
  STATUS,
  startOtlpReceiver,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';
import {
  startTracedRuntime,
  type Downstream,
  type TracedRuntime,
} from '../support/traced-runtime.ts';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
const wf = '/webhook/default_production_';

describe('tracing in the embedded server', () => {
  let otlp: OtlpReceiver;
  let downstream: Downstream;
  let base = '';
  let traced: TracedRuntime | undefined;

  beforeAll(async () => {
    traced = await startTracedRuntime({
      answer: (r) => (r.url.startsWith('/boom') ? 500 : 200),
      engine: { callbacks: { backoffMs: 10 } },
      file: 'traced.yaml',
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
            { id: 'done', type: 'transform', expression: '{ "n": $nodes.shape.n }' },
          ],
        }),
        workflow('breaks', {
          nodes: [
            { id: 'shape', type: 'transform', expression: '{ "n": body.n }' },
            {
              id: 'call',
              type: 'http',
              // A token in the query: no span, record or answer quotes it.
              request: { method: 'POST', url: `${downstreamUrl}/boom?api_key=s3cr3t-key#s3cr3t` },
            },
          ],
        }),
        trigger('open', {
          workflowRef: { name: 'calls' },
          pathSegment: 'open',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('keyed', {
          workflowRef: { name: 'calls' },
          pathSegment: 'keyed',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
          response: { mode: 'waitForCompletion' },
        }),
        trigger('fails', {
          workflowRef: { name: 'breaks' },
          pathSegment: 'fails',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('later', {
          workflowRef: { name: 'calls' },
          pathSegment: 'later',
          response: { mode: 'asyncCallback' },
        }),
      ],
      ready: ['open', 'keyed', 'fails', 'later'],
    });
    ({ otlp, downstream, base } = traced);
  }, 30_000);
  afterAll(() => traced?.stop());

  const post = (path: string, headers: Record<string, string> = {}, body: unknown = { n: 7 }) =>
    fetch(`${base}${wf}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('a trusted caller: request, execution, nodes and the http call in its trace, downstream a child of our CLIENT span', async () => {
    const res = await post('calls/keyed', {
      'x-api-key': 'key-acme-123456',
      traceparent: TRACEPARENT,
      tracestate: 'rojo=00f067aa0ba902b7',
    });
    expect(res.status).toBe(200);
    const spans = await traceOf(otlp, (s) => s.traceId === CALLER_TRACE, 6);
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    expect(server.parentSpanId).toBe(CALLER_SPAN);
    expect(server.name).toBe(`POST ${wf}calls/keyed`);
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': `${wf}calls/keyed`,
      'http.response.status_code': 200,
      'hookgate.trigger.namespace': 'default',
      'hookgate.trigger.name': 'keyed',
      'hookgate.workflow.id': 'default_production_calls',
    });
    expect(server.status.code).toBe(STATUS.unset);
    expect(server.resource['service.name']).toBe('hookgate-test');
    const execution = one(spans, (s) => s.name === 'execute default_production_calls');
    expect(execution.parentSpanId).toBe(server.spanId);
    expect(execution.kind).toBe(SPAN_KIND.internal);
    expect(execution.attributes['hookgate.execution.id']).toBe(
      server.attributes['hookgate.execution.id'],
    );
    expect(execution.attributes['hookgate.execution.attempt']).toBe(1);
    const nodes = spans.filter((s) => s.parentSpanId === execution.spanId);
    expect(nodes.map((s) => s.name).sort()).toEqual([
      'http notify',
      'transform done',
      'transform shape',
    ]);
    const http = one(nodes, (s) => s.name === 'http notify');
    const client = one(spans, (s) => s.kind === SPAN_KIND.client);
    expect(client.parentSpanId).toBe(http.spanId);
    expect(client.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'url.full': `${downstream.url}/REDACTED`,
      'server.address': '127.0.0.1',
      'hookgate.outbound.purpose': 'http-node',
    });
    // The service called sees our CLIENT span as its parent, in the caller's trace,
    // with the caller's tracestate.
    const call = downstream.received.find(
      (r) => r.url === '/ok' && String(r.headers.traceparent).includes(CALLER_TRACE),
    );
    expect(call?.headers.traceparent).toBe(`00-${CALLER_TRACE}-${client.spanId}-01`);
    expect(call?.headers.tracestate).toBe('rojo=00f067aa0ba902b7');
  });

  it('an untrusted caller (open endpoint, policy authenticated): a trace of our own', async () => {
    const before = downstream.received.length;
    const res = await post('calls/open', { traceparent: TRACEPARENT });
    expect(res.status).toBe(200);
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === 'open',
      6,
    );
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    expect(server.traceId).not.toBe(CALLER_TRACE);
    expect(server.parentSpanId).toBe('');
    const client = one(spans, (s) => s.kind === SPAN_KIND.client);
    const call = downstream.received.slice(before).find((r) => r.url === '/ok');
    expect(call?.headers.traceparent).toBe(`00-${server.traceId}-${client.spanId}-01`);
    expect(call?.headers.tracestate).toBeUndefined();
  });

  it('a failing node: its span, the CLIENT span and the execution span say ERROR; the 500 request too', async () => {
    const res = await post('breaks/fails');
    expect(res.status).toBe(500);
    // The caller's problem names the call by its origin alone (its detail is the failure's):
    // a path may hold a token as well as a query.
    const answer = await res.text();
    expect(answer).toContain(`POST ${downstream.url}/… answered 500`);
    expect(answer).not.toContain('/boom');
    expect(answer).not.toContain('s3cr3t');
    const spans = await traceOf(
      otlp,
      (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === 'fails',
      5,
    );
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    expect(server.status.code).toBe(STATUS.error);
    expect(server.attributes).toMatchObject({
      'http.response.status_code': 500,
      'error.type': '500',
      'hookgate.problem': 'HG_ERR_EXECUTION_FAILED',
    });
    const node = one(spans, (s) => s.name === 'http call');
    expect(node.status.code).toBe(STATUS.error);
    expect(node.status.message).toContain('answered 500');
    expect(one(spans, (s) => s.name === 'transform shape').status.code).toBe(STATUS.unset);
    const client = one(spans, (s) => s.kind === SPAN_KIND.client);
    expect(client.parentSpanId).toBe(node.spanId);
    expect(client.status.code).toBe(STATUS.error);
    expect(client.attributes['http.response.status_code']).toBe(500);
    const execution = one(spans, (s) => s.name === 'execute default_production_breaks');
    expect(execution.status.code).toBe(STATUS.error);
    expect(execution.attributes['error.type']).toBe('http5xx');
    expect(node.attributes['error.type']).toBe('http5xx');
    expect(JSON.stringify(spans)).not.toContain('s3cr3t');
  });

  it('an Async Callback: its delivery is a CLIENT span under the execution, and carries it', async () => {
    // The caller's URL may carry its receiver's token, in the path as in the query: the
    // span records neither (url.full's path reads REDACTED).
    const res = await post('calls/later', {
      'x-callback-url': `${downstream.url}/hook/s3cr3t-token?sig=s3cr3t-query`,
    });
    expect(res.status).toBe(202);
    const { executionId } = (await res.json()) as { executionId: string };
    const spans = await traceOf(
      otlp,
      (s) =>
        s.kind === SPAN_KIND.client &&
        s.attributes['hookgate.outbound.purpose'] === 'callback' &&
        otlp.spans.some(
          (e) =>
            e.spanId === s.parentSpanId && e.attributes['hookgate.execution.id'] === executionId,
        ),
      7,
    );
    const execution = one(
      spans,
      (s) => s.attributes['hookgate.execution.id'] === executionId && s.name.startsWith('execute'),
    );
    const callback = one(spans, (s) => s.attributes['hookgate.outbound.purpose'] === 'callback');
    expect(callback.parentSpanId).toBe(execution.spanId);
    expect(callback.attributes).toMatchObject({
      'url.full': `${downstream.url}/REDACTED`,
      'server.address': '127.0.0.1',
      'server.port': downstream.port,
      'http.response.status_code': 200,
    });
    expect(JSON.stringify(callback)).not.toContain('s3cr3t');
    const delivery = downstream.received.find(
      (r) => r.url === '/hook/s3cr3t-token?sig=s3cr3t-query' && r.body.includes(executionId),
    );
    expect(delivery?.headers.traceparent).toBe(`00-${callback.traceId}-${callback.spanId}-01`);
    // The server span (the 202) is the execution's parent.
    const server = one(spans, (s) => s.kind === SPAN_KIND.server);
    expect(execution.parentSpanId).toBe(server.spanId);
  });
});

describe('tracing with the collector away', () => {
  it('requests are answered as fast; the failed export is reported; shutdown keeps its deadline', async () => {
    // A port that was just free: connections to it are refused.
    const gone = await startOtlpReceiver();
    await gone.close();
    const errors: Error[] = [];
    const tracing = await createOtelTracing(
      tracingConfig(gone.endpoint, {
        onExportError: (e) => errors.push(e),
        maxQueueSize: 8,
        maxExportBatchSize: 4,
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
      await eventually(() => expect(errors.length).toBeGreaterThan(0));
    } finally {
      await rt.stop();
    }
    const closing = Date.now();
    await tracing.shutdown(500);
    expect(Date.now() - closing).toBeLessThan(1_500);
  });
});
