// The Pulumi program (`pulumi up` in infra/): reads the stack's config and deploys
// hookgate with the HookgateDeployment component. Config keys: see infra/README.md.
import * as pulumi from '@pulumi/pulumi';
import { ANALYTICS_BACKENDS, type AnalyticsBackend } from './analytics.ts';
import type { WorkerAutoscalingArgs } from './autoscaling.ts';
import { BUDGET_COUNT_KEYS, BUDGET_SIZE_KEYS, type BudgetArgs } from './budgets.ts';
import type { NetworkPolicyEgressArgs } from './egress.ts';
import type { NetworkPolicyIngressArgs } from './ingress-policy.ts';
import { HookgateDeployment, type HookgateDeploymentArgs } from './hookgate.ts';
import {
  ADMIN_AUTH_MODES,
  DEFAULT_IMAGE_REPOSITORY,
  DEFAULT_REPLICAS,
  EXECUTIONS_MODES,
  LOG_LEVELS,
  TRACE_CONTEXT_POLICIES,
  EXPRESSION_ISOLATIONS,
  TRACE_SAMPLERS,
  chartAppVersion,
  stackTracing,
  type AdminAuth,
  type ExecutionsMode,
  type LogLevel,
  type TraceContextPolicy,
  type ExpressionIsolation,
  type TraceSampler,
  type OutboundArgs,
} from './plan.ts';

const config = new pulumi.Config();

/** A Redis of your own (redisSecretName or redisUrl), else the chart's Redis. */
function redisFromConfig(): HookgateDeploymentArgs['redis'] {
  const secretName = config.get('redisSecretName');
  if (secretName) {
    return { existingSecret: { name: secretName, key: config.get('redisSecretKey') } };
  }
  const url = config.getSecret('redisUrl');
  if (url) return { url };
  const passwordSecret = config.get('redisPasswordSecretName');
  return {
    chart: {
      storageSize: config.get('redisStorageSize'),
      storageClass: config.get('redisStorageClass'),
      passwordSecret: passwordSecret
        ? { name: passwordSecret, key: config.get('redisPasswordSecretKey') }
        : undefined,
    },
  };
}

/** The Secret of the callback signing secrets, when callbackSecret names one. */
function callbackSecretFromConfig(): Pick<HookgateDeploymentArgs, 'callbackSecret'> {
  const name = config.get('callbackSecret');
  if (!name) return {};
  const key = config.get('callbackSecretKey');
  return { callbackSecret: { name, ...(key ? { key } : {}) } };
}

/**
 * Tracing when tracingEndpoint or tracingExporters is set (chart config.tracing);
 * tracingExporters as the roles read OTEL_TRACES_EXPORTER (`none`: off), tracingProtocol
 * as they read OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf, the default, http/json or grpc).
 */
function tracingFromConfig(): Pick<HookgateDeploymentArgs, 'tracing'> {
  const tracing = stackTracing(
    config.get('tracingEndpoint'),
    config.get('tracingExporters'),
    config.get('tracingProtocol'),
  );
  if (!tracing) return {};
  const sampler = config.get<TraceSampler>('tracingSampler', {
    allowedValues: [...TRACE_SAMPLERS],
  });
  const samplerRatio = config.getNumber('tracingSamplerRatio');
  return {
    tracing: {
      ...tracing,
      ...(sampler ? { sampler } : {}),
      ...(samplerRatio !== undefined ? { samplerRatio } : {}),
    },
  };
}

/** Prometheus for the analytics API when prometheusUrl (or analyticsBackend) is set. */
function analyticsFromConfig(): HookgateDeploymentArgs['analytics'] {
  const backend = config.get<AnalyticsBackend>('analyticsBackend', {
    allowedValues: [...ANALYTICS_BACKENDS],
  });
  const url = config.get('prometheusUrl');
  if (!backend && !url) return undefined;
  const token = config.get('prometheusTokenSecret');
  const ca = config.get('prometheusCaConfigMap');
  const basic = config.get('prometheusBasicAuthSecret');
  return {
    ...(backend ? { backend } : {}),
    prometheus: {
      ...(url ? { url } : {}),
      ...(config.get('prometheusSelector') ? { selector: config.get('prometheusSelector') } : {}),
      ...(config.getNumber('prometheusTimeoutMs')
        ? { timeoutMs: config.getNumber('prometheusTimeoutMs') }
        : {}),
      ...(token ? { tokenSecret: { name: token, key: config.get('prometheusTokenKey') } } : {}),
      ...(basic ? { basicAuthSecret: basic } : {}),
      ...(ca ? { caConfigMap: { name: ca, key: config.get('prometheusCaKey') } } : {}),
      rules: { enabled: config.getBoolean('prometheusRules') ?? false },
    },
  };
}

/** `workerAutoscaling: { minReplicas, maxReplicas, ... }` (chart `worker.autoscaling`), when set. */
function workerAutoscalingFromConfig(): { workerAutoscaling?: WorkerAutoscalingArgs } {
  const autoscaling = config.getObject<WorkerAutoscalingArgs>('workerAutoscaling');
  return autoscaling ? { workerAutoscaling: autoscaling } : {};
}

/** `outbound: { allow, deny, namespaces }` (chart `outbound`), when set. */
function outboundFromConfig(): { outbound?: OutboundArgs } {
  const outbound = config.getObject<OutboundArgs>('outbound');
  return outbound ? { outbound } : {};
}

