// Operator metrics, modelled on controller-runtime's
// (controller_runtime_reconcile_total{controller,result}, ..._reconcile_errors_total,
// ..._reconcile_time_seconds) and client-go's workqueue metrics. Registered on the
// Registry passed in, never on prom-client's global default registry.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { QueueMetrics } from './workqueue.ts';

export const METRIC_PREFIX = 'hookgate_operator_';

/** Outcome of one reconcile, the `result` label of `..._reconcile_total`. */
export type ReconcileResult = 'success' | 'error' | 'requeue' | 'requeue_after';

/** controller-runtime's reconcile time buckets (seconds). */
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
  1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

export class OperatorMetrics {
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly terminalErrors: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly queueDepth: Gauge<'name'>;
  readonly queueAdds: Counter<'name'>;
  readonly queueRetries: Counter<'name'>;
  readonly isLeader: Gauge<'name'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.reconcileTotal = new Counter({
      name: `${METRIC_PREFIX}reconcile_total`,
      help: 'Total number of reconciliations per controller and result.',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: `${METRIC_PREFIX}reconcile_errors_total`,
      help: 'Total number of reconciliation errors per controller (terminal errors included).',
      labelNames: ['controller'],
      registers,
    });
    this.terminalErrors = new Counter({
      name: `${METRIC_PREFIX}terminal_reconcile_errors_total`,
      help: 'Total number of terminal (not retried) reconciliation errors per controller.',
      labelNames: ['controller'],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: `${METRIC_PREFIX}reconcile_time_seconds`,
      help: 'Length of time per reconciliation per controller.',
      labelNames: ['controller'],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.activeWorkers = new Gauge({
      name: `${METRIC_PREFIX}active_workers`,
      help: 'Number of workers currently running a reconcile, per controller.',
      labelNames: ['controller'],
      registers,
    });
    this.queueDepth = new Gauge({
      name: `${METRIC_PREFIX}workqueue_depth`,
      help: 'Current number of keys waiting in the work queue.',
      labelNames: ['name'],
      registers,
    });
    this.queueAdds = new Counter({
      name: `${METRIC_PREFIX}workqueue_adds_total`,
      help: 'Total number of keys added to the work queue (collapsed duplicates excluded).',
      labelNames: ['name'],
      registers,
    });
    this.queueRetries = new Counter({
      name: `${METRIC_PREFIX}workqueue_retries_total`,
      help: 'Total number of rate-limited re-adds (retries) handled by the work queue.',
      labelNames: ['name'],
      registers,
    });
    this.isLeader = new Gauge({
      name: `${METRIC_PREFIX}leader_election_master_status`,
      help: 'Whether this replica currently holds the leader Lease (1) or not (0).',
      labelNames: ['name'],
      registers,
    });
  }

  /** Record one finished reconcile. */
  observeReconcile(
    controller: string,
    result: ReconcileResult,
    seconds: number,
    terminal = false,
  ): void {
    this.reconcileTotal.inc({ controller, result });
    if (result === 'error') this.reconcileErrors.inc({ controller });
    if (terminal) this.terminalErrors.inc({ controller });
    this.reconcileTime.observe({ controller }, seconds);
  }

  /** The hooks a WorkQueue named `name` reports through. */
  queue(name: string): QueueMetrics {
    this.queueDepth.set({ name }, 0);
    return {
      added: () => this.queueAdds.inc({ name }),
      depth: (n) => this.queueDepth.set({ name }, n),
      retried: () => this.queueRetries.inc({ name }),
    };
  }
}
