// OTEL_TRACES_EXPORTER=console in the adapter: each finished span is handed, as one
// plain object, to the role's log (roles/tracing.ts writes it as a log line), beside the
// OTLP export or without it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import type { LoggedSpan, Tracing } from '../../runtime/tracing/tracing.ts';
import { eventually } from '../support/eventually.ts';
import { tracingConfig } from '../support/tracing.ts';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.ts';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

/** A request span's description, without a caller. */
const REQUEST = {
  method: 'POST',
  route: '/webhook/default_production_echo/default',
  triggerNamespace: 'default',
  triggerName: 'echo',
  workflowId: 'default_production_echo',
  startTime: Date.now(),
};

const CALLER = { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`, tracestate: 'rojo=1' };

/** A request span (answered 503) and its execution's span; a caller's child, or a root. */
async function traceOnce(tracing: Tracing, parent?: typeof CALLER): Promise<void> {
  const request = tracing.request({ ...REQUEST, startTime: Date.now() - 5, parent });
  const execution = tracing.execution({
    executionId: 'e-1',
    workflowId: 'default_production_echo',
    triggerKey: 'default/echo',
    attempt: 1,
    parent: request.carrier(),
    queued: false,
  });
  execution.fail('boom', 'workflow');
  execution.end();
  request.finish({ statusCode: 503, executionId: 'e-1', problem: 'HG_ERR_EXECUTION_FAILED' });
  await tracing.shutdown(2000);
}

describe('the console exporter: spans as log lines', () => {
  let otlp: OtlpReceiver;
  beforeAll(async () => {
    otlp = await startOtlpReceiver();
  });
  afterAll(() => otlp?.close());

  it('otlp,console: every span reaches both, the log as a plain object', async () => {
    const logged: LoggedSpan[] = [];
    await traceOnce(
      await createOtelTracing({
        ...tracingConfig(otlp.endpoint),
        console: true,
        logSpan: (span) => logged.push(span),
      }),
      CALLER,
    );
    expect(logged).toHaveLength(2);
    const [execution, request] = logged as [LoggedSpan, LoggedSpan];
    expect(request).toEqual({
      traceId: CALLER_TRACE,
      spanId: expect.stringMatching(/^[0-9a-f]{16}$/),
      parentSpanId: CALLER_SPAN,
      name: 'POST /webhook/default_production_echo/default',
      kind: 'SERVER',
      startTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      durationMs: expect.any(Number),
      status: 'ERROR',
      statusMessage: 'HG_ERR_EXECUTION_FAILED',
      attributes: expect.objectContaining({
        'http.response.status_code': 503,
        'hookgate.execution.id': 'e-1',
        'error.type': '503',
      }),
      service: 'hookgate-test',
    });
    expect(request.durationMs).toBeGreaterThanOrEqual(4);
    expect(execution).toMatchObject({
      traceId: CALLER_TRACE,
      parentSpanId: request.spanId,
      name: 'execute default_production_echo',
      kind: 'INTERNAL',
      status: 'ERROR',
      statusMessage: 'boom',
    });
    // What a log line can hold: JSON, nothing lost on the way.
    expect(JSON.parse(JSON.stringify(logged))).toEqual(logged);
    const exported = await eventually(() => {
      const spans = otlp.spans.filter((s) => s.traceId === CALLER_TRACE);
      expect(spans).toHaveLength(2);
      return spans;
    });
    expect(exported.find((s) => s.kind === SPAN_KIND.server)?.spanId).toBe(request.spanId);
  });

  it('console alone: no OTLP exporter, the spans are logged', async () => {
    const before = otlp.requests.length;
    const logged: LoggedSpan[] = [];
    await traceOnce(
      await createOtelTracing({
        ...tracingConfig(otlp.endpoint),
        endpoint: undefined,
        console: true,
        logSpan: (span) => logged.push(span),
      }),
    );
    expect(logged.map((s) => s.kind)).toEqual(['INTERNAL', 'SERVER']);
    const [execution, request] = logged as [LoggedSpan, LoggedSpan];
    // A root span has no parentSpanId.
    expect(Object.keys(request)).not.toContain('parentSpanId');
    expect(execution.parentSpanId).toBe(request.spanId);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(otlp.requests.length).toBe(before);
  });

  it('a full batch is not written on the request path: the span that fills it ends at once', async () => {
    const logged: LoggedSpan[] = [];
    // A batch of 2: the second span to end fills it, and the batch processor exports it
    // from inside that span's end (the request's onResponse hook).
    const tracing = await createOtelTracing({
      ...tracingConfig(otlp.endpoint),
      endpoint: undefined,
      console: true,
      logSpan: (span) => logged.push(span),
      maxExportBatchSize: 2,
      scheduledDelayMs: 60_000,
    });
    tracing.request(REQUEST).finish({ statusCode: 200 });
    tracing.request(REQUEST).finish({ statusCode: 200 });
    expect(logged).toEqual([]);
    await eventually(() => expect(logged).toHaveLength(2));
    await tracing.shutdown(2000);
  });

  it('otlp: a full batch is not serialised on the request path either', async () => {
    const tracing = await createOtelTracing({
      ...tracingConfig(otlp.endpoint),
      protocol: 'http/json',
      maxExportBatchSize: 2,
      scheduledDelayMs: 60_000,
    });
    const before = otlp.requests.length;
    // The OTLP/HTTP JSON exporter serialises a batch with JSON.stringify: counted while
    // the two spans end (the second fills the batch).
    const stringify = JSON.stringify;
    let serialised = 0;
    JSON.stringify = ((...args: Parameters<typeof stringify>) => {
      if (typeof args[0] === 'object' && args[0] !== null && 'resourceSpans' in args[0])
        serialised++;
      return stringify(...args);
    }) as typeof stringify;
    try {
      tracing.request(REQUEST).finish({ statusCode: 200 });
      tracing.request(REQUEST).finish({ statusCode: 200 });
    } finally {
      JSON.stringify = stringify;
    }
    expect(serialised).toBe(0);
    await eventually(() => expect(otlp.requests.length).toBeGreaterThan(before));
    await tracing.shutdown(2000);
  });
});
