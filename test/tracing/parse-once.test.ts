// A trusted caller's trace context is read once per request with tracing on: the trust
// decision (acceptedTraceContext) is made once, and its result is both the request
// span's parent and the trigger output's metadata (what outbound requests forward); the
// OpenTelemetry adapter does not parse the caller's traceparent again (its W3C
// propagator only reads the execution records' `trace`, hookgate's own span).
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { acceptedTraceContext } from '../../runtime/engine/outbound/trace-context.ts';
import type * as TraceContextModule from '../../runtime/engine/outbound/trace-context.ts';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import type { Tracing } from '../../runtime/tracing/tracing.ts';
import { eventually } from '../support/eventually.ts';
import { one, traceOf, tracingConfig } from '../support/tracing.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.ts';

vi.mock('../../runtime/engine/outbound/trace-context.ts', async (importOriginal) => {
  const original = await importOriginal<typeof TraceContextModule>();
  return { ...original, acceptedTraceContext: vi.fn(original.acceptedTraceContext) };
});

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
const UNSAMPLED_TRACE = 'abcdef0123456789abcdef0123456789';
const TRACESTATE = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE';
const wf = '/webhook/default_production_';

describe("the caller's trace context, read once per request", () => {
  let otlp: OtlpReceiver;
  let tracing: Tracing | undefined;
  let rt: TestRuntime | undefined;
  let base = '';
  const extract = vi.spyOn(W3CTraceContextPropagator.prototype, 'extract');

  const start = async (on: boolean) => {
    tracing = on ? await createOtelTracing(tracingConfig(otlp.endpoint)) : undefined;
    rt = await startRuntime(tracing ? { engine: { tracing }, tracing } : {});
    await rt.apply(
      'once.yaml',
      [
        secret('keys', { acme: 'key-acme-123456' }),
        workflow('context', {
          nodes: [
            {
              id: 'seen',
              type: 'transform',
              expression: '{ "tp": metadata.traceparent, "ts": metadata.tracestate }',
            },
          ],
        }),
        trigger('keyed', {
          workflowRef: { name: 'context' },
          pathSegment: 'keyed',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ['keyed'],
    );
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  };
  const stop = async () => {
    await rt?.stop();
    await tracing?.shutdown(2000);
    rt = undefined;
    tracing = undefined;
  };
  const post = (headers: Record<string, string> = {}) =>
    fetch(`${base}${wf}context/keyed`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'key-acme-123456', ...headers },
      body: '{"n":1}',
    });

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
  });
  afterAll(async () => {
    await stop();
    await otlp?.close();
  });
  beforeEach(() => {
    vi.mocked(acceptedTraceContext).mockClear();
    extract.mockClear();
  });

  it('tracing on: one trust decision, the span continues it, the workflow sees it', async () => {
    await start(true);
    try {
      const res = await post({ traceparent: TRACEPARENT, tracestate: TRACESTATE });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ tp: TRACEPARENT, ts: TRACESTATE });
      expect(vi.mocked(acceptedTraceContext)).toHaveBeenCalledTimes(1);
      // The propagator never saw the caller's header (the execution's parent is ours).
      const parsed = extract.mock.calls.map(([, carrier]) => JSON.stringify(carrier));
      expect(parsed.filter((c) => c.includes(TRACEPARENT))).toEqual([]);
      const spans = await traceOf(otlp, (s) => s.traceId === CALLER_TRACE, 3);
      const server = one(spans, (s) => s.kind === SPAN_KIND.server);
      expect(server.parentSpanId).toBe(CALLER_SPAN);
      // Its sampled flag still decides (parent-based sampler): an unsampled caller's
      // request makes no span, though the workflow still sees its context.
      const unsampled = `00-${UNSAMPLED_TRACE}-${CALLER_SPAN}-00`;
      expect(await (await post({ traceparent: unsampled })).json()).toEqual({ tp: unsampled });
      const before = otlp.spans.length;
      await post();
      await eventually(() => expect(otlp.spans.length).toBeGreaterThan(before));
      expect(otlp.spans.filter((s) => s.traceId === UNSAMPLED_TRACE)).toEqual([]);
    } finally {
      await stop();
    }
  });

  it('tracing off: one trust decision with a traceparent, none without', async () => {
    await start(false);
    try {
      const res = await post({ traceparent: TRACEPARENT, tracestate: TRACESTATE });
      expect(await res.json()).toEqual({ tp: TRACEPARENT, ts: TRACESTATE });
      expect(vi.mocked(acceptedTraceContext)).toHaveBeenCalledTimes(1);
      vi.mocked(acceptedTraceContext).mockClear();
      const plain = await post();
      expect(await plain.json()).toEqual({});
      expect(vi.mocked(acceptedTraceContext)).not.toHaveBeenCalled();
    } finally {
      await stop();
    }
  });
});
