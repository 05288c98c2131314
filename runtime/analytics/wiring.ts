// One call that builds the analytics side of a role: the metrics, the analytics
// backend (memory or Prometheus), the RequestObserver the gateway feeds, and the
// plugins that serve /api/analytics/* and /dashboard. /metrics is served from the
// registry by the roles' probes plugin (roles/probes.ts), like every role's.
//
//   const analytics = createAnalytics({ backend: { kind: 'memory' } });
//   buildApp({ ..., observer: analytics.observer, plugins: analytics.plugins });
//   engine: analytics.metrics.recordExecution(workflowId, 'succeeded') ...
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import type { RequestObservation, RequestObserver } from '../gateway/observations.ts';
import { dashboardRoutes } from '../dashboard/routes.ts';
import type { BoundedStore } from '../bounded.ts';
import type { AnalyticsBackend } from './backend.ts';
import type { ConsumerLabelOptions } from './consumers.ts';
import { MemoryAnalytics } from './memory.ts';
import { GatewayMetrics } from './metrics.ts';
import { PrometheusAnalytics, type PrometheusAnalyticsOptions } from './prometheus.ts';
import { analyticsRoutes } from './routes.ts';

export type AnalyticsBackendConfig =
  | { kind: 'memory'; maxSeries?: number; maxBytes?: number }
  | ({ kind: 'prometheus' } & PrometheusAnalyticsOptions);

export interface AnalyticsSetupOptions {
  /** Where the metrics live; a new Registry by default (never prom-client's global one). */
  registry?: Registry;
  /** Default: memory. */
  backend?: AnalyticsBackendConfig;
  consumers?: ConsumerLabelOptions;
  queueDepth?: () => number | Promise<number>;
  /** Age of the oldest job not done (hookgate_queue_oldest_age_seconds); queue mode only. */
  queueOldestAge?: () => number | Promise<number>;
  /** Entries in the dead-letter list (the hookgate_dead_letters gauge). */
  deadLetters?: () => number | Promise<number>;
  /** Serve the dashboard at /dashboard (default true). */
  dashboard?: boolean;
}

export interface AnalyticsSetup {
  registry: Registry;
  metrics: GatewayMetrics;
  backend: AnalyticsBackend;
  /** Give this to the gateway: it records into the metrics and, when used, the memory store. */
  observer: RequestObserver;
  /** For AppOptions.plugins. */
  plugins: ((app: FastifyInstance) => Promise<void>)[];
  /** What the analytics keep in the process (the memory backend), for the store metrics. */
  stores: BoundedStore[];
}

/** Calls every observer; one that throws does not stop the others. */
export function fanOut(...observers: RequestObserver[]): RequestObserver {
  return {
    observe(observation: RequestObservation): void {
      for (const o of observers) {
        try {
          o.observe(observation);
        } catch {
          // an observer must never break the request path; metrics are best effort
        }
      }
    },
  };
}

export function createAnalytics(options: AnalyticsSetupOptions = {}): AnalyticsSetup {
  const registry = options.registry ?? new Registry();
  const metrics = new GatewayMetrics({
    registry,
    ...(options.consumers ? { consumers: options.consumers } : {}),
    ...(options.queueDepth ? { queueDepth: options.queueDepth } : {}),
    ...(options.queueOldestAge ? { queueOldestAge: options.queueOldestAge } : {}),
    ...(options.deadLetters ? { deadLetters: options.deadLetters } : {}),
  });
  const config = options.backend ?? { kind: 'memory' };
  let backend: AnalyticsBackend;
  let observer: RequestObserver = metrics;
  const stores: BoundedStore[] = [];
  if (config.kind === 'prometheus') {
    const { kind: _kind, ...prometheus } = config;
    backend = new PrometheusAnalytics(prometheus);
  } else {
    const memory = new MemoryAnalytics({
      ...(options.consumers ? { consumers: options.consumers } : {}),
      ...(config.maxSeries ? { maxSeries: config.maxSeries } : {}),
      ...(config.maxBytes ? { maxBytes: config.maxBytes } : {}),
    });
    backend = memory;
    observer = fanOut(metrics, memory);
    stores.push(memory);
  }
  const plugins: ((app: FastifyInstance) => Promise<void>)[] = [
    async (app) => {
      await app.register(analyticsRoutes, { backend });
    },
  ];
  if (options.dashboard ?? true) {
    plugins.push(async (app) => {
      await app.register(dashboardRoutes);
    });
  }
  return { registry, metrics, backend, observer, plugins, stores };
}
