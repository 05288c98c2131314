#!/usr/bin/env node
// hookgate: one image, several roles; this is where they are assembled. Each role is
// one small function below: it builds its parts (roles/<role>.ts), listens, and
// returns what `close()` stops. Every role shares one logger set-up (logger.ts), one
// probes-and-metrics plugin (probes.ts) and one shutdown path (lifecycle.ts).
import { KubeConfig } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { kubernetesEvents } from '../operator/controller/kube-events.ts';
import { KubeClient } from '../operator/controller/kube-client.ts';
import { KubernetesSource } from '../operator/sources/kubernetes.ts';
import { adminAccess } from './admin-auth.ts';
import { createDevRuntime } from './dev.ts';
import { createGatewayRuntime } from './gateway.ts';
import { closeOnSignal, type Closable } from './lifecycle.ts';
import { createLogger, logFunction } from './logger.ts';
import { createOperator } from './operator.ts';
import { serveProbes, type Readiness } from './probes.ts';
import { settings, type RoleName, type Settings } from './settings.ts';
import { createWorkerRuntime } from './worker.ts';

type Role = (s: Settings, logger: Logger) => Promise<Closable>;

const roles: Record<RoleName, Role> = {
  /** Every role in one process over a manifest directory or a Kubernetes API. */
  async dev(s, logger) {
    const kc = s.source === 'kubernetes' ? kubeConfig() : undefined;
    const redis = redisClient(logger);
    const runtime = await createDevRuntime({
      ...servingOptions(s, logger),
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
      ...(redis ? { redis } : {}),
    });
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
    return closing(() => runtime.close(), redis);
  },

  /** The control plane: reconciles under Lease leader election. */
  async operator(s, logger) {
    const env = process.env;
    const redis = redisClient(logger);
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
    await operator.app.listen({ port: s.metricsPort ?? s.port, host: s.host });
    operator.manager.start();
    logger.info('reconciling WebhookTriggers and Workflows');
    return closing(() => operator.close(), redis);
  },

  /** Serves what the operator deployed to Redis; queues executions for workers. */
  async gateway(s, logger) {
    const redis = redisClient(logger) as Redis;
    const env = process.env;
    const runtime = await createGatewayRuntime({
      ...servingOptions(s, logger),
      redis,
      executions: env.HOOKGATE_EXECUTIONS === 'inline' ? 'inline' : 'queue',
      ...(env.HOOKGATE_MAX_QUEUED ? { maxQueued: Number(env.HOOKGATE_MAX_QUEUED) } : {}),
      waitForRoutes: false,
      readiness: () => redisReadiness(redis),
    });
    const metrics =
      s.metricsPort !== undefined && s.metricsPort !== s.port
        ? await serveProbes({
            registry: runtime.registry,
            readiness: () => runtime.readiness(),
            port: s.metricsPort,
            host: s.host,
          })
        : undefined;
    const address = await runtime.app.listen({ port: s.port, host: s.host });
    const admin = await runtime.admin.listen({ port: s.adminPort, host: s.adminHost });
    logger.info(
      `routes from Redis; webhooks at ${address}; admin at ${admin} (auth: ${s.adminAuth})`,
    );
    return closing(async () => {
      await runtime.close();
      await metrics?.close();
    }, redis);
  },

  /** Runs the executions gateways queue in Redis. */
  async worker(s, logger) {
    const redis = redisClient(logger) as Redis;
    const concurrency = Number(process.env.HOOKGATE_WORKER_CONCURRENCY ?? 32);
    const claimIdle = process.env.HOOKGATE_WORKER_CLAIM_IDLE_MS;
    const runtime = await createWorkerRuntime({
      redis,
      concurrency,
      engine: { outbound: s.outbound },
      ...(claimIdle ? { claimIdleMs: Number(claimIdle) } : {}),
      budgets: s.budgets,
      onInternalError: internalErrors(logger),
    });
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

/**
 * Shared stores in Redis when REDIS_URL is set. Commands issued in the same tick
 * share one write (ioredis auto-pipelining): a gateway sends two per request (rate
 * limit, enqueue), and one write per command cost more than the rest of the request
 * (bench/README.md).
 */
function redisClient(logger: Logger): Redis | undefined {
  const url = process.env.REDIS_URL;
  if (!url) return undefined;
  const redis = new Redis(url, { enableAutoPipelining: true });
  logConnectionErrors(redis, logger);
  // Every connection made from this one (subscribers, blocking reads) reports too:
  // without a listener ioredis prints each reconnect failure as an unhandled error.
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (...args: Parameters<Redis['duplicate']>) => {
    const copy = duplicate(...args);
    logConnectionErrors(copy, logger);
    return copy;
  };
  return redis;
}

/** One warning when a connection fails, one line when it is back; not one per retry. */
function logConnectionErrors(redis: Redis, logger: Logger): void {
  let down = false;
  redis.on('error', (err: Error) => {
    if (down) return;
    down = true;
    logger.warn({ err: err.message }, 'Redis unreachable; retrying');
  });
  redis.on('ready', () => {
    if (down) logger.info('Redis reachable again');
    down = false;
  });
}

/** Not ready while Redis is not (connecting, reconnecting, closed). */
function redisReadiness(redis: Redis): Readiness {
  return redis.status === 'ready'
    ? { ready: true, status: 'ready' }
    : { ready: false, status: `redis ${redis.status}` };
}

/** Failures outside any one request or execution, e.g. a lost Redis subscription. */
function internalErrors(logger: Logger) {
  return (err: unknown, where: string) => logger.error({ err, where }, 'internal error');
}

function servingOptions(s: Settings, logger: Logger) {
  const ttl = process.env.HOOKGATE_GATEWAY_TTL_MS;
  return {
    baseUrl: s.baseUrl,
    logger,
    report: { afterListen: true, ...(ttl ? { ttlMs: Number(ttl) } : {}) },
    adminAccess: adminAccess(s, kubeConfig),
    analytics: s.analytics,
    budgets: s.budgets,
    engine: { onInternalError: internalErrors(logger), outbound: s.outbound },
    guards: {
      trustedProxies: (process.env.HOOKGATE_TRUSTED_PROXIES ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean),
    },
  };
}

/** The role's own close, then the Redis connection it was given. */
function closing(close: () => Promise<void>, redis: Redis | undefined): Closable {
  return {
    async close() {
      await close();
      redis?.disconnect();
    },
  };
}

async function main(): Promise<void> {
  const s = settings();
  if (!s) return;
  const logger = createLogger({ level: s.logLevel, base: { role: s.role } });
  try {
    closeOnSignal(await roles[s.role](s, logger), logger);
  } catch (err) {
    logger.fatal({ err }, 'failed to start');
    // Open connections (Redis retrying) would keep a failed process alive.
    logger.flush(() => process.exit(1));
    setTimeout(() => process.exit(1), 2_000).unref();
  }
}

await main();
