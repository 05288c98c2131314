// Planning for the hookgate Pulumi component: plain functions over plain data (no
// engine, no resources), so they are tested directly. hookgate.ts turns the plan into
// resources; it decides nothing on its own.
//
// Everything, CRDs included, comes from the Helm chart (charts/hookgate) rendered by
// k8s.helm.v4.Chart (see docs/adr/0007-pulumi-program.md); the plan computes its values.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { redisUrlProblem as clientRedisUrlProblem } from '../api/redis-url.ts';
import { rulesProblems, type OutboundRules } from '../runtime/engine/outbound/policy.ts';
import {
  DEFAULT_OTLP_PROTOCOL,
  OTLP_PROTOCOLS,
  readOtlpProtocol,
  readTraceExporters,
  TRACE_EXPORTERS,
  TRACE_SAMPLERS,
  type OtlpProtocol,
  type TraceExporter,
  type TraceSampler,
} from '../runtime/tracing/tracing.ts';
import {
  analyticsPrometheusUrl,
  analyticsValues,
  validateAnalytics,
  type AnalyticsArgs,
  type ChartAnalytics,
} from './analytics.ts';
import {
  validateWorkerAutoscaling,
  workerAutoscalingValues,
  type ChartWorkerAutoscaling,
  type WorkerAutoscalingArgs,
} from './autoscaling.ts';
import { budgetValues, validateBudgets, type BudgetArgs } from './budgets.ts';
import { isCidr } from './cidr.ts';
import { DEFAULT_LOG_OUTPUT, validateLogOutput, type LogOutputArgs } from './log-output.ts';
import {
  networkPolicyEgressValues,
  validateNetworkPolicyEgress,
  type ChartEgress,
  type NetworkPolicyEgressArgs,
} from './egress.ts';
import {
  networkPolicyIngressValues,
  validateNetworkPolicyIngress,
  type ChartIngressPeers,
  type NetworkPolicyIngressArgs,
} from './ingress-policy.ts';

export const COMPONENT_TYPE = 'hookgate:index:HookgateDeployment';
export const CHART_NAME = 'hookgate';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CHART_DIR = join(repoRoot, 'charts', CHART_NAME);
/** What `npm run image` builds (the chart's default); load it into the nodes or push it. */
export const DEFAULT_IMAGE_REPOSITORY = 'localhost/hookgate';
/** The key of the Redis URL in the Secret the component creates (and externalRedis's default). */
export const REDIS_URL_SECRET_KEY = 'redis-url';
/** The key of the password in the chart Redis's Secret (the chart's default). */
export const REDIS_PASSWORD_KEY = 'redis-password';

export type Role = 'operator' | 'gateway' | 'worker';
export const ROLES: readonly Role[] = ['operator', 'gateway', 'worker'];
export type RoleReplicas = Record<Role, number>;
export const DEFAULT_REPLICAS: RoleReplicas = { operator: 2, gateway: 2, worker: 2 };

/**
 * Where executions run: `queue` (Redis, run by the worker Deployment) or `inline` (in the
 * gateway that accepted the request; the chart then renders no workers).
 */
export type ExecutionsMode = 'queue' | 'inline';
/** LOG_LEVEL values the CLI accepts (roles/settings.ts) and the chart's schema allows. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** OTEL_TRACES_SAMPLER values (chart `config.tracing.sampler`): the roles' own list. */
export { TRACE_SAMPLERS, type TraceSampler };
/** OTEL_TRACES_EXPORTER values (chart `config.tracing.exporters`): the roles' own list. */
export { TRACE_EXPORTERS, type TraceExporter };
/** OTEL_EXPORTER_OTLP_PROTOCOL values (chart `config.tracing.protocol`): the roles' own list. */
export { OTLP_PROTOCOLS, type OtlpProtocol };

/** Distributed tracing of the gateways and workers (chart `config.tracing`, ADR 0040). */
export interface TracingArgs {
  /**
   * OTEL_TRACES_EXPORTER: otlp (to `endpoint`), console (spans as log lines), none;
   * duplicates ignored, at least one of otlp and console (for tracing off, leave
   * `tracing` out). Default: otlp.
   */
  exporters?: TraceExporter[];
  /**
   * The collector's OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); needed with otlp. With
   * grpc its gRPC address, no path (http://collector:4317; https:// for TLS).
   */
  endpoint?: string;
  /**
   * OTEL_EXPORTER_OTLP_PROTOCOL, with otlp: http/protobuf or http/json, both to the
   * OTLP/HTTP port (4318), or grpc, to the gRPC port (4317). Default: http/protobuf.
   */
  protocol?: OtlpProtocol;
  /** OTEL_TRACES_SAMPLER; default parentbased_always_on. */
  sampler?: TraceSampler;
  /** OTEL_TRACES_SAMPLER_ARG of the traceidratio samplers, 0 to 1; default 1. */
  samplerRatio?: number;
}

/**
 * The stack's `tracingEndpoint`, `tracingExporters` and `tracingProtocol`
 * (infra/index.ts) as TracingArgs; undefined: tracing off. `tracingExporters` means what
 * OTEL_TRACES_EXPORTER means to the roles, `tracingProtocol` what
 * OTEL_EXPORTER_OTLP_PROTOCOL means to them, each read by their own function: what they
 * would refuse at start is an Error here, at preview, and a list with no working exporter
 * (`none`, `,`, empty) is off, as it is for them, endpoint or not. Unset, tracing is on
 * (otlp) with an endpoint, off without. The protocol is read only with otlp, as the roles
 * read it; blank is unset (the default, http/protobuf).
 */
