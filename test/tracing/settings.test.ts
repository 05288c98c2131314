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
        // The specification's default encoding, to the same OTLP/HTTP port as JSON.
        protocol: 'http/protobuf',
        console: false,
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

  it('OTEL_TRACES_EXPORTER is a list: otlp and console, each once; none adds no exporter', () => {
    const exporters = (value: string, env: Record<string, string> = {}) => {
      const { config, problems } = tracingSettings('gateway', {
        ...env,
        OTEL_TRACES_EXPORTER: value,
      });
      expect(problems).toEqual([]);
      return config && { endpoint: config.endpoint, console: config.console };
    };
    const otlp = { endpoint: 'http://localhost:4318/v1/traces', console: false };
    const both = { ...otlp, console: true };
    expect(exporters('otlp,console')).toEqual(both);
    expect(exporters(' Console , OTLP ')).toEqual(both);
    expect(exporters('otlp,otlp')).toEqual(otlp);
    expect(exporters('console,otlp,console')).toEqual(both);
    // Spans as log lines only: no OTLP export, and its variables are not read.
    expect(exporters('console', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toEqual({
      endpoint: undefined,
      console: true,
    });
    expect(exporters('console', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })?.console).toBe(true);
    // `none` is no exporter (the specification's "no automatically configured exporter"):
    // alone, or with nothing else, tracing is off; beside others, it adds nothing.
    expect(exporters('none')).toBeUndefined();
    expect(exporters('none,none')).toBeUndefined();
    expect(exporters(' , ')).toBeUndefined();
    expect(exporters('none,otlp')).toEqual(otlp);
    expect(exporters('console,none')).toEqual({ endpoint: undefined, console: true });
    // A value hookgate does not know stops it, named, whatever else is listed.
    expect(tracingSettings('worker', { OTEL_TRACES_EXPORTER: 'otlp,zipkin' })).toEqual({
      config: undefined,
      problems: [
        'OTEL_TRACES_EXPORTER must list otlp, console or none (hookgate exports OTLP, or spans as log lines), not "zipkin"',
      ],
    });
    expect(
      tracingSettings('worker', { OTEL_TRACES_EXPORTER: 'none,jaeger,logging' }).problems,
    ).toEqual([
      'OTEL_TRACES_EXPORTER must list otlp, console or none (hookgate exports OTLP, or spans as log lines), not "jaeger", "logging"',
    ]);
  });

  const UNKNOWN = (name: string, value: string) =>
    `${name} must be http/protobuf, http/json or grpc, not "${value}"`;
  it.each([
    [{}, 'http/protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }, 'http/protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'HTTP/Protobuf' }, 'http/protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, 'http/json'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: ' HTTP/JSON ' }, 'http/json'],
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }, 'http/json'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'grpc'],
    [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' GRPC ' }, 'grpc'],
    // Empty or blank is unset, as the SDK's environment specification says.
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: '' }, 'http/protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: '  ' }, 'http/protobuf'],
    // The signal's own variable wins; the general one is not read then.
    [
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      'http/json',
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      'grpc',
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' ', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      'http/json',
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' },
      'http/json',
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/thrift' },
      { problem: UNKNOWN('OTEL_EXPORTER_OTLP_PROTOCOL', 'http/thrift') },
    ],
    [
      {
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' gRPC/protobuf ',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      },
      { problem: UNKNOWN('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'gRPC/protobuf') },
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf,http/json' },
      { problem: UNKNOWN('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'http/protobuf,http/json') },
    ],
  ] as [Record<string, string>, string | { problem: string }][])(
    'the OTLP protocol of %j: %j',
    (env, expected) => {
      const { config, problems } = tracingSettings('worker', { ...on, ...env });
      if (typeof expected === 'string') {
        expect(problems).toEqual([]);
        expect(config?.protocol).toBe(expected);
      } else {
        expect(config).toBeUndefined();
        expect(problems).toEqual([expected.problem]);
      }
    },
  );

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

  it('grpc: the endpoint as it is, no path; the default the local collector’s gRPC port', () => {
    const grpc = (env: Record<string, string>) =>
      tracingSettings('gateway', { ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', ...env });
    const endpoint = (env: Record<string, string>) => {
      const { config, problems } = grpc(env);
      expect(problems).toEqual([]);
      return config?.endpoint;
    };
    // The specification's default for grpc: plaintext to localhost:4317.
    expect(endpoint({})).toBe('http://localhost:4317');
    // Nothing is added to the base endpoint (the gRPC service's path is fixed).
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317' })).toBe(
      'http://collector:4317',
    );
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: ' https://collector.example:443/ ' })).toBe(
      'https://collector.example',
    );
    expect(
      endpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example:4317',
      }),
    ).toBe('https://traces.example:4317');
    // Without a scheme: TLS unless OTEL_EXPORTER_OTLP_(TRACES_)INSECURE is true.
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' })).toBe(
      'https://collector:4317',
    );
    expect(
      endpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317',
        OTEL_EXPORTER_OTLP_INSECURE: 'TRUE',
      }),
    ).toBe('http://collector:4317');
    expect(
      endpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: '[::1]:4317',
        OTEL_EXPORTER_OTLP_INSECURE: 'true',
        OTEL_EXPORTER_OTLP_TRACES_INSECURE: ' false ',
      }),
    ).toBe('https://[::1]:4317');
    expect(
      endpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317',
        OTEL_EXPORTER_OTLP_INSECURE: 'true',
        OTEL_EXPORTER_OTLP_TRACES_INSECURE: ' ',
      }),
    ).toBe('http://collector:4317');
    // A scheme says it itself, as the specification says: INSECURE is not read then.
    expect(
      endpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector:4317',
        OTEL_EXPORTER_OTLP_INSECURE: 'true',
      }),
    ).toBe('https://collector:4317');

    // What the exporter would ignore or cannot use is refused, named.
    expect(grpc({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/v1/traces' })).toEqual({
      config: undefined,
      problems: [
        'OTEL_EXPORTER_OTLP_ENDPOINT must be the collector\'s address without a path or query for grpc (e.g. http://collector:4317), not "http://collector:4318/v1/traces"',
      ],
    });
    expect(grpc({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector:4317?x=1' }).problems).toEqual([
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be the collector\'s address without a path or query for grpc (e.g. http://collector:4317), not "collector:4317?x=1"',
    ]);
    for (const value of ['unix:///run/otel.sock', 'ftp://collector:4317', 'collector:port'])
      expect(grpc({ OTEL_EXPORTER_OTLP_ENDPOINT: value }).problems, value).toEqual([
        `OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL or a host:port for grpc, not "${value}"`,
      ]);
    // gRPC's default port is 443 whatever the scheme: plaintext must name its port.
    for (const env of [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:80' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector', OTEL_EXPORTER_OTLP_INSECURE: 'true' },
    ] as Record<string, string>[])
      expect(grpc(env).problems, JSON.stringify(env)).toEqual([
        `OTEL_EXPORTER_OTLP_ENDPOINT must name the collector's port for plaintext grpc (gRPC's default is 443), e.g. http://collector:4317, not "${env.OTEL_EXPORTER_OTLP_ENDPOINT}"`,
      ]);
    expect(endpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector' })).toBe('https://collector');
    expect(grpc({ OTEL_EXPORTER_OTLP_INSECURE: 'yes' }).problems).toEqual([
      'OTEL_EXPORTER_OTLP_INSECURE must be true or false, not "yes"',
    ]);
    expect(
      grpc({ OTEL_EXPORTER_OTLP_TRACES_INSECURE: '1', OTEL_EXPORTER_OTLP_INSECURE: 'true' })
        .problems,
    ).toEqual(['OTEL_EXPORTER_OTLP_TRACES_INSECURE must be true or false, not "1"']);
    // OTLP/HTTP reads neither INSECURE (the exporters do not) nor a bare host:port.
    expect(
      tracingSettings('gateway', { ...on, OTEL_EXPORTER_OTLP_INSECURE: 'yes' }).problems,
    ).toEqual([]);
    expect(
      tracingSettings('gateway', { ...on, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }).problems,
    ).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, not "collector:4318"',
    ]);
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
