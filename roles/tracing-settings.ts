// Distributed tracing's settings, from the OpenTelemetry SDK's standard environment
// variables (ADR 0040): off unless OTEL_TRACES_EXPORTER lists otlp or console (spans as
// log lines). Checked at start like every HOOKGATE_* setting: a value hookgate would not
// use as written is a problem (exit 2), not a silent fallback. Only the dev, gateway and
// worker roles trace. Enum values (exporter, sampler, protocol) are read without regard
// to case, as the SDK environment variables' specification asks ("Enum values SHOULD be
// interpreted in a case-insensitive manner").
import {
  DEFAULT_OTLP_PROTOCOL,
  readOtlpProtocol,
  readTraceExporters,
  TRACE_SAMPLERS,
  type OtlpProtocol,
  type TraceSampler,
  type TracingConfig,
} from '../runtime/tracing/tracing.ts';

export const TRACING_USAGE = `  OTEL_TRACES_EXPORTER       dev, gateway, worker: otlp turns distributed tracing on (spans
                             of requests, executions, nodes, outbound calls), console
                             writes the spans as log lines; a list takes both (otlp,console);
                             none or unset: off, and no OpenTelemetry code is loaded
                             (docs/tracing.md)
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the OTLP/HTTP traces URL (else
                             OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; default
                             http://localhost:4318/v1/traces); with grpc the collector's
                             address, no path (default http://localhost:4317)
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL  http/protobuf (default) or http/json, both to the
                             OTLP/HTTP port, or grpc (else OTEL_EXPORTER_OTLP_PROTOCOL)
  OTEL_EXPORTER_OTLP_INSECURE  grpc to an endpoint without a scheme (collector:4317):
                             true is plaintext; default false (TLS)
  OTEL_SERVICE_NAME          service.name (default hookgate-<role>); OTEL_RESOURCE_ATTRIBUTES too
  OTEL_TRACES_SAMPLER        always_on, always_off, traceidratio, parentbased_always_on
                             (default), parentbased_always_off, parentbased_traceidratio;
                             OTEL_TRACES_SAMPLER_ARG: the ratio, 0 to 1 (default 1)
  OTEL_BSP_MAX_QUEUE_SIZE    spans waiting for export at most (default 2048; more are
                             dropped); OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512),
                             OTEL_BSP_SCHEDULE_DELAY (5000 ms), OTEL_BSP_EXPORT_TIMEOUT (30000 ms)
  OTEL_SDK_DISABLED          true: tracing off whatever the above say
`;

/** The roles that make spans. */
const TRACING_ROLES = new Set(['dev', 'gateway', 'worker']);
const DEFAULT_ENDPOINT = 'http://localhost:4318/v1/traces';
/** OTLP/gRPC's default, the specification's: a collector's gRPC port on this host, plaintext. */
const DEFAULT_GRPC_ENDPOINT = 'http://localhost:4317';

/**
 * At shutdown, what is buffered gets this long to be exported, at most: inside the
 * grace period after a worker's 20 s for its runs (roles/lifecycle.ts).
 */
export const TRACING_SHUTDOWN_DEADLINE_MS = 3_000;

/** The configuration as the settings read it (the role adds its log's hooks). */
export type TracingSettings = Omit<TracingConfig, 'onExportError' | 'logSpan'>;

/** The tracing configuration (undefined: off) and the problems of the variables. */
export function tracingSettings(
  role: string,
  env: NodeJS.ProcessEnv,
): { config: TracingSettings | undefined; problems: string[] } {
  const off = { config: undefined, problems: [] };
  if (!TRACING_ROLES.has(role)) return off;
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return off;
  // A comma-separated list (the specification's "MAY"), each value once; `none` adds
  // no exporter, so it is off when nothing else is listed (runtime/tracing/tracing.ts).
  const { exporters, problem } = readTraceExporters(
    'OTEL_TRACES_EXPORTER',
    env.OTEL_TRACES_EXPORTER,
  );
  if (problem) return { config: undefined, problems: [problem] };
  if (exporters.length === 0) return off;
  const otlp = exporters.includes('otlp');
  const toLog = exporters.includes('console');
  // The OTLP variables only matter to the OTLP exporter: console alone reads none.
  const problems: string[] = [];
  const protocol = otlp ? protocolOf(env, problems) : DEFAULT_OTLP_PROTOCOL;
  const endpoint = !otlp
    ? undefined
    : protocol === 'grpc'
      ? grpcEndpointOf(env, problems)
      : endpointOf(env, problems);
  const sampler = (env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() ||
    'parentbased_always_on') as TraceSampler;
  if (!(TRACE_SAMPLERS as readonly string[]).includes(sampler))
    problems.push(
      `OTEL_TRACES_SAMPLER must be one of ${TRACE_SAMPLERS.join(', ')}, not "${sampler}"`,
    );
  const ratio = ratioOf(sampler, env.OTEL_TRACES_SAMPLER_ARG, problems);
  const serviceName = env.OTEL_SERVICE_NAME;
  if (serviceName !== undefined && serviceName.trim() === '')
    problems.push('OTEL_SERVICE_NAME must not be empty');
  const int = (name: string, fallback: number) => positiveInteger(env, name, fallback, problems);
  const config: TracingSettings = {
    serviceName: serviceName?.trim() || `hookgate-${role}`,
    endpoint,
    protocol,
    console: toLog,
    sampler,
    ratio,
    maxQueueSize: int('OTEL_BSP_MAX_QUEUE_SIZE', 2048),
    maxExportBatchSize: int('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512),
    scheduledDelayMs: int('OTEL_BSP_SCHEDULE_DELAY', 5000),
    exportTimeoutMs: int('OTEL_BSP_EXPORT_TIMEOUT', 30_000),
  };
  if (config.maxExportBatchSize > config.maxQueueSize)
    problems.push(
      `OTEL_BSP_MAX_EXPORT_BATCH_SIZE (${config.maxExportBatchSize}) must not exceed OTEL_BSP_MAX_QUEUE_SIZE (${config.maxQueueSize})`,
    );
  return problems.length > 0 ? { config: undefined, problems } : { config, problems };
}

/**
 * OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else the
 * specification's default (http/protobuf). A blank value is unset, as the SDK
 * environment specification says of empty values. Unknown names are refused, named; the
 * general variable is not read when the signal's own one decides.
 */
function protocolOf(env: NodeJS.ProcessEnv, problems: string[]): OtlpProtocol {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const { protocol, problem } = readOtlpProtocol(name, env[name]);
    if (problem !== undefined) {
      problems.push(problem);
      return DEFAULT_OTLP_PROTOCOL;
    }
    if (protocol !== undefined) return protocol;
  }
  return DEFAULT_OTLP_PROTOCOL;
}

