// Tracing as a user turns it on: `hookgate dev` as a process, configured by the standard
// OpenTelemetry variables only. Off (the default), the process loads none of the SDK's
// modules, serving requests included; on, it loads the SDK and exports spans
// (flushed at SIGTERM) to the OTLP/HTTP endpoint, or over gRPC (TLS, the headers as
// metadata), loading only that protocol's exporter; bad values stop it at start (exit 2).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificate } from '../../testing/kube-apiserver/tls.ts';
import { eventually } from '../support/eventually.ts';
import { toYaml, trigger, workflow } from '../support/manifests.ts';
import { startOtlpGrpcReceiver } from '../support/otlp-grpc-receiver.ts';
import { startOtlpReceiver, SPAN_KIND, type OtlpReceiver } from '../support/otlp-receiver.ts';
import { freePortRun } from '../support/ports.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const PRELOAD = join(ROOT, 'test', 'support', 'record-loads.ts');
const OTEL_ENV = Object.fromEntries(
  Object.keys(process.env)
    .filter((name) => name.startsWith('OTEL_'))
    .map((name) => [name, undefined]),
);

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hookgate-tracing-'));
  await writeFile(
    join(dir, 'echo.yaml'),
    toYaml(
      workflow('echo'),
      trigger('echo', { workflowRef: { name: 'echo' }, response: { mode: 'waitForCompletion' } }),
    ),
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * Runs `hookgate dev` until a request was served, then SIGTERM; the modules it resolved
 * and what it wrote to stdout (a pipe: JSON log lines).
 */
async function serveOnce(
  env: Record<string, string>,
): Promise<{ loads: string[]; code: number | null; out: string }> {
  const port = await freePortRun(2);
  const loads = join(dir, `loads-${port}.txt`);
  await writeFile(loads, '');
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--import',
      PRELOAD,
      'roles/cli.ts',
      'dev',
      '--dir',
      dir,
      '--port',
      String(port),
      '--admin-port',
      String(port + 1),
    ],
    {
      cwd: ROOT,
      env: { ...process.env, ...OTEL_ENV, LOG_LEVEL: 'warn', HOOKGATE_TEST_LOADS: loads, ...env },
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  try {
    await eventually(async () => {
      const res = await fetch(`http://127.0.0.1:${port}/webhook/default_production_echo/default`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"n":1}',
      });
      expect(res.status).toBe(200);
    }, 20_000);
  } finally {
    child.kill('SIGTERM');
  }
  const code = await exited;
  return { loads: (await readFile(loads, 'utf8')).split('\n').filter(Boolean), code, out };
}

/**
 * The OpenTelemetry SDK's modules a process resolved. Not @opentelemetry/api: prom-client
 * loads it in every process (its process CPU metric reads the active span for exemplars;
 * with no SDK registered it is the no-op API).
 */
const otel = (loads: string[]) =>
  loads.filter((url) => url.includes('/@opentelemetry/') && !url.includes('/@opentelemetry/api/'));

