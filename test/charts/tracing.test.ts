// config.tracing: the standard OpenTelemetry variables reach the processes that make
// spans (gateways, workers), none when off; the values are checked before install.
import { describe, expect, it } from 'vitest';
import { tracingSettings } from '../../roles/tracing-settings.ts';
import { container, deployment, envOf, render, renderError, ROLES, tools } from './chart.ts';

const otelOf = (env: Map<string, { value?: string }>) =>
  Object.fromEntries(
    [...env].filter(([name]) => name.startsWith('OTEL_')).map(([n, e]) => [n, e.value]),
  );

describe.skipIf(!tools)('chart: distributed tracing', () => {
  it('sets no OpenTelemetry variable by default: tracing stays off', async () => {
    const objects = await render();
    for (const role of ROLES)
      expect(otelOf(envOf(container(deployment(objects, role)))), role).toEqual({});
  });

  it('on: gateways and workers export to the endpoint, the operator makes no spans', async () => {
    const objects = await render(
      'config.tracing.enabled=true',
      'config.tracing.endpoint=http://otel-collector.observability:4318',
    );
    for (const role of ['gateway', 'worker'] as const)
      expect(otelOf(envOf(container(deployment(objects, role)))), role).toEqual({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      });
    expect(otelOf(envOf(container(deployment(objects, 'operator'))))).toEqual({});
    const ratio = await render(
      'config.tracing.enabled=true',
      'config.tracing.endpoint=https://collector.example:4318',
      'config.tracing.sampler=parentbased_traceidratio',
      'config.tracing.samplerRatio=0.1',
    );
    expect(otelOf(envOf(container(deployment(ratio, 'worker'))))).toMatchObject({
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    });
  });

  it('exporters: the OTEL_TRACES_EXPORTER list (otlp, console, none), each once', async () => {
    const env = async (...set: string[]) =>
      otelOf(
        envOf(
          container(deployment(await render('config.tracing.enabled=true', ...set), 'gateway')),
        ),
      );
    const endpoint = 'config.tracing.endpoint=http://otel-collector.observability:4318';
    expect(await env(endpoint, 'config.tracing.exporters={otlp,console}')).toMatchObject({
      OTEL_TRACES_EXPORTER: 'otlp,console',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability:4318',
    });
    expect(
      (await env(endpoint, 'config.tracing.exporters={console,otlp,console}')).OTEL_TRACES_EXPORTER,
    ).toBe('console,otlp');
    // Spans as log lines only: no collector needed, none named.
    expect(await env('config.tracing.exporters={console}')).toEqual({
      OTEL_TRACES_EXPORTER: 'console',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
    });
    // `none` adds no exporter, as the roles read it: only the working ones are set.
    expect((await env(endpoint, 'config.tracing.exporters={otlp,none}')).OTEL_TRACES_EXPORTER).toBe(
      'otlp',
    );
    expect(
      await renderError('config.tracing.enabled=true', 'config.tracing.exporters={otlp,console}'),
    ).toContain('config.tracing.enabled needs config.tracing.endpoint');
    expect(await renderError('config.tracing.exporters={otlp,zipkin}')).toContain('exporters');
    expect(await renderError('config.tracing.exporters={OTLP,Zipkin}')).toContain('exporters');
  });

  // config.tracing.protocol reads as the roles read OTEL_EXPORTER_OTLP_PROTOCOL: what they
  // refuse at start fails the render, naming the value; what they take is set as they
  // read it (or, empty, not set: their default).
  it.each([
    'http/protobuf',
    'HTTP/Protobuf',
    'http/json',
    ' HTTP/JSON ',
    '',
    'grpc',
    'GRPC',
    'http/thrift',
    'http/protobuf,http/json',
  ])('protocol %j as the roles read it', async (protocol) => {
    const endpoint = 'http://otel-collector.observability:4318';
    const role = tracingSettings('gateway', {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    });
    // --set would split a value at its comma: a values file keeps it whole.
    const sets = [
      'config.tracing.enabled=true',
      `config.tracing.endpoint=${endpoint}`,
      `config.tracing.protocol=${protocol.replaceAll(',', '\\,')}`,
    ];
    const [refusal] = role.problems;
    if (refusal !== undefined) {
      const error = await renderError(...sets);
      expect(error).toContain(
        refusal
          .replace('OTEL_EXPORTER_OTLP_PROTOCOL', 'config.tracing.protocol')
          .replace('the endpoint', 'config.tracing.endpoint'),
      );
      return;
    }
    const env = otelOf(envOf(container(deployment(await render(...sets), 'worker'))));
    expect(env.OTEL_EXPORTER_OTLP_PROTOCOL).toBe(
      protocol.trim() ? role.config?.protocol : undefined,
    );
    // What the pods get, the roles read to the same protocol.
    expect(tracingSettings('worker', env).config?.protocol).toBe(role.config?.protocol);
  });

  // With grpc the endpoint is the collector's gRPC address as the roles read it: as it
  // is, nothing added; a path (or query) fails the render as it stops the roles.
  it.each([
    'http://otel-collector.observability:4317',
    'https://collector.example:4317/',
    'http://otel-collector.observability:4318/v1/traces',
    'http://collector:4317?tenant',
    'http://otel-collector.observability',
    'http://otel-collector.observability:80',
    'https://collector.example',
  ])('grpc to the endpoint %j as the roles read it', async (endpoint) => {
    const role = tracingSettings('worker', {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    });
    const sets = [
      'config.tracing.enabled=true',
      `config.tracing.endpoint=${endpoint}`,
      'config.tracing.protocol=GRPC',
    ];
    const [refusal] = role.problems;
    if (refusal !== undefined) {
      expect(await renderError(...sets)).toContain(
        refusal.replace('OTEL_EXPORTER_OTLP_ENDPOINT', 'config.tracing.endpoint'),
      );
      return;
    }
    const env = otelOf(envOf(container(deployment(await render(...sets), 'worker'))));
    expect(env).toMatchObject({
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    });
    expect(tracingSettings('worker', env)).toEqual(role);
  });

  it('protocol: only with otlp; console alone sets none and refuses none', async () => {
    expect(
      await render(
        'config.tracing.enabled=true',
        'config.tracing.exporters={console}',
        'config.tracing.protocol=grpc',
      ).then((objects) => otelOf(envOf(container(deployment(objects, 'gateway'))))),
    ).toEqual({ OTEL_TRACES_EXPORTER: 'console', OTEL_TRACES_SAMPLER: 'parentbased_always_on' });
  });

  it('exporters in any case, blanks around them, as the roles read OTEL_TRACES_EXPORTER', async () => {
    const objects = await render(
      'config.tracing.enabled=true',
      'config.tracing.endpoint=http://otel-collector.observability:4318',
      // --set keeps the blank after a comma; the roles trim it.
      'config.tracing.exporters={OTLP, Console,none,otlp}',
    );
    for (const role of ['gateway', 'worker'] as const)
      expect(otelOf(envOf(container(deployment(objects, role)))), role).toMatchObject({
        OTEL_TRACES_EXPORTER: 'otlp,console',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability:4318',
      });
  });

  it('refuses a name the schema folds to one it knows but lower does not (a long s): the roles would refuse it', async () => {
    // (?i:console) matches U+017F, which lower keeps: rendered, OTEL_TRACES_EXPORTER would
    // be "con\u017Fole", an unknown exporter to the roles, which would not start.
    expect(
      await renderError('config.tracing.enabled=true', 'config.tracing.exporters={con\u017Fole}'),
    ).toContain('is not otlp, console or none');
  });

  it('refuses tracing on with nothing to export (none, or no exporter at all)', async () => {
    const refusal =
      'config.tracing.enabled needs otlp or console in config.tracing.exporters: none (or nothing) exports no span; set config.tracing.enabled=false for tracing off';
    for (const exporters of ['{none}', '{None,NONE}', '{}'])
      expect(
        await renderError('config.tracing.enabled=true', `config.tracing.exporters=${exporters}`),
        exporters,
      ).toContain(refusal);
    // Off, the list says nothing: no refusal, no variable.
    const off = await render('config.tracing.exporters={none}');
    expect(otelOf(envOf(container(deployment(off, 'gateway'))))).toEqual({});
  });

  it('refuses tracing without an endpoint, an unknown sampler, a ratio over 1', async () => {
    expect(await renderError('config.tracing.enabled=true')).toContain(
      'config.tracing.enabled needs config.tracing.endpoint',
    );
    expect(await renderError('config.tracing.sampler=jaeger_remote')).toContain('sampler');
    expect(await renderError('config.tracing.samplerRatio=1.5')).toContain('samplerRatio');
    expect(await renderError('config.tracing.endpoint=collector:4318')).toContain('endpoint');
  });
});
