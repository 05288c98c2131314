#!/usr/bin/env node
// hookgate: one image, several roles. `hookgate dev` (what `npm start` runs) runs
// every role in one process with in-memory stores, over a manifest directory or a
// Kubernetes API; `hookgate operator` runs the control plane against a cluster.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import { handleSignals } from '../operator/controller/manager.ts';
import { KubernetesSource } from '../operator/sources/kubernetes.ts';
import { createDevRuntime } from './dev.ts';
import { KubeClient } from '../operator/controller/kube-client.ts';
import { kubernetesEvents } from '../operator/controller/kube-events.ts';
import type { Registry } from 'prom-client';
import { serveMetrics } from './probes.ts';
import { createGatewayRuntime } from './gateway.ts';
import { createOperator } from './operator.ts';
import { createWorkerRuntime } from './worker.ts';
import closeWithGrace from 'close-with-grace';
import { serve } from './lifecycle.ts';

const USAGE = `Usage: hookgate <role> [options]

Roles:
  dev        every role in one process (default)
  operator   the control plane against a Kubernetes API, with leader election
  gateway    serves the routes an operator wrote to Redis (needs REDIS_URL)
  worker     runs the executions gateways queue in Redis (needs REDIS_URL)

Options:
  --source <dir|kubernetes>  dev: where resources come from (env HOOKGATE_SOURCE, default dir)
  --dir <path>               dev: manifest directory (env HOOKGATE_MANIFESTS, default ./examples)
  --namespace <ns>           kubernetes: watch one namespace (env HOOKGATE_NAMESPACE, default all)
  --port <n>                 listen port (env PORT, default 8080)
  --host <addr>              listen address (env HOST, default 127.0.0.1)
  --base-url <url>           public base URL for status.url (env HOOKGATE_BASE_URL,
                             default http://localhost:<port>)

Environment:
  REDIS_URL                  shared stores (routes, registry, rate limits) in Redis;
                             in memory when unset (the gateway role needs it)
  KUBECONFIG                 kubeconfig for the kubernetes source and the operator
                             (in a pod: the service account)
  HOOKGATE_LEASE_NAMESPACE   operator: namespace of its Lease (else POD_NAMESPACE, else default)
  HOOKGATE_LEASE_NAME        operator: name of its Lease (default hookgate-operator)
  HOOKGATE_LEADER_ELECTION   operator: false to run without leader election (one replica)
  METRICS_PORT               port of /metrics, /healthz, /readyz (operator, worker: instead
                             of --port; gateway: a second listener)
  HOOKGATE_EXECUTIONS        gateway: queue (default; run by worker replicas) or inline
                             (run in the gateway process)
  HOOKGATE_MAX_QUEUED        gateway, queue mode: executions waiting at most before 503
                             (default 100000)
  HOOKGATE_WORKER_CONCURRENCY  worker: executions run at once (default 32)
  HOOKGATE_WORKER_CLAIM_IDLE_MS  worker: a job whose worker stopped renewing it for this
                             long is run again by another worker (default 60000)
  HOOKGATE_TRUSTED_PROXIES   comma-separated CIDRs whose X-Forwarded-Proto is trusted
  LOG_LEVEL                  fatal | error | warn | info | debug (default info)
`;

interface Settings {
  role: string;
  source: string;
  dir: string;
  namespace: string | undefined;
  port: number;
  host: string;
  baseUrl: string;
}

function settings(): Settings | undefined {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      source: { type: 'string' },
      dir: { type: 'string' },
      namespace: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'base-url': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return undefined;
  }
  const role = positionals[0] ?? 'dev';
  const port = Number(values.port ?? process.env.PORT ?? 8080);
  const source = values.source ?? process.env.HOOKGATE_SOURCE ?? 'dir';
  const problems = problemsOf(role, port, source, values.port ?? process.env.PORT);
  if (problems.length > 0) {
    console.error(`hookgate: ${problems.join('; ')}\n\n${USAGE}`);
    process.exitCode = 2;
    return undefined;
  }
  return {
    role,
    source,
    dir: resolve(values.dir ?? process.env.HOOKGATE_MANIFESTS ?? 'examples'),
    namespace: values.namespace ?? process.env.HOOKGATE_NAMESPACE,
    port,
    host: values.host ?? process.env.HOST ?? '127.0.0.1',
    baseUrl: values['base-url'] ?? process.env.HOOKGATE_BASE_URL ?? `http://localhost:${port}`,
  };
}