/** The signal's own endpoint as it is, else the base endpoint with /v1/traces. */
function endpointOf(env: NodeJS.ProcessEnv, problems: string[]): string {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const [name, url] = own
    ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', own]
    : base
      ? ['OTEL_EXPORTER_OTLP_ENDPOINT', `${base.replace(/\/+$/, '')}/v1/traces`]
      : ['', DEFAULT_ENDPOINT];
  if (name === '') return url;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
    problems.push(`${name} must be an http:// or https:// URL, not "${own ?? base}"`);
  return url;
}

/** A URL's scheme with `//` (http://, https://, unix://); a gRPC address may have none. */
const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * OTLP/gRPC's endpoint: the signal's own, else the base one, each as it is (the gRPC
 * service's path is fixed: nothing is added, and a path is refused rather than ignored
 * as the exporter would). `http://` is plaintext, `https://` TLS; an address without a
 * scheme (collector:4317) is TLS unless OTEL_EXPORTER_OTLP_(TRACES_)INSECURE is true, as
 * the specification says. Returned as the origin with the scheme that decides, so that
 * the exporter and the start-up log line see one transport.
 */
function grpcEndpointOf(env: NodeJS.ProcessEnv, problems: string[]): string {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const insecure = insecureOf(env, problems);
  const [name, value] = own
    ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', own]
    : base
      ? ['OTEL_EXPORTER_OTLP_ENDPOINT', base]
      : ['', DEFAULT_GRPC_ENDPOINT];
  if (name === '') return value;
  const url = URL.parse(SCHEME.test(value) ? value : `${insecure ? 'http' : 'https'}://${value}`);
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) {
    problems.push(
      `${name} must be an http:// or https:// URL or a host:port for grpc, not "${value}"`,
    );
    return value;
  }
  if (url.pathname !== '/' || url.search || url.hash || url.username || url.password)
    problems.push(
      `${name} must be the collector's address without a path or query for grpc (e.g. http://collector:4317), not "${value}"`,
    );
  // gRPC's default port is 443 whatever the scheme: plaintext without a port (or with
  // 80, which the URL drops) would go to 443.
  else if (url.protocol === 'http:' && url.port === '')
    problems.push(
      `${name} must name the collector's port for plaintext grpc (gRPC's default is 443), e.g. http://collector:4317, not "${value}"`,
    );
  return url.origin;
}

/**
 * OTEL_EXPORTER_OTLP_TRACES_INSECURE, else OTEL_EXPORTER_OTLP_INSECURE: `true` or
 * `false` in any case (blank is unset); false unless set. Checked with grpc, used only
 * for an endpoint without a scheme (the specification's rule): `http://` and `https://`
 * say it themselves.
 */
function insecureOf(env: NodeJS.ProcessEnv, problems: string[]): boolean {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_INSECURE', 'OTEL_EXPORTER_OTLP_INSECURE']) {
    const value = env[name]?.trim().toLowerCase();
    if (value === undefined || value === '') continue;
    if (value === 'true' || value === 'false') return value === 'true';
    problems.push(`${name} must be true or false, not "${env[name]}"`);
    return false;
  }
  return false;
}

const RATIO_SAMPLERS = new Set<string>(['traceidratio', 'parentbased_traceidratio']);

/** OTEL_TRACES_SAMPLER_ARG of a ratio sampler: 0 to 1 (other samplers take none: ignored). */
function ratioOf(sampler: string, raw: string | undefined, problems: string[]): number {
  if (!RATIO_SAMPLERS.has(sampler) || raw === undefined || raw.trim() === '') return 1;
  const ratio = Number(raw);
  if (!/^\s*(\d+(\.\d*)?|\.\d+)\s*$/.test(raw) || ratio > 1) {
    problems.push(
      `OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 for ${sampler}, not "${raw}"`,
    );
    return 1;
  }
  return ratio;
}

function positiveInteger(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  problems: string[],
): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (/^\s*\d+\s*$/.test(raw) && Number(raw) > 0) return Number(raw);
  problems.push(`${name} must be a positive integer, not "${raw}"`);
  return fallback;
}
