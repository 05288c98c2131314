// The settings of a `hookgate` process, from its arguments and environment, checked
// before anything starts: bad input exits 2 with every problem and the usage.
import {
  TRACE_CONTEXT_POLICIES,
  type TraceContextPolicy,
} from '../runtime/engine/outbound/trace-context.ts';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { baseUrlProblem } from '../api/identity.ts';
import { redactedRedisUrl, redisUrlProblem } from '../api/redis-url.ts';
import { parseTrustedProxies } from '../runtime/gateway/security/https.ts';
import type { AnalyticsBackendConfig } from '../runtime/analytics/wiring.ts';
import type { OutboundGuardOptions } from '../runtime/engine/outbound/guard.ts';
import { ANALYTICS_USAGE, analyticsSettings } from './analytics-settings.ts';
import { BUDGET_USAGE, budgetSettings, type Budgets } from './budget-settings.ts';
import { CALLBACK_USAGE, callbackSettings } from './callback-settings.ts';
import { LOG_LEVELS, type LogLevel } from './logger.ts';
import { LOG_OUTPUT_USAGE, logOutputSettings, type LogOutputSettings } from './log-settings.ts';
import { MAX_QUEUE_SHARDS } from '../runtime/engine/execution-keys.ts';
import { expressionSettingsFromEnv } from '../runtime/engine/expressions.ts';
import { outboundSettings } from './outbound-settings.ts';
import { TRACING_USAGE, tracingSettings, type TracingSettings } from './tracing-settings.ts';
import type { ReplicaAcksOptions } from '../runtime/engine/replica-acks.ts';
import {
  isClusterUrl,
  parseClusterUrl,
  REDIS_CLIENT_DEFAULTS,
  type RedisClientSettings,
} from './redis.ts';

export const ROLES = ['dev', 'operator', 'gateway', 'worker'] as const;
export type RoleName = (typeof ROLES)[number];