/** The OTLP exporter packages a process resolved (each loads only for its protocol). */
const exporterPackages = (loads: string[]) => [
  ...new Set(loads.flatMap((url) => /\/@opentelemetry\/(exporter-[^/]+)\//.exec(url)?.[1] ?? [])),
];

describe('hookgate dev with the OpenTelemetry variables', () => {
  let otlp: OtlpReceiver;
  beforeAll(async () => {
    otlp = await startOtlpReceiver();
  });
  afterAll(() => otlp?.close());

  it('off (no OTEL_TRACES_EXPORTER): serves without loading any module of the SDK', async () => {
    const { loads, code } = await serveOnce({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
    expect(code).toBe(0);
    // The recorder worked: the process resolved the request path's modules.
    expect(loads.some((url) => url.endsWith('/runtime/gateway/webhook-routes.ts'))).toBe(true);
    expect(otel(loads)).toEqual([]);
    expect(loads.some((url) => url.endsWith('/runtime/tracing/otel.ts'))).toBe(false);
    expect(otlp.requests).toEqual([]);
  }, 40_000);

  it('OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true are off too', async () => {
    for (const env of [
      { OTEL_TRACES_EXPORTER: 'none' } as Record<string, string>,
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' },
    ]) {
      const { loads } = await serveOnce({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
      expect(otel(loads)).toEqual([]);
    }
    expect(otlp.requests).toEqual([]);
  }, 60_000);

  it('on (OTEL_TRACES_EXPORTER=otlp): the SDK is loaded and the spans reach the endpoint by the exit, in protobuf by default', async () => {
    const before = otlp.requests.length;
    const { loads, code } = await serveOnce({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      // Nothing exported before the SIGTERM: the shutdown's flush must send it.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    });
    expect(code).toBe(0);
    expect(otel(loads).length).toBeGreaterThan(0);
    const server = otlp.spans.find((s) => s.kind === SPAN_KIND.server);
    expect(server?.resource).toMatchObject({
      'service.name': 'hookgate-dev',
      'deployment.environment.name': 'test',
    });
    expect(server?.attributes['http.route']).toBe('/webhook/default_production_echo/default');
    const execution = otlp.spans.find((s) => s.name === 'execute default_production_echo');
    expect(execution?.parentSpanId).toBe(server?.spanId);
    // No protocol set: the specification's default, http/protobuf, with its own exporter
    // package; the JSON one is not loaded.
    expect(otlp.requests.slice(before).length).toBeGreaterThan(0);
    expect(otlp.requests.slice(before).every((type) => type === 'application/x-protobuf')).toBe(
      true,
    );
    expect(exporterPackages(loads)).toEqual(['exporter-trace-otlp-proto']);
  }, 40_000);

  it('OTEL_EXPORTER_OTLP_PROTOCOL=http/json: the spans in JSON, by the JSON exporter alone', async () => {
    const before = otlp.requests.length;
    const spans = otlp.spans.length;
    const { loads, code } = await serveOnce({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: ' HTTP/JSON ',
    });
    expect(code).toBe(0);
    expect(otlp.requests.slice(before).length).toBeGreaterThan(0);
    expect(otlp.requests.slice(before).every((type) => type === 'application/json')).toBe(true);
    expect(otlp.spans.slice(spans).map((s) => s.name)).toContain('execute default_production_echo');
    expect(exporterPackages(loads)).toEqual(['exporter-trace-otlp-http']);
  }, 40_000);

  it('OTEL_EXPORTER_OTLP_PROTOCOL=grpc: over TLS to an address without a scheme, the headers as metadata, by the gRPC exporter alone', async () => {
    const tls = await selfSignedCertificate();
    const certificate = join(dir, 'collector.pem');
    await writeFile(certificate, tls.cert);
    const grpc = await startOtlpGrpcReceiver({ tls });
    const before = otlp.requests.length;
    try {
      const { loads, code } = await serveOnce({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        // No scheme and no OTEL_EXPORTER_OTLP_INSECURE: TLS, as the specification says,
        // trusting the collector's certificate (read by the exporter).
        OTEL_EXPORTER_OTLP_ENDPOINT: grpc.address,
        OTEL_EXPORTER_OTLP_CERTIFICATE: certificate,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k-123,x-tenant=acme',
        // Nothing exported before the SIGTERM: the shutdown's flush must send it.
        OTEL_BSP_SCHEDULE_DELAY: '600000',
      });
      expect(code).toBe(0);
      const server = grpc.spans.find((s) => s.kind === SPAN_KIND.server);
      expect(server?.resource).toMatchObject({ 'service.name': 'hookgate-dev' });
      expect(server?.attributes['http.route']).toBe('/webhook/default_production_echo/default');
      const execution = grpc.spans.find((s) => s.name === 'execute default_production_echo');
      expect(execution?.parentSpanId).toBe(server?.spanId);
      expect(grpc.metadata.length).toBeGreaterThan(0);
      for (const metadata of grpc.metadata)
        expect(metadata).toMatchObject({ 'x-api-key': 'k-123', 'x-tenant': 'acme' });
      expect(exporterPackages(loads)).toEqual(['exporter-trace-otlp-grpc']);
      expect(otlp.requests.length).toBe(before);
    } finally {
      await grpc.close();
    }
  }, 60_000);

  it('OTEL_TRACES_EXPORTER=console: each span is a JSON log line of the process, whatever LOG_LEVEL', async () => {
    const before = otlp.requests.length;
    const { out, code } = await serveOnce({
      OTEL_TRACES_EXPORTER: 'console',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      LOG_LEVEL: 'warn',
    });
    expect(code).toBe(0);
    // Every line is whole JSON: the spans go through the log's destination, not around it.
    const lines = out
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const spans = lines.filter((line) => line.msg === 'tracing: span');
    expect(spans.length).toBeGreaterThanOrEqual(3);
    expect(spans.every((line) => line.level === 30 && line.role === 'dev')).toBe(true);
    const server = spans
      .map((line) => line.span as { kind: string; service: string; attributes: object })
      .find((span) => span.kind === 'SERVER');
    expect(server?.service).toBe('hookgate-dev');
    expect(server?.attributes).toMatchObject({
      'http.route': '/webhook/default_production_echo/default',
    });
    // LOG_LEVEL=warn still hides hookgate's own info lines.
    expect(lines.filter((line) => line.level === 30 && line.msg !== 'tracing: span')).toEqual([]);
    expect(otlp.requests.length).toBe(before);
  }, 40_000);
});

/** `hookgate <role>` with these variables: its exit code and what it printed. */
function start(
  role: string,
  env: Record<string, string>,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['roles/cli.ts', role, '--port', '0', '--admin-port', '0'],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          ...OTEL_ENV,
          LOG_LEVEL: 'warn',
          REDIS_URL: 'redis://127.0.0.1:1',
          ...env,
        },
      },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

describe('bad OpenTelemetry values stop the process at start (exit 2)', () => {
  it.each([
    [
      { OTEL_TRACES_EXPORTER: 'jaeger' },
      'OTEL_TRACES_EXPORTER must list otlp, console or none (hookgate exports OTLP, or spans as log lines), not "jaeger"',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp,zipkin' },
      'OTEL_TRACES_EXPORTER must list otlp, console or none (hookgate exports OTLP, or spans as log lines), not "zipkin"',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/thrift' },
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf, http/json or grpc, not "http/thrift"',
    ],
    [
      {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces',
      },
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be the collector\'s address without a path or query for grpc (e.g. http://collector:4317), not "http://collector:4318/v1/traces"',
    ],
    [
      {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_INSECURE: 'yes',
      },
      'OTEL_EXPORTER_OTLP_INSECURE must be true or false, not "yes"',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, not "collector:4318"',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x/v1/traces' },
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: 'jaeger_remote' },
      'OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, not "jaeger_remote"',
    ],
    [
      {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_TRACES_SAMPLER: 'traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '1.5',
      },
      'OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 for traceidratio, not "1.5"',
    ],
    [
      {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: 'half',
      },
      'OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_BSP_MAX_QUEUE_SIZE: '0' },
      'OTEL_BSP_MAX_QUEUE_SIZE must be a positive integer, not "0"',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_BSP_MAX_QUEUE_SIZE: '100' },
      'OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512) must not exceed OTEL_BSP_MAX_QUEUE_SIZE (100)',
    ],
    [
      { OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: ' ' },
      'OTEL_SERVICE_NAME must not be empty',
    ],
  ])('%j', async (env, message) => {
    const { code, out } = await start('worker', env);
    expect(code).toBe(2);
    expect(out).toContain(message);
    expect(out).toContain('Usage: hookgate');
  });
});
