// Helpers of the tracing suites: the adapter's configuration for tests (quick export
// to a receiver on loopback) and finding spans among those received.
import { expect } from 'vitest';
import { DEFAULT_OTLP_PROTOCOL, type TracingConfig } from '../../runtime/tracing/tracing.ts';
import { eventually } from './eventually.ts';
import { SPAN_KIND, STATUS, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.ts';

export function tracingConfig(endpoint: string, extra: Partial<TracingConfig> = {}): TracingConfig {
  return {
    serviceName: 'hookgate-test',
    endpoint,
    protocol: DEFAULT_OTLP_PROTOCOL,
    console: false,
    sampler: 'parentbased_always_on',
    ratio: 1,
    maxQueueSize: 2048,
    maxExportBatchSize: 512,
    scheduledDelayMs: 50,
    exportTimeoutMs: 2000,
    ...extra,
  };
}

/** The spans of one trace, once `count` of them have arrived. */
export async function traceOf(
  otlp: OtlpReceiver,
  find: (s: ReceivedSpan) => boolean,
  count: number,
): Promise<ReceivedSpan[]> {
  return eventually(() => {
    const root = otlp.spans.find(find);
    if (!root) throw new Error(`no such span yet (${otlp.spans.length} spans)`);
    const spans = otlp.spans.filter((s) => s.traceId === root.traceId);
    if (spans.length < count) throw new Error(`${spans.length} of ${count} spans`);
    return spans;
  });
}

export function one(spans: ReceivedSpan[], find: (s: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter(find);
  expect(found, JSON.stringify(spans.map((s) => s.name))).toHaveLength(1);
  return found[0] as ReceivedSpan;
}

/**
 * The spans of one Wait for Completion request to the tracing tests' `calls` workflow
 * (trigger `keyed`: a transform, then an http node to the downstream): server span under
 * the caller's, execution span under it, the two node spans, the http node's client span,
 * with their names and attributes, whichever exporter carried them.
 */
export function expectCallsTrace(
  spans: ReceivedSpan[],
  {
    wf,
    callerSpan,
    downstream,
  }: { wf: string; callerSpan: string; downstream: { url: string; port: number } },
): void {
  const server = one(spans, (s) => s.kind === SPAN_KIND.server);
  expect(server.name).toBe(`POST ${wf}calls/keyed`);
  expect(server.parentSpanId).toBe(callerSpan);
  expect(server.spanId).toMatch(/^[0-9a-f]{16}$/);
  expect(server.status.code).toBe(STATUS.unset);
  expect(server.attributes).toMatchObject({
    'http.request.method': 'POST',
    'http.route': `${wf}calls/keyed`,
    'url.path': `${wf}calls/keyed`,
    'http.response.status_code': 200,
    'hookgate.trigger.name': 'keyed',
    'hookgate.workflow.id': 'default_production_calls',
  });
  expect(server.resource['service.name']).toBe('hookgate-dev');

  const execution = one(spans, (s) => s.name === 'execute default_production_calls');
  expect(execution.parentSpanId).toBe(server.spanId);
  expect(execution.attributes).toMatchObject({
    'hookgate.execution.id': server.attributes['hookgate.execution.id'],
    'hookgate.execution.attempt': 1,
  });
  const nodes = spans.filter((s) => s.parentSpanId === execution.spanId);
  expect(nodes.map((s) => s.name).sort()).toEqual(['http notify', 'transform shape']);
  const client = one(spans, (s) => s.kind === SPAN_KIND.client);
  expect(client.parentSpanId).toBe(one(nodes, (s) => s.name === 'http notify').spanId);
  expect(client.attributes).toMatchObject({
    'http.request.method': 'POST',
    'http.response.status_code': 200,
    'url.full': `${downstream.url}/REDACTED`,
    'server.port': downstream.port,
    'hookgate.outbound.purpose': 'http-node',
  });
}
