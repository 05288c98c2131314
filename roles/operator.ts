// `hookgate operator`: the control plane against a Kubernetes API. Informers on
// Workflows, WebhookTriggers and Secrets feed the reconcile loop; only the replica
// holding the Lease reconciles; SIGTERM drains, then releases the Lease. Serves
// /metrics, /healthz and /readyz.
//
// Routes and registrations go to Redis when a client is given, where `hookgate
// gateway` replicas read them and report what they serve (the Deployed condition);
// without Redis they stay in this process's memory, no gateway can serve them, and
// the operator only reports status (NoGateway; use `hookgate dev --source kubernetes`).
import type { KubeConfig } from '@kubernetes/client-node';
import Fastify, { type FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { KubeClient } from '../operator/controller/kube-client.ts';
import { Manager } from '../operator/controller/manager.ts';
import { OperatorMetrics } from '../operator/controller/metrics.ts';
import { startReconcileLoop } from '../operator/reconcile/run.ts';
import { KubernetesSource } from '../operator/sources/kubernetes.ts';
import type { RedisClient } from '../api/records/redis-client.ts';
import { duplicateWith } from './redis.ts';
import type { LogFunction } from './logger.ts';
import type { RouteStore, WorkflowRegistry } from '../api/records/records.ts';
import { kubernetesEvents } from '../operator/controller/kube-events.ts';
import { probes } from './probes.ts';
import { createStores } from './serving.ts';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  /** Watch one namespace; all when omitted. */
  namespace?: string;
  /** Watch Secrets in these namespaces only, one watch each (per-namespace RBAC). */
  secretNamespaces?: string[];
  /** Where the Lease lives (the operator's own namespace). */
  leaseNamespace: string;
  leaseName?: string;
  /** Run without leader election (a single replica). */
  leaderElection?: boolean;
  baseUrl: string;
  log?: LogFunction;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Shared stores; memory when omitted. */
  redis?: RedisClient;
}

export interface OperatorRuntime {
  manager: Manager;
  app: FastifyInstance;
  registry: Registry;
  routes: RouteStore;
  workflows: WorkflowRegistry;
  isLeading(): boolean;
  close(): Promise<void>;
}

export function createOperator(options: OperatorOptions): OperatorRuntime {
  const registry = new Registry();
  const metrics = new OperatorMetrics(registry);
  const log = options.log ?? (() => {});
  // client-go logs the API server's Warning headers; so does the operator, once each.
  const client = new KubeClient(options.kubeConfig, {
    onWarning: (warning) => log('Kubernetes API warning', { warning }),
  });
  // The reconciles' own connection: a command waits for a reconnect only briefly (three
  // retries, under a second) and at most 5 s for an answer, so a Redis outage shows as
  // StoreError within seconds instead of holding every worker for a minute.
  const storeRedis =
    options.redis &&
    duplicateWith(options.redis, { maxRetriesPerRequest: 3, commandTimeout: 5_000 });
  const stores = createStores(storeRedis);
  const { routes, workflows, gateways } = stores;

  let leading = false;
  const manager = new Manager({
    metrics,
    log,
    ...(options.leaderElection === false
      ? { leaderElection: false as const }
      : {
          leaderElection: {
            lock: {
              client,
              namespace: options.leaseNamespace,
              name: options.leaseName ?? 'hookgate-operator',
            },
            ...(options.leaseDurationMs ? { leaseDurationMs: options.leaseDurationMs } : {}),
            ...(options.renewDeadlineMs ? { renewDeadlineMs: options.renewDeadlineMs } : {}),
            ...(options.retryPeriodMs ? { retryPeriodMs: options.retryPeriodMs } : {}),
          },
        }),
    startLeading: async (_signal, leadership) => {
      const loop = await startReconcileLoop({
        source: new KubernetesSource({
          kubeConfig: options.kubeConfig,
          client,
          ...(options.namespace ? { namespace: options.namespace } : {}),
          ...(options.secretNamespaces ? { secretNamespaces: options.secretNamespaces } : {}),
          log,
        }),
        routes,
        workflows,
        gateways,
        baseUrl: options.baseUrl,
        controller: { metrics, log },
        recordEvent: kubernetesEvents(client, 'hookgate-operator'),
        leadership,
      });
      leading = true;
      return loop;
    },
  });
  const app = Fastify({ logger: false });
  // A standby replica is healthy and ready: it is waiting for the Lease.
  void app.register(probes, {
    registry,
    readiness: () => ({ ready: true, status: leading ? 'leading' : 'standby' }),
  });
  return {
    manager,
    app,
    registry,
    routes,
    workflows,
    isLeading: () => leading,
    async close() {
      await manager.shutdown();
      await app.close();
      stores.close();
      storeRedis?.disconnect();
    },
  };
}