export function stackTracing(
  endpoint: string | undefined,
  exporters: string | undefined,
  protocol?: string,
): Pick<TracingArgs, 'endpoint' | 'exporters' | 'protocol'> | undefined {
  let tracing: Pick<TracingArgs, 'endpoint' | 'exporters'>;
  if (exporters === undefined) {
    if (!endpoint) return undefined;
    tracing = { endpoint };
  } else {
    const read = readTraceExporters('tracingExporters', exporters);
    if (read.problem) throw new Error(read.problem);
    if (read.exporters.length === 0) return undefined;
    tracing = { ...(endpoint ? { endpoint } : {}), exporters: read.exporters };
  }
  if (!(tracing.exporters ?? ['otlp']).includes('otlp')) return tracing;
  const read = readOtlpProtocol('tracingProtocol', protocol);
  if (read.problem) throw new Error(read.problem);
  return read.protocol === undefined ? tracing : { ...tracing, protocol: read.protocol };
}

/** Whose W3C trace context the gateways pass on (chart `config.traceContext`). */
export const TRACE_CONTEXT_POLICIES = ['authenticated', 'all', 'off'] as const;
export type TraceContextPolicy = (typeof TRACE_CONTEXT_POLICIES)[number];
/** Where JSONata expressions evaluate (chart `config.expressionIsolation`, ADR 0048). */
export const EXPRESSION_ISOLATIONS = ['inline', 'worker'] as const;
export type ExpressionIsolation = (typeof EXPRESSION_ISOLATIONS)[number];
export const EXECUTIONS_MODES: readonly ExecutionsMode[] = ['queue', 'inline'];
/**
 * How the gateways' admin listener authenticates (chart `admin.auth`): `kubernetes`
 * (TokenReview + SubjectAccessReview) or `none` (only behind another authenticating proxy).
 */
export const ADMIN_AUTH_MODES = ['kubernetes', 'none'] as const;
export type AdminAuth = (typeof ADMIN_AUTH_MODES)[number];

/** The chart's defaults (charts/hookgate/values.yaml) for the execution settings. */
export const DEFAULT_EXECUTIONS = {
  executions: 'queue',
  /** HOOKGATE_MAX_QUEUED: executions waiting before the gateway answers 503. */
  maxQueued: 100_000,
  /** HOOKGATE_WORKER_CONCURRENCY: executions each worker runs at once. */
  workerConcurrency: 32,
  /** HOOKGATE_WORKER_CLAIM_IDLE_MS: ms before an abandoned job runs on another worker. */
  workerClaimIdleMs: 60_000,
  /** HOOKGATE_QUEUE_SHARDS: shards of the execution queue (chart config.queueShards). */
  queueShards: 1,
} as const satisfies Record<string, string | number>;
/** The chart's defaults (config.redisClient) for every role's Redis clients. */
export const DEFAULT_REDIS_CLIENT = {
  /** HOOKGATE_REDIS_COMMAND_TIMEOUT_MS: longest wait for one Redis command. */
  commandTimeoutMs: 1_000,
  /** HOOKGATE_REDIS_BREAKER_FAILURES: failures in a row that open a gateway's breaker. */
  breakerFailures: 5,
  /** HOOKGATE_REDIS_BREAKER_OPEN_MS: ms the open breaker waits before it probes. */
  breakerOpenMs: 1_000,
  /** HOOKGATE_REDIS_WRITE_WINDOW_MS: ms request-path commands wait to leave together. */
  writeWindowMs: 1,
} as const;
export type RedisClientArgs = { -readonly [K in keyof typeof DEFAULT_REDIS_CLIENT]: number };

/** Smallest claim-idle time the chart accepts (values.schema.json). */
export const MIN_CLAIM_IDLE_MS = 1000;

/**
 * The chart's own Redis (its `redis` values: a one-replica StatefulSet with an append-only
 * file on a PersistentVolumeClaim). Every field falls back to the chart's default.
 */
export interface ChartRedis {
  /** Size of the PersistentVolumeClaim, a Kubernetes quantity (chart default 8Gi). */
  storageSize?: string;
  /** StorageClass of the claim (default: the cluster's default class). */
  storageClass?: string;
  /**
   * A Secret holding the password. Default: the chart creates `<fullname>-redis` with a
   * random one; k8s.helm.v4.Chart renders with the cluster at hand (`lookup`), so the
   * password stays the same on every `pulumi up`.
   */
  passwordSecret?: { name: string; key?: string };
}

/**
 * Which Redis the roles use: the chart's own (the default), a URL (the component keeps
 * it in a Secret it creates, so it never sits in Helm values), or a Secret that already
 * holds the URL. `Url` is a type parameter so hookgate.ts can accept a
 * `pulumi.Input<string>` (a secret from config) while this file stays free of the
 * Pulumi runtime.
 */
export type RedisSource<Url = string> =
  { chart: ChartRedis } | { url: Url } | { existingSecret: { name: string; key?: string } };