const USAGE = `Usage: hookgate <role> [options]

Roles:
  dev        every role in one process (default)
  operator   the control plane against a Kubernetes API, with leader election
  gateway    serves the routes an operator wrote to Redis (needs REDIS_URL)
  worker     runs the executions gateways queue in Redis (needs REDIS_URL)

Commands (hookgate help; docs/cli.md): validate, get, test, events, replay, openapi,
crds, completion, version

Options:
  --source <dir|kubernetes>  dev: where resources come from (env HOOKGATE_SOURCE, default dir)
  --dir <path>               dev: manifest directory (env HOOKGATE_MANIFESTS, default ./examples)
  --namespace <ns>           kubernetes: watch one namespace (env HOOKGATE_NAMESPACE, default all)
  --port <n>                 listen port (env PORT, default 8080)
  --host <addr>              listen address (env HOST, default 127.0.0.1)
  --base-url <url>           public base URL for status.url (env HOOKGATE_BASE_URL,
                             default http://localhost:<port>)
  --admin-port <n>           dev, gateway: the admin listener (read API, test requests,
                             dashboard, live streams; env ADMIN_PORT, default 8081)

Environment:
  REDIS_URL                  shared stores (routes, registry, rate limits) in Redis;
                             in memory when unset (the gateway role needs it). A Redis
                             Cluster: redis+cluster://[:password@]host:port,host:port
                             (seed nodes; docs/redis-layout.md)
  KUBECONFIG                 kubeconfig for the kubernetes source and the operator
                             (in a pod: the service account)
  HOOKGATE_LEASE_NAMESPACE   operator: namespace of its Lease (else POD_NAMESPACE, else default)
  HOOKGATE_LEASE_NAME        operator: name of its Lease (default hookgate-operator)
  HOOKGATE_SECRET_NAMESPACES operator, dev --source kubernetes: comma-separated namespaces
                             whose labelled Secrets are watched, each on its own (for
                             per-namespace RBAC); default: labelled Secrets cluster-wide
  HOOKGATE_LEADER_ELECTION   operator: false to run without leader election (one replica)
  METRICS_PORT               port of /metrics, /healthz, /readyz (operator, worker: instead
                             of --port; gateway: a second listener)
  HOOKGATE_EXECUTIONS        gateway: queue (default; run by worker replicas) or inline
                             (run in the gateway process)
  HOOKGATE_MAX_QUEUED        gateway, queue mode: executions waiting at most before 503
                             (default 100000)
  HOOKGATE_QUEUE_SHARDS      gateway (queue mode), worker: shards of the execution queue
                             (1 to ${MAX_QUEUE_SHARDS}, default 1; the same on every gateway and
                             worker; change it only with the queue drained). On a Redis
                             Cluster each shard is one hash slot: at least one per master,
                             about 4 per master to even them out (docs/redis-layout.md)
  HOOKGATE_QUEUE_ACK_REPLICAS  gateway, queue mode: answer for a queued execution only
                             once this many Redis replicas have it (WAIT; default 0: the
                             master's answer). A replica that does not confirm within
                             HOOKGATE_QUEUE_ACK_TIMEOUT_MS (default 250; at most the command
                             timeout less the write window and 100 ms) turns the 202
                             into 503 store-unavailable; a master with fewer replicas is
                             logged at start (docs/availability.md)
  HOOKGATE_WORKER_CONCURRENCY  worker: executions run at once (default 32)
  HOOKGATE_WORKER_CLAIM_IDLE_MS  worker: a job whose worker stopped renewing it for this
                             long is run again by another worker (default 60000)
  HOOKGATE_REDIS_COMMAND_TIMEOUT_MS  every role: longest wait for one Redis command
                             (default 1000); then the request answers 503 store-unavailable
  HOOKGATE_REDIS_BREAKER_FAILURES  gateway, dev: request-path Redis commands failing in a
                             row that open the circuit breaker (default 5)
  HOOKGATE_REDIS_BREAKER_OPEN_MS  gateway, dev: how long the open breaker refuses Redis
                             commands before it probes with a PING (default 1000)
  HOOKGATE_REDIS_WRITE_WINDOW_MS  gateway, dev: a request-path Redis command that comes
                             within this long of another waits, so that they leave in
                             one write (default 1; 0 writes each at once; at most 50,
                             and below HOOKGATE_REDIS_COMMAND_TIMEOUT_MS)
  HOOKGATE_TRUSTED_PROXIES   comma-separated CIDRs whose X-Forwarded-Proto is trusted
  HOOKGATE_TRACE_CONTEXT     dev, gateway: whose W3C traceparent/tracestate http nodes and
                             callbacks pass on: authenticated (default: callers of endpoints
                             with auth), all, off (docs/workflows.md)
  HOOKGATE_EXPRESSION_ISOLATION  dev, gateway, worker: where JSONata expressions that are
                             not plain field mappings evaluate: inline (default: in this
                             process) or worker (child processes, each with a heap limit
                             and a hard deadline: a runaway expression fails alone;
                             ADR 0048, docs/workflows.md)
  HOOKGATE_EXPRESSION_WORKERS  with worker: processes in the pool (default: the CPUs
                             this process may use)
  HOOKGATE_EXPRESSION_WORKER_MEMORY_MB  with worker: each one's heap (default 64)
  HOOKGATE_OUTBOUND_ALLOW    dev, gateway, worker: comma-separated destinations http nodes
                             and callbacks may reach although not public: CIDRs or IPs
                             (10.0.0.0/8), host names, *.suffix wildcards
                             (*.svc.cluster.local; private addresses only), host:port.
                             Default: public addresses only (docs/security.md)
  HOOKGATE_OUTBOUND_DENY     dev, gateway, worker: comma-separated destinations refused even
                             when public or allowed (same forms)
  HOOKGATE_OUTBOUND_NAMESPACES  dev, gateway, worker: JSON object of per-namespace
                             narrowings, {"<namespace>": {"allow": [...], "deny": [...]}}
  HOOKGATE_GATEWAY_TTL_MS    gateway, dev: the report of what this gateway serves counts
                             this long unless refreshed (every third; default 15000); a
                             gateway that dies stops counting for Deployed after it
  ADMIN_HOST                 admin listener address (dev: default 127.0.0.1; gateway:
                             default --host)
  HOOKGATE_ADMIN_AUTH        admin authentication: kubernetes (TokenReview and
                             SubjectAccessReview), token (HOOKGATE_ADMIN_TOKEN_FILE) or
                             none. Default: none for dev on loopback; kubernetes for a
                             gateway in a pod; a gateway elsewhere must choose
  HOOKGATE_ADMIN_TOKEN_FILE  file holding the admin bearer token (auth token)
  LOG_LEVEL                  fatal | error | warn | info | debug | trace | silent
                             (default info; debug adds one line per request). Logs are
                             JSON lines, human-readable when stdout is a terminal
${LOG_OUTPUT_USAGE}${TRACING_USAGE}${CALLBACK_USAGE}${ANALYTICS_USAGE}${BUDGET_USAGE}`;