/**
 * `networkPolicyEgress: { apiServer: { cidrs, ports }, externalRedis: { to }, ... }`
 * (chart `networkPolicy.egress`, infra/egress.ts), when set: egress NetworkPolicies per role.
 */
function networkPolicyEgressFromConfig(): { networkPolicyEgress?: NetworkPolicyEgressArgs } {
  const egress = config.getObject<NetworkPolicyEgressArgs>('networkPolicyEgress');
  return egress ? { networkPolicyEgress: egress } : {};
}

/**
 * `networkPolicyIngress: { gatewayFrom, adminFrom, metricsFrom }` (chart
 * `networkPolicy.*From`, infra/ingress-policy.ts), when set: the ingress peers per port.
 */
function networkPolicyIngressFromConfig(): { networkPolicyIngress?: NetworkPolicyIngressArgs } {
  const ingress = config.getObject<NetworkPolicyIngressArgs>('networkPolicyIngress');
  return ingress ? { networkPolicyIngress: ingress } : {};
}

/** `{ key: value }` when the config sets it, else nothing (so the chart default applies). */
function optional<K extends string, V extends number | string>(
  key: K,
  value: V | undefined,
): Partial<Record<K, V>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, V>);
}

/**
 * Byte budgets (docs/limits.md): the sizes as given (`512Mi`), the record lifetime in ms,
 * the caps on open event streams.
 */
function budgetsFromConfig(): BudgetArgs {
  const sizes = Object.fromEntries(
    BUDGET_SIZE_KEYS.flatMap((key) => {
      const value = config.get(key);
      return value === undefined ? [] : [[key, value]];
    }),
  ) as BudgetArgs;
  const counts = Object.fromEntries(
    BUDGET_COUNT_KEYS.flatMap((key) => {
      const value = config.getNumber(key);
      return value === undefined ? [] : [[key, value]];
    }),
  ) as BudgetArgs;
  return {
    ...sizes,
    ...counts,
    ...optional('executionTtlMs', config.getNumber('executionTtlMs')),
  };
}

const hookgate = new HookgateDeployment('hookgate', {
  namespace: config.get('namespace') ?? 'hookgate',
  createNamespace: config.getBoolean('createNamespace') ?? true,
  image: {
    repository: config.get('imageRepository') ?? DEFAULT_IMAGE_REPOSITORY,
    tag: config.get('imageTag') ?? chartAppVersion(),
  },
  replicas: {
    operator: config.getNumber('operatorReplicas') ?? DEFAULT_REPLICAS.operator,
    gateway: config.getNumber('gatewayReplicas') ?? DEFAULT_REPLICAS.gateway,
    worker: config.getNumber('workerReplicas') ?? DEFAULT_REPLICAS.worker,
  },
  executions: config.get<ExecutionsMode>('executions', { allowedValues: [...EXECUTIONS_MODES] }),
  maxQueued: config.getNumber('maxQueued'),
  workerConcurrency: config.getNumber('workerConcurrency'),
  workerClaimIdleMs: config.getNumber('workerClaimIdleMs'),
  queueShards: config.getNumber('queueShards'),
  ...workerAutoscalingFromConfig(),
  baseUrl: config.require('baseUrl'),
  trustedProxies: config.getObject<string[]>('trustedProxies') ?? [],
  redisClient: {
    ...optional('commandTimeoutMs', config.getNumber('redisCommandTimeoutMs')),
    ...optional('breakerFailures', config.getNumber('redisBreakerFailures')),
    ...optional('breakerOpenMs', config.getNumber('redisBreakerOpenMs')),
    ...optional('writeWindowMs', config.getNumber('redisWriteWindowMs')),
  },
  logOutput: {
    ...optional('bufferBytes', config.get('logBufferBytes')),
    ...optional('stallMs', config.getNumber('logStallMs')),
    ...optional('syncFlushMs', config.getNumber('logSyncFlushMs')),
  },
  budgets: budgetsFromConfig(),
  redis: redisFromConfig(),
  crds: config.getBoolean('crds') ?? true,
  serviceMonitor: config.getBoolean('serviceMonitor') ?? false,
  podDisruptionBudget: config.getBoolean('podDisruptionBudget') ?? true,
  networkPolicy: config.getBoolean('networkPolicy') ?? false,
  grafanaDashboards: config.getBoolean('grafanaDashboards') ?? false,
  ...networkPolicyEgressFromConfig(),
  ...networkPolicyIngressFromConfig(),
  adminAuth: config.get<AdminAuth>('adminAuth', { allowedValues: [...ADMIN_AUTH_MODES] }),
  logLevel: config.get<LogLevel>('logLevel', { allowedValues: [...LOG_LEVELS] }),
  traceContext: config.get<TraceContextPolicy>('traceContext', {
    allowedValues: [...TRACE_CONTEXT_POLICIES],
  }),
  expressionIsolation: config.get<ExpressionIsolation>('expressionIsolation', {
    allowedValues: [...EXPRESSION_ISOLATIONS],
  }),
  ...callbackSecretFromConfig(),
  ...tracingFromConfig(),
  analytics: analyticsFromConfig(),
  ...outboundFromConfig(),
  secretNamespaces: config.getObject<string[]>('secretNamespaces') ?? [],
});

export const namespace = hookgate.namespace;
export const gatewayService = hookgate.gatewayServiceName;
/** `kubectl port-forward svc/<adminService> 8081` reaches the read API and the dashboard. */
export const adminService = hookgate.adminServiceName;
export const baseUrl = hookgate.baseUrl;
export const crdsInstalled = hookgate.crdsInstalled;