/** The component's arguments, as plain data (see HookgateDeploymentArgs). */
export interface PlanArgs<Url = string> {
  /** Namespace for every namespaced object. */
  namespace: string;
  /** Create the namespace (default true); false when it already exists. */
  createNamespace?: boolean;
  /** Helm release name (default "hookgate"); object names derive from it. */
  releaseName?: string;
  image: { repository?: string; tag: string };
  replicas?: Partial<RoleReplicas>;
  /** Where executions run (default queue); `inline` deploys no workers. */
  executions?: ExecutionsMode;
  /** queue mode: executions that may wait before the gateway answers 503 (default 100000). */
  maxQueued?: number;
  /** Executions each worker runs at once (default 32). */
  workerConcurrency?: number;
  /** ms before another worker re-runs a job its worker stopped renewing (default 60000). */
  workerClaimIdleMs?: number;
  /** Shards of the execution queue, 1 to 256 (default 1; docs/redis-layout.md). */
  queueShards?: number;
  /**
   * Scale the workers on the queue with a KEDA ScaledObject (chart `worker.autoscaling`,
   * infra/autoscaling.ts); absent: `replicas.worker` workers.
   */
  workerAutoscaling?: WorkerAutoscalingArgs;
  /** Public base URL of the gateway (HOOKGATE_BASE_URL), e.g. https://hooks.example.com */
  baseUrl: string;
  /** CIDRs whose X-Forwarded-* headers the gateway trusts. */
  trustedProxies?: string[];
  /** Redis command timeout and the gateways' circuit breaker (chart config.redisClient). */
  redisClient?: Partial<RedisClientArgs>;
  /**
   * How every role's log lines wait for stdout (chart config.logOutput,
   * infra/log-output.ts); unset keys keep the chart's defaults.
   */
  logOutput?: Partial<LogOutputArgs>;
  /**
   * Byte budgets and record lifetime (chart config.budgets, docs/limits.md); unset keys
   * keep the product's defaults.
   */
  budgets?: BudgetArgs;
  /** Default `{ chart: {} }`: the chart's Redis with its defaults. */
  redis?: RedisSource<Url>;
  /**
   * Install the Workflow and WebhookTrigger CRDs with the chart (default true). They
   * carry `helm.sh/resource-policy: keep`, which Pulumi turns into retainOnDelete.
   */
  crds?: boolean;
  /** Opt-ins of the chart (default false). */
  serviceMonitor?: boolean;
  /** One PodDisruptionBudget per role, maxUnavailable 1 (default true, as the chart). */
  podDisruptionBudget?: boolean;
  networkPolicy?: boolean;
  /**
   * The Grafana dashboard in a ConfigMap for the Grafana sidecar (chart
   * `grafana.dashboards.enabled`); needs `analytics.prometheus.rules.enabled`.
   */
  grafanaDashboards?: boolean;
  /**
   * Egress NetworkPolicies per role (chart `networkPolicy.egress`, infra/egress.ts): only
   * DNS, Redis, the API server, Prometheus, the public internet and the given rules.
   * Needs `networkPolicy`; absent: egress is open (the chart default).
   */
  networkPolicyEgress?: NetworkPolicyEgressArgs;
  /**
   * Peers of the ingress NetworkPolicy per port (chart `networkPolicy.gatewayFrom`,
   * `.adminFrom`, `.metricsFrom`; infra/ingress-policy.ts). Needs `networkPolicy`; a key
   * left out keeps the chart's default (ADR 0045), `[]` admits every source.
   */
  networkPolicyIngress?: NetworkPolicyIngressArgs;
  /** The admin listener's authentication (chart `admin.auth`; default kubernetes). */
  adminAuth?: AdminAuth;
  logLevel?: LogLevel;
  /**
   * Whose W3C trace context http nodes and callbacks pass on (chart
   * `config.traceContext`): authenticated (default), all, off.
   */
  traceContext?: TraceContextPolicy;
  /**
   * Where gateways and workers evaluate JSONata expressions that are not plain field
   * mappings (chart `config.expressionIsolation`, ADR 0048): inline (default) or worker
   * (child processes, each with a heap limit and a hard deadline).
   */
  expressionIsolation?: ExpressionIsolation;
  /** Distributed tracing (chart `config.tracing`); absent: off, no tracing code loaded. */
  tracing?: TracingArgs;
  /**
   * The Secret (and key, default `secrets`) holding the secrets that sign Async
   * Callbacks, one `whsec_` per line (chart `config.callbackSecret`). Default: none, a
   * random secret per pod.
   */
  callbackSecret?: { name: string; key?: string };
  /** Where the gateways' analytics API reads from (infra/analytics.ts); default memory. */
  analytics?: AnalyticsArgs;
  /**
   * The outbound policy of http nodes and callbacks (chart `outbound`): `allow` and
   * `deny` entries of the cluster policy, `namespaces` narrowing it per namespace.
   * Default: public destinations only.
   */
  outbound?: OutboundArgs;
  /**
   * Namespaces whose Secrets the operator may read (chart `rbac.secretNamespaces`): a
   * Role per namespace instead of the ClusterRole's Secrets rule. Default: cluster-wide
   * (only Secrets labelled hookgate.dev/credentials=true are watched).
   */
  secretNamespaces?: string[];
}