export interface Settings {
  role: RoleName;
  source: string;
  dir: string;
  namespace: string | undefined;
  /** Namespaces whose Secrets are watched one by one; undefined: cluster-wide. */
  secretNamespaces: string[] | undefined;
  port: number;
  host: string;
  baseUrl: string;
  logLevel: LogLevel;
  /** How log lines wait for stdout (HOOKGATE_LOG_BUFFER_BYTES, _STALL_MS, _SYNC_FLUSH_MS). */
  logOutput: LogOutputSettings;
  /** METRICS_PORT: probes and metrics on a listener of their own. */
  metricsPort: number | undefined;
  /** Where /api/analytics reads from (HOOKGATE_ANALYTICS, HOOKGATE_PROMETHEUS_*). */
  analytics: AnalyticsBackendConfig;
  /** Byte budgets and record lifetime (HOOKGATE_*_BYTES, HOOKGATE_EXECUTION_TTL_MS). */
  budgets: Budgets;
  /** The admin listener (dev, gateway): ADMIN_PORT / --admin-port, ADMIN_HOST. */
  adminPort: number;
  adminHost: string;
  /** HOOKGATE_ADMIN_AUTH, or its default (see adminAuthOf). */
  adminAuth: AdminAuthMode;
  adminTokenFile: string | undefined;
  /** The outbound policy (HOOKGATE_OUTBOUND_ALLOW, _DENY, _NAMESPACES). */
  outbound: Pick<OutboundGuardOptions, 'allow' | 'deny' | 'namespaces'>;
  /** Redis client timeouts and the circuit breaker (HOOKGATE_REDIS_*). */
  redis: RedisClientSettings;
  /** HOOKGATE_QUEUE_SHARDS: shards of the execution queue (runtime/engine/execution-keys.ts). */
  queueShards: number;
  /** HOOKGATE_QUEUE_ACK_REPLICAS and _TIMEOUT_MS; undefined: 0 replicas (off). */
  queueAcks: ReplicaAcksOptions | undefined;
  /** HOOKGATE_TRACE_CONTEXT: whose trace context executions pass on. */
  traceContext: TraceContextPolicy;
  /** HOOKGATE_CALLBACK_SECRET_FILE: the callback signing secrets; undefined: random. */
  callbackSecrets: string[] | undefined;
  /** Distributed tracing (OTEL_TRACES_EXPORTER otlp/console, the OTEL_* variables); undefined: off. */
  tracing: TracingSettings | undefined;
}

export const ADMIN_AUTH_MODES = ['kubernetes', 'token', 'none'] as const;
export type AdminAuthMode = (typeof ADMIN_AUTH_MODES)[number];

