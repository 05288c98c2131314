// The request's SERVER span at the edges: callers refused before the handler, callers
// that leave while they wait or mid-stream (SSE), and traceparent values hookgate must
// not trust or choke on.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import type { Tracing } from '../../runtime/tracing/tracing.ts';
import { eventually } from '../support/eventually.ts';
import { tracingConfig } from '../support/tracing.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import {
  SPAN_KIND,
  STATUS,
  startOtlpReceiver,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${CALLER_TRACE}-00f067aa0ba902b7-01`;
const wf = '/webhook/default_production_';
/** The trace id of the malformed values: never a span's. */
const BAD_TRACE = 'abcdef0123456789abcdef0123456789';

describe("the request span's edges", () => {
  let otlp: OtlpReceiver;
  let tracing: Tracing;
  let rt: TestRuntime;
  let base = '';

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    tracing = await createOtelTracing(tracingConfig(otlp.endpoint));
    rt = await startRuntime({ engine: { tracing }, tracing });
    await rt.apply(
      'edges.yaml',
      [
        secret('keys', { acme: 'key-acme-123456' }),
        workflow('echo'),
        workflow('slow', { nodes: [{ id: 'wait', type: 'delay', duration: '1500ms' }] }),
        trigger('keyed', {
          workflowRef: { name: 'echo' },
          pathSegment: 'keyed',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
          response: { mode: 'waitForCompletion' },
        }),
        trigger('open', {
          workflowRef: { name: 'echo' },
          pathSegment: 'open',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('slow', {
          workflowRef: { name: 'slow' },
          pathSegment: 'slow',
          response: { mode: 'waitForCompletion' },
        }),
        trigger('streamed', {
          workflowRef: { name: 'slow' },
          pathSegment: 'streamed',
          response: { mode: 'sseStream' },
        }),
      ],
      ['keyed', 'open', 'slow', 'streamed'],
    );
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  }, 30_000);
  afterAll(async () => {
    await rt?.stop();
    await tracing?.shutdown(2000);
    await otlp?.close();
  });

  const post = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${wf}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: '{"n":1}',
    });
  const serverSpan = (name: string, status: number) =>
    eventually(() => {
      const found = otlp.spans.filter(
        (s) =>
          s.kind === SPAN_KIND.server &&
          s.attributes['hookgate.trigger.name'] === name &&
          s.attributes['http.response.status_code'] === status,
      );
      if (found.length === 0) throw new Error(`no ${status} span of ${name} yet`);
      return found;
    });

  it("a caller refused by the endpoint's authentication does not choose the trace (401 under its own trace id)", async () => {
    const res = await post('echo/keyed', {
      'x-api-key': 'wrong-key-000000',
      traceparent: TRACEPARENT,
    });
    expect(res.status).toBe(401);
    const [span] = await serverSpan('keyed', 401);
    expect(span?.traceId).not.toBe(CALLER_TRACE);
    expect(span?.parentSpanId).toBe('');
    // An authenticated caller's is still continued.
    const ok = await post('echo/keyed', {
      'x-api-key': 'key-acme-123456',
      traceparent: TRACEPARENT,
    });
    expect(ok.status).toBe(200);
    const [trusted] = await serverSpan('keyed', 200);
    expect(trusted?.traceId).toBe(CALLER_TRACE);
  });

  /**
   * POSTs to `path` and leaves 300 ms after the request was sent; the response's status
   * and content type when one had begun by then (an SSE stream), else undefined.
   */
  const leaveEarly = (path: string) =>
    new Promise<string | undefined>((resolve, reject) => {
      let begun: string | undefined;
      const req = httpRequest(`${base}${wf}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      });
      req.on('response', (res) => {
        begun = `${res.statusCode} ${res.headers['content-type']}`;
        res.resume();
      });
      req.on('error', () => resolve(begun));
      req.end('{"n":1}', () =>
        setTimeout(() => {
          req.destroy();
          resolve(begun);
        }, 300),
      );
      setTimeout(() => reject(new Error('stuck')), 5000);
    });
  /** The SERVER spans of a trigger, once there is one. */
  const spansOf = (name: string) =>
    eventually(() => {
      const found = otlp.spans.filter(
        (s) => s.kind === SPAN_KIND.server && s.attributes['hookgate.trigger.name'] === name,
      );
      if (found.length === 0) throw new Error(`no span of ${name} yet`);
      return found;
    }, 5_000);

  it('a waiting caller that leaves: its span still ends (client_left)', async () => {
    expect(await leaveEarly('slow/slow')).toBeUndefined();
    const [span, ...more] = await spansOf('slow');
    expect(more).toEqual([]);
    expect(span?.attributes['error.type']).toBe('client_left');
    expect(span?.status.code).toBe(STATUS.unset);
  });

  it('an SSE caller that leaves mid-stream: its span ends as a waiting one does (client_left)', async () => {
    expect(await leaveEarly('slow/streamed')).toBe('200 text/event-stream; charset=utf-8');
    const [span] = await spansOf('streamed');
    expect(span?.attributes['error.type']).toBe('client_left');
    expect(span?.status.code).toBe(STATUS.unset);
    // The execution runs on (1.5 s): nothing makes or ends a second span later.
    await new Promise((resolve) => setTimeout(resolve, 1_800));
    expect(otlp.spans.filter((s) => s.attributes['hookgate.trigger.name'] === 'streamed')).toEqual([
      span,
    ]);
  });

  it.each([
    '00-zzz',
    `00-${BAD_TRACE.toUpperCase()}-00F067AA0BA902B7-01`,
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
    '00-abcdef0123456789abcdef0123456789-0000000000000000-01',
    `ff-${BAD_TRACE}-00f067aa0ba902b7-01`,
    `00-${BAD_TRACE}-00f067aa0ba902b7-01-${'x'.repeat(5000)}`,
    `00-${BAD_TRACE}-00f067aa0ba902b7-01, 00-${BAD_TRACE}-00f067aa0ba902b7-00`,
    `00-${BAD_TRACE}-00f067aa0ba902b7-1`,
    '',
  ])('a malformed traceparent %#: answered, never trusted', async (traceparent) => {
    const res = await post('echo/keyed', {
      'x-api-key': 'key-acme-123456',
      traceparent,
      tracestate: 'a=b',
    });
    expect(res.status).toBe(200);
  });

  it('none of the malformed values became the parent of a span', async () => {
    const before = otlp.spans.length;
    await post('echo/open');
    await eventually(() => expect(otlp.spans.length).toBeGreaterThan(before));
    expect(otlp.spans.filter((s) => s.traceId === BAD_TRACE)).toEqual([]);
  });
});