/** The chart's `outbound` values (docs/security.md, "Outbound policy"). */
export interface OutboundArgs {
  allow?: string[];
  deny?: string[];
  namespaces?: Record<string, OutboundRules>;
}

/** The arguments with every default applied. */
export interface ResolvedArgs<Url = string> {
  namespace: string;
  createNamespace: boolean;
  releaseName: string;
  image: { repository: string; tag: string };
  replicas: RoleReplicas;
  executions: ExecutionsMode;
  maxQueued: number;
  workerConcurrency: number;
  workerClaimIdleMs: number;
  queueShards: number;
  workerAutoscaling?: WorkerAutoscalingArgs;
  baseUrl: string;
  trustedProxies: string[];
  redisClient: RedisClientArgs;
  logOutput: LogOutputArgs;
  budgets: BudgetArgs;
  redis: RedisSource<Url>;
  crds: boolean;
  serviceMonitor: boolean;
  podDisruptionBudget: boolean;
  networkPolicy: boolean;
  grafanaDashboards: boolean;
  networkPolicyEgress?: NetworkPolicyEgressArgs;
  networkPolicyIngress?: NetworkPolicyIngressArgs;
  adminAuth: AdminAuth;
  logLevel: LogLevel;
  traceContext: TraceContextPolicy;
  expressionIsolation: ExpressionIsolation;
  tracing?: TracingArgs;
  callbackSecret?: { name: string; key?: string };
  analytics?: AnalyticsArgs;
  outbound?: OutboundArgs;
  secretNamespaces: string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const IMAGE_TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const QUANTITY = /^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/;

export function resolveArgs<Url>(args: PlanArgs<Url>): ResolvedArgs<Url> {
  return {
    namespace: args.namespace,
    createNamespace: args.createNamespace ?? true,
    releaseName: args.releaseName ?? CHART_NAME,
    image: {
      repository: args.image.repository ?? DEFAULT_IMAGE_REPOSITORY,
      tag: args.image.tag,
    },
    replicas: { ...DEFAULT_REPLICAS, ...args.replicas },
    ...executionArgs(args),
    baseUrl: args.baseUrl.replace(/\/+$/, ''),
    trustedProxies: args.trustedProxies ?? [],
    redisClient: { ...DEFAULT_REDIS_CLIENT, ...args.redisClient },
    logOutput: { ...DEFAULT_LOG_OUTPUT, ...args.logOutput },
    budgets: budgetValues(args.budgets ?? {}),
    redis: args.redis ?? { chart: {} },
    crds: args.crds ?? true,
    serviceMonitor: args.serviceMonitor ?? false,
    podDisruptionBudget: args.podDisruptionBudget ?? true,
    networkPolicy: args.networkPolicy ?? false,
    grafanaDashboards: args.grafanaDashboards ?? false,
    adminAuth: args.adminAuth ?? 'kubernetes',
    logLevel: args.logLevel ?? 'info',
    traceContext: args.traceContext ?? 'authenticated',
    expressionIsolation: args.expressionIsolation ?? 'inline',
    ...optionalArgs(args),
    secretNamespaces: args.secretNamespaces ?? [],
  };
}

/** At most 50 ms, and below the command timeout, which counts from before the window. */
function validateWriteWindow({ writeWindowMs, commandTimeoutMs }: RedisClientArgs): string[] {
  if (writeWindowMs > 50)
    return [`redisClient.writeWindowMs must be at most 50, got ${writeWindowMs}`];
  // (The gateway refuses to start with it.)
  if (writeWindowMs > 0 && commandTimeoutMs >= 1 && writeWindowMs >= commandTimeoutMs)
    return [
      `redisClient.writeWindowMs must be below redisClient.commandTimeoutMs ` +
        `(${commandTimeoutMs}) or 0, got ${writeWindowMs}`,
    ];
  return [];
}

/**
 * Every problem with the arguments, as readable messages (empty when valid). A Redis URL
 * that is not a plain string (an Output, e.g. a config secret) is checked by hookgate.ts
 * once its value is known (redisUrlProblem).
 */
export function validateArgs<Url>(args: PlanArgs<Url>): string[] {
  const r = resolveArgs(args);
  const errors: string[] = [];
  if (r.namespace.length > 63 || !DNS_LABEL.test(r.namespace)) {
    errors.push(`namespace "${r.namespace}" is not a DNS-1123 label`);
  }
  // Object names are "<fullname>-<component>"; keep room for the longest suffix.
  if (r.releaseName.length > 40 || !DNS_LABEL.test(r.releaseName)) {
    errors.push(`releaseName "${r.releaseName}" must be a DNS-1123 label of at most 40 characters`);
  }
  if (r.image.repository.trim() === '' || /\s|:[^/]*$/.test(r.image.repository)) {
    errors.push(`image.repository "${r.image.repository}" must be a repository without a tag`);
  }
  if (!IMAGE_TAG.test(r.image.tag)) errors.push(`image.tag "${r.image.tag}" is not a valid tag`);
  for (const role of ROLES) {
    const n = r.replicas[role];
    if (!Number.isInteger(n) || n < 0) {
      errors.push(`replicas.${role} must be a whole number >= 0, got ${String(n)}`);
    }
  }
  if (!EXECUTIONS_MODES.includes(r.executions)) {
    errors.push(`executions must be queue or inline, got "${String(r.executions)}"`);
  }
  if (!ADMIN_AUTH_MODES.includes(r.adminAuth)) {
    errors.push(`adminAuth must be kubernetes or none, got "${String(r.adminAuth)}"`);
  }
  const minimums: [string, number, number][] = [
    ['maxQueued', r.maxQueued, 1],
    ['workerConcurrency', r.workerConcurrency, 1],
    ['workerClaimIdleMs', r.workerClaimIdleMs, MIN_CLAIM_IDLE_MS],
    ['redisClient.commandTimeoutMs', r.redisClient.commandTimeoutMs, 1],
    ['redisClient.breakerFailures', r.redisClient.breakerFailures, 1],
    ['redisClient.breakerOpenMs', r.redisClient.breakerOpenMs, 1],
    ['redisClient.writeWindowMs', r.redisClient.writeWindowMs, 0],
  ];
  for (const [key, n, min] of minimums) {
    if (!Number.isInteger(n) || n < min) {
      errors.push(`${key} must be a whole number >= ${min}, got ${String(n)}`);
    }
  }
  errors.push(...validateWriteWindow(r.redisClient));
  errors.push(...validateLogOutput(r.logOutput));
  errors.push(...validateQueueShards(r.queueShards));
  errors.push(...validateBudgets(r.budgets));
  errors.push(...validateBaseUrl(r.baseUrl));
  for (const cidr of r.trustedProxies) {
    if (!isCidr(cidr)) errors.push(`trustedProxies: "${cidr}" is not a CIDR`);
  }
  errors.push(...validateRedis(r.redis));
  errors.push(...optionalProblems(r));
  errors.push(...grafanaProblems(r));
  errors.push(...validateSecretNamespaces(r.secretNamespaces));
  errors.push(...validateTracing(r.tracing));
  return errors;
}

/** What the roles accept at start (roles/tracing-settings.ts), checked before the chart. */
function validateTracing(tracing: TracingArgs | undefined): string[] {
  if (!tracing) return [];
  const errors: string[] = [];
  const exporters = tracing.exporters ?? ['otlp'];
  const unknown = exporters.filter((name) => !TRACE_EXPORTERS.includes(name));
  if (unknown.length > 0)
    errors.push(
      `tracing.exporters must list otlp, console or none, got ${unknown.map((name) => `"${String(name)}"`).join(', ')}`,
    );
  // The chart refuses tracing on with nothing to export: off is `tracing` left out.
  else if (!exporters.some((name) => name !== 'none'))
    errors.push(
      'tracing.exporters must list otlp or console (none exports nothing); leave tracing out to turn it off',
    );
  errors.push(...validateOtlpTarget(tracing, exporters.includes('otlp')));
  if (tracing.sampler !== undefined && !TRACE_SAMPLERS.includes(tracing.sampler))
    errors.push(
      `tracing.sampler must be one of ${TRACE_SAMPLERS.join(', ')}, got "${String(tracing.sampler)}"`,
    );
  const ratio = tracing.samplerRatio;
  if (ratio !== undefined && !(ratio >= 0 && ratio <= 1))
    errors.push(`tracing.samplerRatio must be from 0 to 1, got ${String(ratio)}`);
  return errors;
}

/**
 * The endpoint and the protocol, as the roles read them: the protocol with otlp only
 * (console alone exports no OTLP); with grpc, the endpoint is the collector's address
 * and a path or query is refused (OTLP/gRPC adds none, and the exporter would drop it).
 */
function validateOtlpTarget(tracing: TracingArgs, otlp: boolean): string[] {
  const errors: string[] = [];
  const { endpoint, protocol } = tracing;
  if (endpoint === undefined) {
    if (otlp)
      errors.push('tracing.endpoint is needed with otlp in tracing.exporters (the default)');
  } else if (!/^https?:\/\/[^\s/]+(\/\S*)?$/.test(endpoint))
    errors.push(`tracing.endpoint must be an http:// or https:// URL, got "${endpoint}"`);
  else if (otlp && protocol === 'grpc') {
    const url = URL.parse(endpoint);
    if (
      url === null ||
      url.pathname !== '/' ||
      url.search ||
      url.hash ||
      url.username ||
      url.password
    )
      errors.push(
        `tracing.endpoint must be the collector's address without a path or query for grpc (e.g. http://collector:4317), got "${endpoint}"`,
      );
    // gRPC's default port is 443 whatever the scheme: plaintext names its port (not 80).
    else if (url.protocol === 'http:' && url.port === '')
      errors.push(
        `tracing.endpoint must name the collector's port for plaintext grpc (gRPC's default is 443), e.g. http://collector:4317, got "${endpoint}"`,
      );
  }
  if (protocol !== undefined && otlp && !OTLP_PROTOCOLS.includes(protocol))
    errors.push(
      `tracing.protocol must be http/protobuf, http/json or grpc, got "${String(protocol)}"`,
    );
  return errors;
}

type ExecutionArgs = Pick<
  ResolvedArgs,
  'executions' | 'maxQueued' | 'workerConcurrency' | 'workerClaimIdleMs' | 'queueShards'
>;

/** The execution settings with the chart's defaults applied. */
function executionArgs<Url>(args: PlanArgs<Url>): ExecutionArgs {
  return {
    executions: args.executions ?? DEFAULT_EXECUTIONS.executions,
    maxQueued: args.maxQueued ?? DEFAULT_EXECUTIONS.maxQueued,
    workerConcurrency: args.workerConcurrency ?? DEFAULT_EXECUTIONS.workerConcurrency,
    workerClaimIdleMs: args.workerClaimIdleMs ?? DEFAULT_EXECUTIONS.workerClaimIdleMs,
    queueShards: args.queueShards ?? DEFAULT_EXECUTIONS.queueShards,
  };
}

/** HOOKGATE_QUEUE_SHARDS as the roles take it: 1 to 256. */
function validateQueueShards(n: number): string[] {
  return Number.isInteger(n) && n >= 1 && n <= 256
    ? []
    : [`queueShards must be a whole number from 1 to 256, got ${String(n)}`];
}

/** The arguments that are absent unless given (each then maps to chart values). */
function optionalArgs<Url>(
  args: PlanArgs<Url>,
): Pick<
  ResolvedArgs<Url>,
  | 'analytics'
  | 'outbound'
  | 'workerAutoscaling'
  | 'networkPolicyEgress'
  | 'networkPolicyIngress'
  | 'callbackSecret'
  | 'tracing'
> {
  return {
    ...(args.tracing ? { tracing: args.tracing } : {}),
    ...(args.callbackSecret ? { callbackSecret: args.callbackSecret } : {}),
    ...(args.analytics ? { analytics: args.analytics } : {}),
    ...(args.outbound ? { outbound: args.outbound } : {}),
    ...(args.workerAutoscaling ? { workerAutoscaling: args.workerAutoscaling } : {}),
    ...(args.networkPolicyEgress ? { networkPolicyEgress: args.networkPolicyEgress } : {}),
    ...(args.networkPolicyIngress ? { networkPolicyIngress: args.networkPolicyIngress } : {}),
  };
}

/** The dashboard's request panels read the recording rules (the chart's render check). */
function grafanaProblems<Url>(r: ResolvedArgs<Url>): string[] {
  return r.grafanaDashboards && !r.analytics?.prometheus?.rules?.enabled
    ? [
        "grafanaDashboards needs analytics.prometheus.rules.enabled: the dashboard's request panels read its recording rules",
      ]
    : [];
}

/** The problems of the arguments that are absent unless given. */
function optionalProblems<Url>(r: ResolvedArgs<Url>): string[] {
  return [
    ...(r.callbackSecret ? validateSecretRef('callbackSecret', r.callbackSecret) : []),
    ...(r.analytics ? validateAnalytics(r.analytics) : []),
    ...(r.workerAutoscaling
      ? validateWorkerAutoscaling(r.workerAutoscaling, r.analytics?.prometheus?.url)
      : []),
    ...(r.outbound ? validateOutbound(r.outbound) : []),
    ...(r.networkPolicyEgress
      ? validateNetworkPolicyEgress(r.networkPolicyEgress, {
          networkPolicy: r.networkPolicy,
          externalRedis: !('chart' in r.redis),
          analyticsPrometheusUrl: analyticsPrometheusUrl(r.analytics),
        })
      : []),
    ...(r.networkPolicyIngress
      ? validateNetworkPolicyIngress(r.networkPolicyIngress, { networkPolicy: r.networkPolicy })
      : []),
  ];
}

/** Each must be a namespace name (the chart's schema checks the same). */
function validateSecretNamespaces(namespaces: string[]): string[] {
  return namespaces
    .filter((ns) => ns.length > 63 || !DNS_LABEL.test(ns))
    .map((ns) => `secretNamespaces: "${ns}" is not a namespace name`);
}

/** The same checks as the runtime's settings, so a bad entry fails at `pulumi preview`. */
function validateOutbound(outbound: OutboundArgs): string[] {
  const errors = rulesProblems(
    { allow: outbound.allow ?? [], deny: outbound.deny ?? [] },
    false,
  ).map((p) => `outbound.${p}`);
  for (const [namespace, rules] of Object.entries(outbound.namespaces ?? {})) {
    if (namespace.length > 63 || !DNS_LABEL.test(namespace)) {
      errors.push(`outbound.namespaces: "${namespace}" is not a namespace name`);
    }
    errors.push(...rulesProblems(rules, true).map((p) => `outbound.namespaces.${namespace}.${p}`));
  }
  return errors;
}

function validateBaseUrl(baseUrl: string): string[] {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return [`baseUrl "${baseUrl}" is not an absolute URL`];
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return [`baseUrl "${baseUrl}" must use http or https`];
  }
  if (url.search || url.hash || url.username || url.password) {
    return [`baseUrl "${baseUrl}" must not carry credentials, a query or a fragment`];
  }
  return [];
}