/** Where a pod's service account token is mounted: we run in a cluster. */
export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/**
 * The admin authentication: as set, else `none` for the dev role on a loopback address,
 * `kubernetes` for a gateway in a pod; otherwise no default (a problem to report).
 */
function adminAuthOf(role: string, adminHost: string): AdminAuthMode | undefined {
  const raw = process.env.HOOKGATE_ADMIN_AUTH;
  if (raw !== undefined) return raw as AdminAuthMode;
  if (role === 'dev' && LOOPBACK.test(adminHost)) return 'none';
  if (role === 'gateway' && existsSync(SERVICE_ACCOUNT_TOKEN)) return 'kubernetes';
  return undefined;
}

/** The settings from argv and the environment; undefined (exit code set) on --help or bad input. */
export function settings(argv: string[] = process.argv.slice(2)): Settings | undefined {
  const args = argsOf(argv);
  if (!args) return undefined;
  const { positionals, values } = args;
  const role = (positionals[0] ?? 'dev') as RoleName;
  const port = portNumber(values.port ?? process.env.PORT ?? '8080');
  const source = values.source ?? process.env.HOOKGATE_SOURCE ?? 'dir';
  const host = values.host ?? process.env.HOST ?? '127.0.0.1';
  const { baseUrl, baseUrlProblems } = baseUrlOf(values['base-url'], port);
  const admin = adminSettings(role, port, host, values['admin-port']);
  const analytics = analyticsSettings();
  const budgets = budgetSettings();
  const secretNamespaces = listOf(process.env.HOOKGATE_SECRET_NAMESPACES);
  const outbound = outboundSettings(process.env);
  const callbacks = callbackSettings(process.env);
  const logOutput = logOutputSettings(process.env);
  const tracing = tracingSettings(role, process.env);
  const problems = [
    ...outbound.problems,
    ...callbacks.problems,
    ...logOutput.problems,
    ...problemsOf(role, port, source, values.port ?? process.env.PORT),
    ...analytics.problems,
    ...budgets.problems,
    ...admin.problems,
    ...baseUrlProblems,
    ...secretNamespaceProblems(secretNamespaces),
    ...traceContextProblems(process.env.HOOKGATE_TRACE_CONTEXT),
    ...expressionProblems(process.env),
    ...tracing.problems,
  ];
  if (problems.length > 0 || !analytics.config) {
    console.error(`hookgate: ${problems.join('; ')}\n\n${USAGE}`);
    process.exitCode = 2;
    return undefined;
  }
  return {
    role,
    source,
    dir: resolve(values.dir ?? process.env.HOOKGATE_MANIFESTS ?? 'examples'),
    namespace: values.namespace ?? process.env.HOOKGATE_NAMESPACE,
    secretNamespaces,
    port,
    host,
    baseUrl,
    logLevel: (process.env.LOG_LEVEL ?? 'info') as LogLevel,
    logOutput: logOutput.settings,
    metricsPort: process.env.METRICS_PORT ? portNumber(process.env.METRICS_PORT) : undefined,
    analytics: analytics.config,
    budgets: budgets.budgets,
    ...admin.settings,
    outbound: outbound.options,
    redis: redisClientSettings(),
    queueShards: queueShards(),
    queueAcks: queueAcks(),
    traceContext: traceContextOf(process.env.HOOKGATE_TRACE_CONTEXT),
    callbackSecrets: callbacks.secrets,
    tracing: tracing.config,
  };
}

/** HOOKGATE_TRACE_CONTEXT, checked by traceContextProblems first. */
function traceContextOf(raw: string | undefined): TraceContextPolicy {
  return (raw ?? 'authenticated') as TraceContextPolicy;
}

/** HOOKGATE_EXPRESSION_* (ADR 0048), checked at start rather than at the first execution. */
function expressionProblems(env: NodeJS.ProcessEnv): string[] {
  try {
    expressionSettingsFromEnv(env);
    return [];
  } catch (error) {
    return [error instanceof Error ? error.message : String(error)];
  }
}

