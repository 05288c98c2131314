#!/usr/bin/env node
// hookgate: one image, several roles; this is where they are assembled (the commands
// for people and pipelines, `hookgate validate` and the rest, are cli/'s). Each role is
// one small function below: it builds its parts (roles/<role>.ts), listens, and
// returns what `close()` stops. Every role shares one logger set-up (logger.ts), one
// probes-and-metrics plugin (probes.ts) and one shutdown path (lifecycle.ts).
import { KubeConfig } from '@kubernetes/client-node';
import type { RedisClient } from '../api/records/redis-client.ts';
import { isCliCommand } from '../cli/command-names.ts';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { kubernetesEvents } from '../operator/controller/kube-events.ts';
import { KubeClient } from '../operator/controller/kube-client.ts';
import { KubernetesSource } from '../operator/sources/kubernetes.ts';
import { adminAccess } from './admin-auth.ts';
import { createDevRuntime } from './dev.ts';
import { createGatewayRuntime } from './gateway.ts';
import { closeOnSignal, type Closable } from './lifecycle.ts';
import { createLogger, logFunction } from './logger.ts';
import { createOperator } from './operator.ts';
import { serveProbes } from './probes.ts';
import { mainClient, redisClients, RedisHealth, type RedisClients } from './redis.ts';
import { settings, trustedProxyList, type RoleName, type Settings } from './settings.ts';
import { tuneV8ForServing } from './v8-tuning.ts';
import { createWorkerRuntime } from './worker.ts';
import { closingTracing, startTracing } from './tracing.ts';
import type { Tracing } from '../runtime/tracing/tracing.ts';
import { checkQueueShards } from './queue-shards.ts';
import { warnOfTooFewReplicas } from './redis-replicas.ts';
import { warnOfOldRedis } from './redis-version.ts';

/**
 * `logMetrics`: registers the log lines stdout did not take in the role's registry;
 * `tracing`: the role's spans, when OpenTelemetry tracing is on.
 */
type Role = (
  s: Settings,
  logger: Logger,
  logMetrics: (registry: Registry) => void,
  tracing: Tracing | undefined,
) => Promise<Closable>;