function validateRedis<Url>(redis: RedisSource<Url>): string[] {
  if ('chart' in redis) return validateChartRedis(redis.chart);
  if ('existingSecret' in redis) {
    return validateSecretRef('redis.existingSecret', redis.existingSecret);
  }
  if (typeof redis.url !== 'string') return [];
  const problem = redisUrlProblem(redis.url);
  return problem === undefined ? [] : [problem];
}

/**
 * What is wrong with a Redis URL, without repeating it (it may hold a password and come
 * from a secret), or undefined. hookgate.ts checks a URL given as an Output (a config
 * secret) with it once the value is known, which `pulumi preview` already is.
 */
export function redisUrlProblem(url: string): string | undefined {
  // The roles' own rule (api/redis-url.ts): what they refuse at start is refused at
  // preview, what they take is taken. Said without the URL (a secret's value).
  const why = clientRedisUrlProblem(url);
  return why === undefined ? undefined : `redis.url ${why}`;
}

function validateChartRedis(chart: ChartRedis): string[] {
  const errors: string[] = [];
  if (chart.storageSize !== undefined && !QUANTITY.test(chart.storageSize)) {
    errors.push(`redis.chart.storageSize "${chart.storageSize}" is not a Kubernetes quantity`);
  }
  const storageClass = chart.storageClass;
  if (
    storageClass !== undefined &&
    (storageClass.length > 253 || !DNS_SUBDOMAIN.test(storageClass))
  ) {
    errors.push(`redis.chart.storageClass "${storageClass}" is not a valid StorageClass name`);
  }
  if (chart.passwordSecret) {
    errors.push(...validateSecretRef('redis.chart.passwordSecret', chart.passwordSecret));
  }
  return errors;
}