function traceContextProblems(raw: string | undefined): string[] {
  if (raw === undefined || (TRACE_CONTEXT_POLICIES as readonly string[]).includes(raw)) return [];
  return [`invalid HOOKGATE_TRACE_CONTEXT "${raw}" (${TRACE_CONTEXT_POLICIES.join(', ')})`];
}

const OPTIONS = {
  source: { type: 'string' },
  dir: { type: 'string' },
  namespace: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  'base-url': { type: 'string' },
  'admin-port': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * The parsed arguments; undefined after printing the usage, for --help or for what
 * parseArgs refuses (an unknown option, a missing value: it throws, and a stack trace
 * with exit code 1 is no way to say "bad usage").
 */
function argsOf(argv: string[]) {
  try {
    const args = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
    if (!args.values.help) return args;
    console.log(USAGE);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!(err instanceof TypeError && code?.startsWith('ERR_PARSE_ARGS_'))) throw err;
    console.error(`hookgate: ${err.message}\n\n${USAGE}`);
    process.exitCode = 2;
  }
  return undefined;
}

type AdminSettings = Pick<Settings, 'adminPort' | 'adminHost' | 'adminAuth' | 'adminTokenFile'>;

function adminSettings(
  role: string,
  port: number,
  host: string,
  flag: string | undefined,
): { settings: AdminSettings; problems: string[] } {
  const rawAdminPort = flag ?? process.env.ADMIN_PORT;
  const adminPort = portNumber(rawAdminPort ?? '8081');
  const adminHost = process.env.ADMIN_HOST ?? (role === 'dev' ? '127.0.0.1' : host);
  const adminAuth = adminAuthOf(role, adminHost);
  return {
    settings: {
      adminPort,
      adminHost,
      adminAuth: adminAuth ?? 'none',
      adminTokenFile: process.env.HOOKGATE_ADMIN_TOKEN_FILE,
    },
    problems: adminProblems(role, adminPort, rawAdminPort, port, adminHost, adminAuth),
  };
}

function adminProblems(
  role: string,
  adminPort: number,
  rawAdminPort: string | undefined,
  port: number,
  adminHost: string,
  auth: AdminAuthMode | undefined,
): string[] {
  if (role !== 'dev' && role !== 'gateway') return [];
  const problems: string[] = [];
  if (!isPort(adminPort)) problems.push(`invalid admin port "${rawAdminPort}"`);
  else if (adminPort !== 0 && adminPort === port)
    problems.push(`the admin port must differ from the webhook port (${port})`);
  const raw = process.env.HOOKGATE_ADMIN_AUTH;
  if (raw !== undefined && !(ADMIN_AUTH_MODES as readonly string[]).includes(raw))
    problems.push(
      `HOOKGATE_ADMIN_AUTH must be one of ${ADMIN_AUTH_MODES.join(', ')}, not "${raw}"`,
    );
  else if (auth === undefined)
    problems.push(
      `set HOOKGATE_ADMIN_AUTH (kubernetes, token or none): the admin listener on ${adminHost} ` +
        'would otherwise be open',
    );
  if (auth === 'token' && !process.env.HOOKGATE_ADMIN_TOKEN_FILE)
    problems.push('HOOKGATE_ADMIN_AUTH=token needs HOOKGATE_ADMIN_TOKEN_FILE');
  return problems;
}

/**
 * REDIS_URL as the client reads it (api/redis-url.ts); a cluster's is checked by
 * clusterProblems. Said without its password.
 */
export function redisUrlProblems(url: string | undefined): string[] {
  if (url === undefined || isClusterUrl(url)) return [];
  const why = redisUrlProblem(url);
  return why === undefined ? [] : [`REDIS_URL ${JSON.stringify(redactedRedisUrl(url))} ${why}`];
}

