// OTLP over HTTP in binary protobuf (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, the
// specification's default): one request through the embedded server, traced as the roles
// configure it from the standard variables, and its spans as a collector receives them:
// application/x-protobuf, decoded with the official OTLP schema (test/support/otlp-proto),
// in the caller's trace, with the span names and attributes the JSON export carries.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracingSettings } from '../../roles/tracing-settings.ts';
import type { TracingConfig } from '../../runtime/tracing/tracing.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';
import type { OtlpReceiver } from '../support/otlp-receiver.ts';
import {
  startTracedRuntime,
  type Downstream,
  type TracedRuntime,
} from '../support/traced-runtime.ts';
import { expectCallsTrace, traceOf } from '../support/tracing.ts';

const CALLER_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER_SPAN = 'b7ad6b7169203331';
const wf = '/webhook/default_production_';

describe('OTLP/HTTP protobuf export', () => {
  let otlp: OtlpReceiver;
  let downstream: Downstream;
  let base = '';
  let traced: TracedRuntime | undefined;

  /** The roles' tracing configuration from the standard variables, for the OTLP receiver. */
  function fromVariables(receiver: OtlpReceiver): TracingConfig {
    const { config, problems } = tracingSettings('dev', {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    expect(problems).toEqual([]);
    if (config === undefined) throw new Error('tracing is off');
    expect(config.protocol).toBe('http/protobuf');
    return config;
  }

  beforeAll(async () => {
    traced = await startTracedRuntime({
      config: fromVariables,
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
          ],
        }),
        trigger('keyed', {
          workflowRef: { name: 'calls' },
          pathSegment: 'keyed',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ready: ['keyed'],
    });
    ({ otlp, downstream, base } = traced);
  }, 30_000);
  afterAll(() => traced?.stop());

  it('a request’s spans arrive as application/x-protobuf, with its trace id, names and attributes', async () => {
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
    // Every export request was protobuf, and every span came in one.
    expect(otlp.requests.length).toBeGreaterThan(0);
    expect(new Set(otlp.requests)).toEqual(new Set(['application/x-protobuf']));
    expect(new Set(otlp.encodings)).toEqual(new Set(['protobuf']));

    expectCallsTrace(spans, { wf, callerSpan: CALLER_SPAN, downstream });
  });
});