function validateSecretRef(what: string, ref: { name: string; key?: string }): string[] {
  const errors: string[] = [];
  if (ref.name.length > 253 || !DNS_SUBDOMAIN.test(ref.name)) {
    errors.push(`${what}.name "${ref.name}" is not a valid Secret name`);
  }
  if (ref.key !== undefined && !SECRET_KEY.test(ref.key)) {
    errors.push(`${what}.key "${ref.key}" is not a valid Secret key`);
  }
  return errors;
}

/** The chart's "hookgate.fullname" helper, for the release names used here. */
export function fullname(releaseName: string): string {
  const name = releaseName.includes(CHART_NAME) ? releaseName : `${releaseName}-${CHART_NAME}`;
  return name.slice(0, 63).replace(/-+$/, '');
}

export interface ResourceNames {
  /** Object name prefix the chart uses. */
  fullname: string;
  gatewayService: string;
  /** The admin listener's Service (ClusterIP; read API, dashboard, test requests). */
  adminService: string;
  metricsService: string;
  /**
   * The chart's Redis: its StatefulSet, headless Service (`<redis>.<namespace>.svc`),
   * ConfigMap and generated password Secret all carry this name.
   */
  redis: string;
  /** Secret the component creates for a Redis URL (`redis: { url }`). */
  redisUrlSecret: string;
  /** Deployments by role. */
  deployments: Record<Role, string>;
}