/** HOOKGATE_TRUSTED_PROXIES as a list of entries (checked by trustedProxyProblems). */
export function trustedProxyList(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.HOOKGATE_TRUSTED_PROXIES ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
}

/** Each HOOKGATE_TRUSTED_PROXIES entry is an address or a CIDR (it failed the start, with a stack). */
function trustedProxyProblems(): string[] {
  try {
    parseTrustedProxies(trustedProxyList());
    return [];
  } catch (error) {
    return [`HOOKGATE_TRUSTED_PROXIES: ${(error as Error).message}`];
  }
}

/** A redis+cluster:// URL is well formed. */
function clusterProblems(): string[] {
  const env = process.env;
  if (!env.REDIS_URL || !isClusterUrl(env.REDIS_URL)) return [];
  try {
    parseClusterUrl(env.REDIS_URL);
    return [];
  } catch (error) {
    return [(error as Error).message];
  }
}

/** HOOKGATE_QUEUE_SHARDS, checked by queueShardProblems; default 1. */
function queueShards(): number {
  return Number(process.env.HOOKGATE_QUEUE_SHARDS ?? 1);
}

/** Replicas a queued execution must be on before it is promised, at most. */
const MAX_ACK_REPLICAS = 16;
const DEFAULT_ACK_TIMEOUT_MS = 250;

/** HOOKGATE_QUEUE_ACK_REPLICAS and _TIMEOUT_MS, checked by queueAckProblems. */
function queueAcks(): ReplicaAcksOptions | undefined {
  const replicas = Number(process.env.HOOKGATE_QUEUE_ACK_REPLICAS ?? 0);
  if (replicas === 0) return undefined;
  const timeout = process.env.HOOKGATE_QUEUE_ACK_TIMEOUT_MS;
  return { replicas, timeoutMs: timeout ? Number(timeout) : DEFAULT_ACK_TIMEOUT_MS };
}

/**
 * How late Redis may end a WAIT after its timeout: it checks blocked clients `hz` times
 * a second (10 by default). Measured: 50-100 ms late.
 */
const WAIT_LATENESS_MS = 100;

/**
 * HOOKGATE_QUEUE_ACK_REPLICAS: 0 to 16. HOOKGATE_QUEUE_ACK_TIMEOUT_MS: a positive
 * integer that leaves the WAIT (a command on the request connection) its answer within
 * the command timeout: less the write window it waits in before it leaves (ADR 0038)
 * and the time Redis may take to end it. An ack timeout of 995 ms under a 1000 ms
 * command timeout always timed out on the client, counted against the breaker.
 */
function queueAckProblems(commandTimeoutMs: number, windowMs: number): string[] {
  const problems: string[] = [];
  const raw = process.env.HOOKGATE_QUEUE_ACK_REPLICAS;
  if (raw !== undefined && !(/^\d+$/.test(raw.trim()) && Number(raw) <= MAX_ACK_REPLICAS))
    problems.push(
      `HOOKGATE_QUEUE_ACK_REPLICAS must be an integer from 0 to ${MAX_ACK_REPLICAS}, not "${raw}"`,
    );
  const timeout = process.env.HOOKGATE_QUEUE_ACK_TIMEOUT_MS;
  const ms = timeout === undefined ? DEFAULT_ACK_TIMEOUT_MS : Number(timeout);
  const wellFormed = timeout === undefined || /^\d+$/.test(timeout.trim());
  // The default only matters (and is only checked) when replicas are asked for.
  if (timeout === undefined && !(Number(raw ?? 0) > 0)) return problems;
  const max = commandTimeoutMs - windowMs - WAIT_LATENESS_MS;
  if (!wellFormed || ms < 1 || ms > max)
    problems.push(
      `HOOKGATE_QUEUE_ACK_TIMEOUT_MS must be an integer from 1 to ${max} ` +
        `(HOOKGATE_REDIS_COMMAND_TIMEOUT_MS less the write window and ${WAIT_LATENESS_MS} ms ` +
        `Redis may take to end a WAIT), not "${timeout ?? DEFAULT_ACK_TIMEOUT_MS}"`,
    );
  return problems;
}