function problemsOf(
  role: string,
  port: number,
  source: string,
  rawPort: string | undefined,
): string[] {
  const problems: string[] = [];
  const env = process.env;
  if (!['dev', 'operator', 'gateway', 'worker'].includes(role))
    problems.push(`unknown role "${role}"`);
  if ((role === 'gateway' || role === 'worker') && !env.REDIS_URL)
    problems.push(`the ${role} role needs REDIS_URL`);
  if (env.HOOKGATE_EXECUTIONS && !['queue', 'inline'].includes(env.HOOKGATE_EXECUTIONS))
    problems.push(`HOOKGATE_EXECUTIONS must be queue or inline, not "${env.HOOKGATE_EXECUTIONS}"`);
  for (const name of [
    'HOOKGATE_MAX_QUEUED',
    'HOOKGATE_WORKER_CONCURRENCY',
    'HOOKGATE_WORKER_CLAIM_IDLE_MS',
  ]) {
    const raw = env[name];
    if (raw !== undefined && !(Number.isInteger(Number(raw)) && Number(raw) > 0))
      problems.push(`${name} must be a positive integer, not "${raw}"`);
  }
  // Claims are renewed every third of it: much shorter and a slow tick loses a running job.
  const claimIdle = env.HOOKGATE_WORKER_CLAIM_IDLE_MS;
  if (claimIdle !== undefined && Number(claimIdle) < 1000)
    problems.push(`HOOKGATE_WORKER_CLAIM_IDLE_MS must be at least 1000, not "${claimIdle}"`);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    problems.push(`invalid port "${rawPort}"`);
  if (!['dir', 'kubernetes'].includes(source))
    problems.push(`unknown source "${source}" (dir or kubernetes)`);
  return problems;
}

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

/** Shared stores in Redis when REDIS_URL is set. */
/**
 * Commands issued in the same tick share one write (ioredis auto-pipelining): a
 * gateway sends two per request (rate limit, enqueue), and one write per command cost
 * more than the rest of the request (bench/README.md).
 */
function redisClient(): Redis | undefined {
  const url = process.env.REDIS_URL;
  return url ? new Redis(url, { enableAutoPipelining: true }) : undefined;
}

function servingOptions(s: Settings) {
  return {
    baseUrl: s.baseUrl,
    logger: { level: process.env.LOG_LEVEL ?? 'info' },
    guards: {
      trustedProxies: (process.env.HOOKGATE_TRUSTED_PROXIES ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean),
    },
  };
}

async function runDev(s: Settings): Promise<void> {
  const kc = s.source === 'kubernetes' ? kubeConfig() : undefined;
  const source = kc
    ? new KubernetesSource({ kubeConfig: kc, ...(s.namespace ? { namespace: s.namespace } : {}) })
    : undefined;
  const redis = redisClient();
  const runtime = await createDevRuntime({
    ...servingOptions(s),
    dir: s.dir,
    ...(source && kc
      ? { source, recordEvent: kubernetesEvents(new KubeClient(kc), 'hookgate') }
      : {}),
    ...(redis ? { redis } : {}),
  });
  const address = await serve(runtime.app, {
    port: s.port,
    host: s.host,
    onClose: async () => {
      await runtime.close();
      redis?.disconnect();
    },
  });
  const from = source
    ? `the Kubernetes API${s.namespace ? ` (namespace ${s.namespace})` : ''}`
    : s.dir;
  runtime.app.log.info(
    `hookgate dev: resources from ${from}, serving at ${address}, dashboard at ${s.baseUrl}/dashboard`,
  );
  for (const e of runtime.manifestErrors()) runtime.app.log.warn(e, 'manifest rejected');
}