export function resourceNames(releaseName: string): ResourceNames {
  const base = fullname(releaseName);
  return {
    fullname: base,
    gatewayService: `${base}-gateway`,
    adminService: `${base}-admin`,
    metricsService: `${base}-metrics`,
    redis: `${base}-redis`,
    redisUrlSecret: `${base}-redis-url`,
    deployments: {
      operator: `${base}-operator`,
      gateway: `${base}-gateway`,
      worker: `${base}-worker`,
    },
  };
}

/** The recommended labels for the objects the component creates itself (not the chart's). */
export function labels(releaseName: string, component: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': CHART_NAME,
    'app.kubernetes.io/instance': releaseName,
    'app.kubernetes.io/component': component,
    'app.kubernetes.io/part-of': 'hookgate',
    'app.kubernetes.io/managed-by': 'pulumi',
  };
}

/** The chart's appVersion: the default image tag. */
export function chartAppVersion(chartDir: string = CHART_DIR): string {
  const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as {
    appVersion?: unknown;
  };
  if (typeof chart.appVersion !== 'string' && typeof chart.appVersion !== 'number') {
    throw new Error(`${chartDir}/Chart.yaml has no appVersion`);
  }
  return String(chart.appVersion);
}

/**
 * The chart path as k8s.helm.v4.Chart should get it: relative to the working directory
 * (the program runs in infra/), so the stack state does not depend on the checkout path.
 */
export function chartPath(cwd: string = process.cwd()): string {
  return relative(cwd, CHART_DIR) || '.';
}

/** The subset of charts/hookgate/values.yaml this component sets (see values.schema.json). */
export interface ChartValues {
  image: { repository: string; tag: string };
  crds: { enabled: boolean };
  config: {
    baseUrl: string;
    trustedProxies: string[];
    logLevel: string;
    traceContext: TraceContextPolicy;
    expressionIsolation?: ExpressionIsolation;
    tracing?: {
      enabled: boolean;
      exporters: TraceExporter[];
      endpoint: string;
      protocol: OtlpProtocol;
      sampler: TraceSampler;
      samplerRatio: number;
    };
    callbackSecret?: { name: string; key: string };
    redisClient: RedisClientArgs;
    logOutput: LogOutputArgs;
    queueShards: number;
    budgets?: BudgetArgs;
  };
  redis: {
    enabled: boolean;
    persistence?: { size?: string; storageClass?: string };
    auth?: { existingSecret: string; existingSecretKey: string };
  };
  externalRedis: { url: string; existingSecret: { name: string; key: string } };
  operator: { replicas: number; leaderElection: { enabled: boolean } };
  gateway: { replicas: number; executions: ExecutionsMode; maxQueued: number };
  worker: {
    replicas: number;
    concurrency: number;
    claimIdleMs: number;
    autoscaling?: ChartWorkerAutoscaling;
  };
  metrics: { serviceMonitor: { enabled: boolean } };
  grafana?: { dashboards: { enabled: boolean } };
  podDisruptionBudget: { enabled: boolean };
  networkPolicy: { enabled: boolean; egress?: ChartEgress } & ChartIngressPeers;
  admin: { auth: AdminAuth };
  analytics?: ChartAnalytics;
  outbound?: { allow: string[]; deny: string[]; namespaces: Record<string, OutboundRules> };
  rbac?: { secretNamespaces: string[] };
}