const roles: Record<RoleName, Role> = {
  /** Every role in one process over a manifest directory or a Kubernetes API. */
  async dev(s, logger, logMetrics, tracing) {
    tuneV8ForServing();
    const kc = s.source === 'kubernetes' ? kubeConfig() : undefined;
    const clients = requestClients(s, logger);
    const runtime = await createDevRuntime({
      ...servingOptions(s, logger, tracing),
      ...(clients ? storeOptions(clients) : {}),
      dir: s.dir,
      ...(kc
        ? {
            source: new KubernetesSource({
              kubeConfig: kc,
              ...(s.namespace ? { namespace: s.namespace } : {}),
              ...(s.secretNamespaces ? { secretNamespaces: s.secretNamespaces } : {}),
              log: logFunction(logger),
            }),
            recordEvent: kubernetesEvents(new KubeClient(kc), 'hookgate'),
          }
        : {}),
    });
    clients?.health.register(runtime.registry);
    logMetrics(runtime.registry);
    const address = await runtime.app.listen({ port: s.port, host: s.host });
    const admin = await runtime.admin.listen({ port: s.adminPort, host: s.adminHost });
    const from = kc
      ? `the Kubernetes API${s.namespace ? ` (namespace ${s.namespace})` : ''}`
      : s.dir;
    logger.info(
      `resources from ${from}; webhooks at ${address}; admin API at ${admin}/api; ` +
        `dashboard at ${admin}/dashboard (admin auth: ${s.adminAuth})`,
    );
    for (const e of runtime.manifestErrors()) logger.warn(e, 'manifest rejected');
    return closing(() => runtime.close(), clients);
  },

  /** The control plane: reconciles under Lease leader election. */
  async operator(s, logger, logMetrics) {
    const env = process.env;
    const redis = process.env.REDIS_URL
      ? mainClient(process.env.REDIS_URL, s.redis, logger)
      : undefined;
    const operator = createOperator({
      kubeConfig: kubeConfig(),
      ...(s.namespace ? { namespace: s.namespace } : {}),
      ...(s.secretNamespaces ? { secretNamespaces: s.secretNamespaces } : {}),
      leaseNamespace: env.HOOKGATE_LEASE_NAMESPACE ?? env.POD_NAMESPACE ?? 'default',
      ...(env.HOOKGATE_LEASE_NAME ? { leaseName: env.HOOKGATE_LEASE_NAME } : {}),
      leaderElection: env.HOOKGATE_LEADER_ELECTION !== 'false',
      baseUrl: s.baseUrl,
      ...(redis ? { redis } : {}),
      log: logFunction(logger),
    });
    logMetrics(operator.registry);
    await operator.app.listen({ port: s.metricsPort ?? s.port, host: s.host });
    operator.manager.start();
    logger.info('reconciling WebhookTriggers and Workflows');
    return closing(
      () => operator.close(),
      redis ? { disconnect: () => redis.disconnect() } : undefined,
    );
  },

  /** Serves what the operator deployed to Redis; queues executions for workers. */
  async gateway(s, logger, logMetrics, tracing) {
    tuneV8ForServing();
    const clients = requestClients(s, logger) as RedisClients;
    const env = process.env;
    // A metrics listener of its own, unless METRICS_PORT is unset or the webhook port.
    const metricsPort = s.metricsPort !== s.port ? s.metricsPort : undefined;
    const runtime = await createGatewayRuntime({
      ...servingOptions(s, logger, tracing),
      // With a metrics port of its own, /metrics is not on the webhook port.
      publicMetrics: metricsPort === undefined,
      ...storeOptions(clients),
      executions: env.HOOKGATE_EXECUTIONS === 'inline' ? 'inline' : 'queue',
      ...(env.HOOKGATE_MAX_QUEUED ? { maxQueued: Number(env.HOOKGATE_MAX_QUEUED) } : {}),
      queueShards: s.queueShards,
      ...(s.queueAcks ? { queueAcks: s.queueAcks } : {}),
      waitForRoutes: false,
      // Ready whatever Redis does (its state in the body): every gateway shares the one
      // Redis, so not-ready would empty the Service at once and callers would get the
      // ingress's error instead of 503 store-unavailable with Retry-After.
      readiness: () => {
        const redis = clients.readiness();
        return { ready: true, status: redis.ready ? 'ready' : `ready; ${redis.status}` };
      },
    });
    clients.health.register(runtime.registry);
    logMetrics(runtime.registry);
    const stopVersionCheck = warnOfOldRedis(clients.main, logger);
    const queued = env.HOOKGATE_EXECUTIONS !== 'inline';
    const stopShardChecks = queued
      ? checkQueueShards(clients.main, s.queueShards, logger)
      : undefined;
    const stopReplicaCheck =
      queued && s.queueAcks
        ? warnOfTooFewReplicas(clients.main, s.queueAcks.replicas, logger)
        : undefined;
    const address = await runtime.app.listen({ port: s.port, host: s.host });
    const admin = await runtime.admin.listen({ port: s.adminPort, host: s.adminHost });
    // After the webhook listener: the chart probes this one, and ready must mean the
    // webhook port takes connections.
    const metrics =
      metricsPort !== undefined
        ? await serveProbes({
            registry: runtime.registry,
            readiness: () => runtime.readiness(),
            port: metricsPort,
            host: s.host,
          })
        : undefined;
    logger.info(
      `routes from Redis; webhooks at ${address}; admin at ${admin} (auth: ${s.adminAuth})`,
    );
    return closing(async () => {
      stopVersionCheck();
      stopShardChecks?.();
      stopReplicaCheck?.();
      await runtime.close();
      await metrics?.close();
    }, clients);
  },

  /** Runs the executions gateways queue in Redis. */
  async worker(s, logger, logMetrics, tracing) {
    const health = new RedisHealth();
    const redis = mainClient(process.env.REDIS_URL as string, s.redis, logger, health);
    const concurrency = Number(process.env.HOOKGATE_WORKER_CONCURRENCY ?? 32);
    const claimIdle = process.env.HOOKGATE_WORKER_CLAIM_IDLE_MS;
    const runtime = await createWorkerRuntime({
      redis,
      concurrency,
      queueShards: s.queueShards,
      engine: { outbound: s.outbound, ...callbackOptions(s), ...(tracing ? { tracing } : {}) },
      ...(claimIdle ? { claimIdleMs: Number(claimIdle) } : {}),
      budgets: s.budgets,
      commandTimeoutMs: s.redis.commandTimeoutMs,
      onInternalError: internalErrors(logger),
    });
    health.register(runtime.registry);
    logMetrics(runtime.registry);
    const stopVersionCheck = warnOfOldRedis(redis, logger);
    const stopShardChecks = checkQueueShards(redis, s.queueShards, logger);
    // A worker serves no traffic: probes and metrics on METRICS_PORT, else --port.
    const port = s.metricsPort ?? s.port;
    const metrics = await serveProbes({
      registry: runtime.registry,
      readiness: () =>
        runtime.worker.ready
          ? { ready: true, status: 'ready' }
          : { ready: false, status: `starting (redis ${redis.status})` },
      port,
      host: s.host,
    });
    logger.info(`executions from Redis, ${concurrency} at once; metrics on port ${port}`);
    // Running executions get 20 s to finish, inside the 25 s grace period.
    return closing(async () => {
      stopVersionCheck();
      stopShardChecks();
      await runtime.close(20_000);
      await metrics.close();
    }, redis);
  },
};

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