/** METRICS_PORT, when set and different from the traffic port, gets its own listener. */
async function metricsListener(s: Settings, registry: Registry) {
  const port = process.env.METRICS_PORT ? Number(process.env.METRICS_PORT) : undefined;
  if (port === undefined || port === s.port) return undefined;
  return serveMetrics(registry, { port, host: s.host });
}

async function runGateway(s: Settings): Promise<void> {
  const redis = redisClient() as Redis;
  const env = process.env;
  const runtime = await createGatewayRuntime({
    ...servingOptions(s),
    redis,
    executions: env.HOOKGATE_EXECUTIONS === 'inline' ? 'inline' : 'queue',
    ...(env.HOOKGATE_MAX_QUEUED ? { maxQueued: Number(env.HOOKGATE_MAX_QUEUED) } : {}),
  });
  const metrics = await metricsListener(s, runtime.registry);
  const address = await serve(runtime.app, {
    port: s.port,
    host: s.host,
    onClose: async () => {
      await runtime.close();
      await metrics?.close();
      redis.disconnect();
    },
  });
  runtime.app.log.info(`hookgate gateway: routes from Redis, serving at ${address}`);
}

async function runWorker(s: Settings): Promise<void> {
  const redis = redisClient() as Redis;
  const concurrency = Number(process.env.HOOKGATE_WORKER_CONCURRENCY ?? 32);
  const claimIdle = process.env.HOOKGATE_WORKER_CLAIM_IDLE_MS;
  const runtime = await createWorkerRuntime({
    redis,
    concurrency,
    ...(claimIdle ? { claimIdleMs: Number(claimIdle) } : {}),
  });
  // Metrics and probes on METRICS_PORT (else --port): a worker serves no traffic.
  const port = process.env.METRICS_PORT ? Number(process.env.METRICS_PORT) : s.port;
  const metrics = await serveMetrics(runtime.registry, { port, host: s.host });
  // Running executions get 20 s to finish, inside the pod's 30 s grace period (G15).
  closeWithGrace({ delay: 25_000 }, async ({ signal, err }) => {
    log(err ? 'shutting down after an error' : 'shutting down', { signal, err: String(err ?? '') });
    await runtime.close(20_000);
    await metrics.close();
    redis.disconnect();
  });
  log(`hookgate worker: executions from Redis, ${concurrency} at once, metrics on port ${port}`);
}

function log(msg: string, fields: object = {}): void {
  console.log(JSON.stringify({ time: new Date().toISOString(), msg, ...fields }));
}

async function runOperator(s: Settings): Promise<void> {
  // The environment the Helm chart passes (charts/hookgate/README.md).
  const env = process.env;
  const redis = redisClient();
  const operator = createOperator({
    kubeConfig: kubeConfig(),
    ...(s.namespace ? { namespace: s.namespace } : {}),
    leaseNamespace: env.HOOKGATE_LEASE_NAMESPACE ?? env.POD_NAMESPACE ?? 'default',
    ...(env.HOOKGATE_LEASE_NAME ? { leaseName: env.HOOKGATE_LEASE_NAME } : {}),
    leaderElection: env.HOOKGATE_LEADER_ELECTION !== 'false',
    baseUrl: s.baseUrl,
    ...(redis ? { redis } : {}),
    log,
  });
  // Metrics and probes on METRICS_PORT when the deployment separates them.
  const port = env.METRICS_PORT ? Number(env.METRICS_PORT) : s.port;
  await operator.app.listen({ port, host: s.host });
  operator.manager.start();
  handleSignals(
    operator.manager,
    (code) =>
      void operator.app
        .close()
        .then(() => redis?.disconnect())
        .finally(() => process.exit(code)),
  );
}

async function main(): Promise<void> {
  const s = settings();
  if (!s) return;
  if (s.role === 'operator') await runOperator(s);
  else if (s.role === 'gateway') await runGateway(s);
  else if (s.role === 'worker') await runWorker(s);
  else await runDev(s);
}

main().catch((err: unknown) => {
  console.error('hookgate: failed to start:', err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