/** The chart's config.tracing when tracing is on; nothing (the chart's off) otherwise. */
function tracingValues(tracing: TracingArgs | undefined): Pick<ChartValues['config'], 'tracing'> {
  if (!tracing) return {};
  return {
    tracing: {
      enabled: true,
      exporters: tracing.exporters ?? ['otlp'],
      endpoint: tracing.endpoint ?? '',
      protocol: tracing.protocol ?? DEFAULT_OTLP_PROTOCOL,
      sampler: tracing.sampler ?? 'parentbased_always_on',
      samplerRatio: tracing.samplerRatio ?? 1,
    },
  };
}

/**
 * Helm values for the release. The chart never sees a Redis URL: either it runs its own
 * Redis, or it gets the name of the Secret holding the URL (the component's own, or the
 * caller's).
 */
export function chartValues<Url>(r: ResolvedArgs<Url>): ChartValues {
  return {
    image: { repository: r.image.repository, tag: r.image.tag },
    crds: { enabled: r.crds },
    config: {
      baseUrl: r.baseUrl,
      trustedProxies: r.trustedProxies,
      logLevel: r.logLevel,
      traceContext: r.traceContext,
      // The chart's default is inline: only a change is written.
      ...(r.expressionIsolation === 'worker' ? { expressionIsolation: 'worker' as const } : {}),
      ...tracingValues(r.tracing),
      ...(r.callbackSecret
        ? {
            callbackSecret: { name: r.callbackSecret.name, key: r.callbackSecret.key ?? 'secrets' },
          }
        : {}),
      redisClient: r.redisClient,
      logOutput: r.logOutput,
      queueShards: r.queueShards,
      ...(Object.keys(r.budgets).length > 0 ? { budgets: r.budgets } : {}),
    },
    ...redisValues(r),
    operator: {
      replicas: r.replicas.operator,
      // One operator replica may run without a Lease; more need one (the chart refuses).
      leaderElection: { enabled: r.replicas.operator !== 1 },
    },
    gateway: { replicas: r.replicas.gateway, executions: r.executions, maxQueued: r.maxQueued },
    // With inline executions the chart renders no worker Deployment; these are then unused.
    worker: {
      replicas: r.replicas.worker,
      concurrency: r.workerConcurrency,
      claimIdleMs: r.workerClaimIdleMs,
      ...(r.workerAutoscaling ? { autoscaling: workerAutoscalingValues(r.workerAutoscaling) } : {}),
    },
    metrics: { serviceMonitor: { enabled: r.serviceMonitor } },
    ...(r.grafanaDashboards ? { grafana: { dashboards: { enabled: true } } } : {}),
    podDisruptionBudget: { enabled: r.podDisruptionBudget },
    networkPolicy: {
      enabled: r.networkPolicy,
      ...(r.networkPolicyIngress ? networkPolicyIngressValues(r.networkPolicyIngress) : {}),
      ...(r.networkPolicyEgress
        ? { egress: networkPolicyEgressValues(r.networkPolicyEgress) }
        : {}),
    },
    admin: { auth: r.adminAuth },
    ...(r.analytics ? { analytics: analyticsValues(r.analytics) } : {}),
    ...(r.outbound
      ? {
          outbound: {
            allow: r.outbound.allow ?? [],
            deny: r.outbound.deny ?? [],
            namespaces: r.outbound.namespaces ?? {},
          },
        }
      : {}),
    ...(r.secretNamespaces.length > 0 ? { rbac: { secretNamespaces: r.secretNamespaces } } : {}),
  };
}

function redisValues<Url>(r: ResolvedArgs<Url>): Pick<ChartValues, 'redis' | 'externalRedis'> {
  const source = r.redis;
  if ('chart' in source) {
    const { storageSize, storageClass, passwordSecret } = source.chart;
    const persistence = {
      ...(storageSize !== undefined ? { size: storageSize } : {}),
      ...(storageClass !== undefined ? { storageClass } : {}),
    };
    return {
      redis: {
        enabled: true,
        ...(Object.keys(persistence).length > 0 ? { persistence } : {}),
        ...(passwordSecret
          ? {
              auth: {
                existingSecret: passwordSecret.name,
                existingSecretKey: passwordSecret.key ?? REDIS_PASSWORD_KEY,
              },
            }
          : {}),
      },
      externalRedis: { url: '', existingSecret: { name: '', key: REDIS_URL_SECRET_KEY } },
    };
  }
  const secret =
    'existingSecret' in source
      ? { name: source.existingSecret.name, key: source.existingSecret.key ?? REDIS_URL_SECRET_KEY }
      : { name: resourceNames(r.releaseName).redisUrlSecret, key: REDIS_URL_SECRET_KEY };
  return { redis: { enabled: false }, externalRedis: { url: '', existingSecret: secret } };
}
