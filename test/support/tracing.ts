// Helpers of the tracing suites: the adapter's configuration for tests (quick export
// to a receiver on loopback) and finding spans among those received.
import { expect } from 'vitest';
import { DEFAULT_OTLP_PROTOCOL, type TracingConfig } from '../../runtime/tracing/tracing.ts';
import { eventually } from './eventually.ts';
import type { OtlpReceiver, ReceivedSpan } from './otlp-receiver.ts';

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