/** HOOKGATE_QUEUE_SHARDS: an integer from 1 to MAX_QUEUE_SHARDS. */
function queueShardProblems(): string[] {
  const raw = process.env.HOOKGATE_QUEUE_SHARDS;
  if (raw === undefined) return [];
  const n = Number(raw);
  if (/^\d+$/.test(raw.trim()) && n >= 1 && n <= MAX_QUEUE_SHARDS) return [];
  return [`HOOKGATE_QUEUE_SHARDS must be an integer from 1 to ${MAX_QUEUE_SHARDS}, not "${raw}"`];
}

function problemsOf(
  role: string,
  port: number,
  source: string,
  rawPort: string | undefined,
): string[] {
  const problems: string[] = [];
  const env = process.env;
  if (!(ROLES as readonly string[]).includes(role)) problems.push(`unknown role "${role}"`);
  if ((role === 'gateway' || role === 'worker') && !env.REDIS_URL)
    problems.push(`the ${role} role needs REDIS_URL`);
  problems.push(
    ...redisUrlProblems(env.REDIS_URL),
    ...trustedProxyProblems(),
    ...clusterProblems(),
    ...queueShardProblems(),
    ...queueAckProblems(redisClientSettings().commandTimeoutMs, usableWindowMs()),
    ...writeWindowProblems(role, redisClientSettings().commandTimeoutMs),
  );
  if (env.HOOKGATE_EXECUTIONS && !['queue', 'inline'].includes(env.HOOKGATE_EXECUTIONS))
    problems.push(`HOOKGATE_EXECUTIONS must be queue or inline, not "${env.HOOKGATE_EXECUTIONS}"`);
  for (const name of [
    'HOOKGATE_MAX_QUEUED',
    'HOOKGATE_WORKER_CONCURRENCY',
    'HOOKGATE_WORKER_CLAIM_IDLE_MS',
    'HOOKGATE_GATEWAY_TTL_MS',
    'HOOKGATE_REDIS_COMMAND_TIMEOUT_MS',
    'HOOKGATE_REDIS_BREAKER_FAILURES',
    'HOOKGATE_REDIS_BREAKER_OPEN_MS',
  ]) {
    const raw = env[name];
    if (raw !== undefined && !(Number.isInteger(Number(raw)) && Number(raw) > 0))
      problems.push(`${name} must be a positive integer, not "${raw}"`);
  }
  // Claims and gateway reports are renewed every third of it: much shorter and a slow
  // tick loses a running job, or a gateway stops counting while it serves.
  for (const name of ['HOOKGATE_WORKER_CLAIM_IDLE_MS', 'HOOKGATE_GATEWAY_TTL_MS']) {
    const raw = env[name];
    if (raw !== undefined && Number(raw) < 1000)
      problems.push(`${name} must be at least 1000, not "${raw}"`);
  }
  if (!isPort(port)) problems.push(`invalid port "${rawPort}"`);
  if (!['dir', 'kubernetes'].includes(source))
    problems.push(`unknown source "${source}" (dir or kubernetes)`);
  const level = env.LOG_LEVEL;
  if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level))
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, not "${level}"`);
  const metricsPort = env.METRICS_PORT;
  if (metricsPort !== undefined && !isPort(portNumber(metricsPort)))
    problems.push(`invalid METRICS_PORT "${metricsPort}"`);
  return problems;
}

/** The write window as set, or 0 when it is malformed (reported by writeWindowProblems). */
function usableWindowMs(): number {
  const windowMs = redisClientSettings().writeWindowMs;
  return Number.isInteger(windowMs) && windowMs >= 0 ? windowMs : 0;
}

/**
 * HOOKGATE_REDIS_WRITE_WINDOW_MS: 0 (off) to 50 ms, whole milliseconds; where there is
 * a request client (gateway, dev with REDIS_URL), below the command timeout, which counts
 * from before the window: else every request-path command times out while it waits,
 * and is still written (and run) when the window closes, after its caller got a 503.
 */
function writeWindowProblems(role: string, commandTimeoutMs: number): string[] {
  const raw = process.env.HOOKGATE_REDIS_WRITE_WINDOW_MS;
  if (raw !== undefined && !(/^\d{1,2}$/.test(raw) && Number(raw) <= 50))
    return [`HOOKGATE_REDIS_WRITE_WINDOW_MS must be an integer from 0 to 50, not "${raw}"`];
  const windowMs = raw === undefined ? REDIS_CLIENT_DEFAULTS.writeWindowMs : Number(raw);
  const requestClient = (role === 'gateway' || role === 'dev') && !!process.env.REDIS_URL;
  if (requestClient && windowMs > 0 && windowMs >= commandTimeoutMs)
    return [
      `HOOKGATE_REDIS_WRITE_WINDOW_MS must be below HOOKGATE_REDIS_COMMAND_TIMEOUT_MS ` +
        `(${commandTimeoutMs}) or 0, not "${raw ?? windowMs}"`,
    ];
  return [];
}

function redisClientSettings(): RedisClientSettings {
  const env = process.env;
  const number = (raw: string | undefined, fallback: number) =>
    raw === undefined ? fallback : Number(raw);
  return {
    commandTimeoutMs: number(
      env.HOOKGATE_REDIS_COMMAND_TIMEOUT_MS,
      REDIS_CLIENT_DEFAULTS.commandTimeoutMs,
    ),
    breakerFailures: number(
      env.HOOKGATE_REDIS_BREAKER_FAILURES,
      REDIS_CLIENT_DEFAULTS.breakerFailures,
    ),
    breakerOpenMs: number(env.HOOKGATE_REDIS_BREAKER_OPEN_MS, REDIS_CLIENT_DEFAULTS.breakerOpenMs),
    writeWindowMs: number(env.HOOKGATE_REDIS_WRITE_WINDOW_MS, REDIS_CLIENT_DEFAULTS.writeWindowMs),
  };
}

/**
 * The public base URL, from --base-url or HOOKGATE_BASE_URL (a typo failed at start-up),
 * else made of the port; that one is checked only when the port is one (a bad port is
 * said once, as a port).
 */
function baseUrlOf(
  flag: string | undefined,
  port: number,
): { baseUrl: string; baseUrlProblems: string[] } {
  const given = flag ?? process.env.HOOKGATE_BASE_URL;
  const baseUrl = given ?? `http://localhost:${port}`;
  const problem = given !== undefined || isPort(port) ? baseUrlProblem(baseUrl) : undefined;
  return {
    baseUrl,
    baseUrlProblems: problem ? [`--base-url (HOOKGATE_BASE_URL): ${problem}`] : [],
  };
}

/**
 * A port as written: decimal digits only. Number() reads '' as 0 (a random port),
 * '1e3' as 1000 and '0x50' as 80; those are typos, NaN here, so isPort refuses them.
 */
function portNumber(raw: string): number {
  return /^[0-9]{1,5}$/.test(raw) ? Number(raw) : NaN;
}

function isPort(port: number): boolean {
  return Number.isInteger(port) && port >= 0 && port <= 65535;
}

/** A comma-separated list; undefined when unset or empty. */
function listOf(raw: string | undefined): string[] | undefined {
  const items = (raw ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  return items.length > 0 ? items : undefined;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function secretNamespaceProblems(namespaces: string[] | undefined): string[] {
  return (namespaces ?? [])
    .filter((ns) => !DNS_LABEL.test(ns))
    .map((ns) => `HOOKGATE_SECRET_NAMESPACES: "${ns}" is not a namespace name`);
}