/** The gateway's Redis clients (roles/redis.ts) when REDIS_URL is set. */
function requestClients(s: Settings, logger: Logger): RedisClients | undefined {
  const url = process.env.REDIS_URL;
  return url ? redisClients(url, s.redis, logger) : undefined;
}

/** What the serving roles take of the clients: both connections and the breaker. */
function storeOptions(clients: RedisClients) {
  return {
    redis: clients.main,
    requests: clients.requests,
    storeAvailable: () => clients.breaker.allows(),
    storeRetryAfterSeconds: Math.ceil(clients.breaker.openMs / 1000),
  };
}

/** The callback signing secrets of HOOKGATE_CALLBACK_SECRET_FILE, when set (else random). */
function callbackOptions(s: Settings) {
  return s.callbackSecrets ? { callbacks: { secret: s.callbackSecrets } } : {};
}

/** Failures outside any one request or execution, e.g. a lost Redis subscription. */
function internalErrors(logger: Logger) {
  return (err: unknown, where: string) => logger.error({ err, where }, 'internal error');
}

function servingOptions(s: Settings, logger: Logger, tracing: Tracing | undefined) {
  const ttl = process.env.HOOKGATE_GATEWAY_TTL_MS;
  return {
    baseUrl: s.baseUrl,
    logger,
    report: { afterListen: true, ...(ttl ? { ttlMs: Number(ttl) } : {}) },
    adminAccess: adminAccess(s, logger, kubeConfig),
    analytics: s.analytics,
    budgets: s.budgets,
    engine: {
      onInternalError: internalErrors(logger),
      outbound: s.outbound,
      ...callbackOptions(s),
      ...(tracing ? { tracing } : {}),
    },
    traceContext: s.traceContext,
    ...(tracing ? { tracing } : {}),
    guards: {
      trustedProxies: trustedProxyList(),
    },
  };
}

/** The role's own close, then the Redis connections it was given. */
function closing(
  close: () => Promise<void>,
  redis: Pick<RedisClient, 'disconnect'> | undefined,
): Closable {
  return {
    async close() {
      await close();
      redis?.disconnect();
    },
  };
}

/** The fatal line's message: for a port already taken, the setting that moves it. */
function startFailure(
  err: unknown,
  s: Pick<Settings, 'role' | 'port' | 'adminPort' | 'metricsPort'>,
): string {
  const e = err as { code?: unknown; address?: unknown; port?: unknown };
  if (e.code !== 'EADDRINUSE') return 'failed to start';
  // Only the dev and gateway roles open an admin listener (its port has a default in
  // every role's settings); the dev role serves no METRICS_PORT.
  const admin = s.role === 'dev' || s.role === 'gateway';
  const setting =
    admin && e.port === s.adminPort
      ? '--admin-port (ADMIN_PORT)'
      : s.role !== 'dev' && e.port === s.metricsPort
        ? 'METRICS_PORT'
        : '--port (PORT)';
  return `failed to start: ${String(e.address)}:${String(e.port)} is already in use; choose another with ${setting}`;
}

async function main(): Promise<void> {
  const s = settings();
  if (!s) return;
  const { logger, registerMetrics } = createLogger({
    level: s.logLevel,
    base: { role: s.role },
    output: s.logOutput,
  });
  try {
    const tracing = await startTracing(s.tracing, logger);
    const role = await roles[s.role](s, logger, registerMetrics, tracing);
    closeOnSignal(closingTracing(role, tracing), logger);
  } catch (err) {
    logger.fatal({ err }, startFailure(err, s));
    // Open connections (Redis retrying) would keep a failed process alive.
    logger.flush(() => process.exit(1));
    setTimeout(() => process.exit(1), 2_000).unref();
  }
}

// The commands for people and pipelines (validate, get, ...) live in cli/.
const command = process.argv[2];
if (isCliCommand(command)) {
  const cli = await import('../cli/main.ts');
  await cli.main(process.argv.slice(2), 'hookgate');
} else {
  await main();
}
