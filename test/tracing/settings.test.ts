// The tracing settings as read from the OpenTelemetry variables (roles/tracing-settings.ts);
// the refusals at start are in process.test.ts.
import { describe, expect, it } from 'vitest';
import { tracingSettings } from '../../roles/tracing-settings.ts';

const on = { OTEL_TRACES_EXPORTER: 'otlp' };

describe('tracing settings', () => {
  it('off unless OTEL_TRACES_EXPORTER=otlp; off, the other variables are not read', () => {
    expect(tracingSettings('dev', {})).toEqual({ config: undefined, problems: [] });
    expect(
      tracingSettings('gateway', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).config,
    ).toBeUndefined();
    expect(
      tracingSettings('worker', { OTEL_TRACES_EXPORTER: 'none', OTEL_TRACES_SAMPLER: 'nonsense' }),
    ).toEqual({ config: undefined, problems: [] });
    expect(tracingSettings('dev', { ...on, OTEL_SDK_DISABLED: 'TRUE' }).config).toBeUndefined();
    // The operator makes no spans.
    expect(tracingSettings('operator', on).config).toBeUndefined();
  });

  it('the defaults: parent-based always-on, the local collector, hookgate-<role>', () => {
    expect(tracingSettings('worker', on)).toEqual({
      config: {
        serviceName: 'hookgate-worker',
        endpoint: 'http://localhost:4318/v1/traces',
        sampler: 'parentbased_always_on',
        ratio: 1,
        maxQueueSize: 2048,
        maxExportBatchSize: 512,
        scheduledDelayMs: 5000,
        exportTimeoutMs: 30_000,
      },
      problems: [],
    });
  });

  it('the endpoints: the signal’s own as it is, else the base one with /v1/traces', () => {
    const endpoint = (env: Record<string, string>) =>
      tracingSettings('gateway', { ...on, ...env }).config?.endpoint;
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(
      endpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/traces',
      }),
    ).toBe('https://traces.example/otlp/traces');
  });

  it('samplers, the ratio, the batch processor’s bounds and the service name', () => {
    expect(
      tracingSettings('dev', {
        ...on,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '50',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BSP_EXPORT_TIMEOUT: '1000',
        OTEL_SERVICE_NAME: 'webhooks',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      }).config,
    ).toMatchObject({
      serviceName: 'webhooks',
      sampler: 'parentbased_traceidratio',
      ratio: 0.25,
      maxQueueSize: 100,
      maxExportBatchSize: 50,
      scheduledDelayMs: 200,
      exportTimeoutMs: 1000,
    });
    // Enum values without regard to case, as the SDK's environment specification asks.
    expect(
      tracingSettings('gateway', {
        OTEL_TRACES_EXPORTER: 'OTLP',
        OTEL_TRACES_SAMPLER: 'ParentBased_TraceIdRatio',
        OTEL_TRACES_SAMPLER_ARG: '0.5',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'HTTP/JSON',
      }),
    ).toMatchObject({ config: { sampler: 'parentbased_traceidratio', ratio: 0.5 }, problems: [] });
    // A sampler that takes no argument ignores it, as the specification says.
    expect(
      tracingSettings('dev', {
        ...on,
        OTEL_TRACES_SAMPLER: 'always_on',
        OTEL_TRACES_SAMPLER_ARG: 'x',
      }).problems,
    ).toEqual([]);
  });
});
