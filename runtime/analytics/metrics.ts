// Prometheus metrics of the gateway and the engine, on a Registry the caller owns (never
// prom-client's global one). The HTTP server histogram follows OpenTelemetry's HTTP
// semantic conventions mapped to Prometheus names (http.server.request.duration ->
// http_server_request_duration_seconds, http.request.method -> http_request_method,
// ...), plus hookgate's application, environment and a bounded consumer label.
import { Counter, Gauge, type Registry } from 'prom-client';
import {
  UNMATCHED_ROUTE,
  type RequestObservation,
  type RequestObserver,
} from '../gateway/observations.ts';
import type { RateLimitOutcome } from '../gateway/security/rate-limit.ts';
import { CATALOGUE } from '../errors.ts';
import { ConsumerLabels, countedMinute, type ConsumerLabelOptions } from './consumers.ts';
import { normaliseMethod } from './definitions.ts';
import { Batch } from './batch.ts';
import { RequestDurationHistogram } from './request-histogram.ts';

export const METRIC = {
  requestDuration: 'http_server_request_duration_seconds',
  executions: 'hookgate_executions_total',
  executionsDiscarded: 'hookgate_executions_discarded_total',
  rejectedRequests: 'hookgate_rejected_requests_total',
  queueDepth: 'hookgate_queue_depth',
  queueOldestAge: 'hookgate_queue_oldest_age_seconds',
  queueReplicaAcks: 'hookgate_queue_replica_acks_total',
  rateLimitDecisions: 'hookgate_rate_limit_decisions_total',
  callbackDeliveries: 'hookgate_callback_deliveries_total',
  deadLetters: 'hookgate_dead_letters',
  deadLettered: 'hookgate_dead_lettered_total',
  executionRetries: 'hookgate_execution_retries_total',
  engineQueueRefused: 'hookgate_engine_queue_refused_total',
} as const;

export const REQUEST_LABELS = [
  'application',
  'environment',
  'http_request_method',
  'http_route',
  'http_response_status_code',
  'consumer',
] as const;
export type RequestLabel = (typeof REQUEST_LABELS)[number];

export type ExecutionResult = 'succeeded' | 'failed';
/** The gateway's rate-limit outcomes (runtime/gateway/security/rate-limit.ts says each). */
export type RateLimitDecision = RateLimitOutcome;
const RATE_LIMIT_DECISIONS: readonly RateLimitDecision[] = [
  'allowed',
  'rejected',
  'shadowed',
  'failed_open',
  'failed_closed',
];
/** `refused`: the outbound policy refused the destination, nothing was sent. */
export type CallbackResult = 'delivered' | 'failed' | 'refused';
/** automatic: a retry policy scheduled another attempt; dead_letter: an admin retried an entry. */
export type RetrySource = 'automatic' | 'dead_letter';
/** Why an in-process engine's queue refused a start (engine.ts QueueRefusal, ADR 0049). */
export type EngineQueueRefusal = 'queue_full' | 'namespace_share';
const ENGINE_QUEUE_REFUSALS: readonly EngineQueueRefusal[] = ['queue_full', 'namespace_share'];

export interface GatewayMetricsOptions {
  registry: Registry;
  consumers?: ConsumerLabelOptions;
  /** Read at every scrape for hookgate_queue_depth (instead of calling setQueueDepth). */
  queueDepth?: () => number | Promise<number>;
  /**
   * Read at every scrape for hookgate_queue_oldest_age_seconds (age of the oldest job
   * not done); the gauge exists only where a queue is read (queue-mode roles).
   */
  queueOldestAge?: () => number | Promise<number>;
  /** Read at every scrape for hookgate_dead_letters (entries in the dead-letter list). */
  deadLetters?: () => number | Promise<number>;
  /** Clock (tests): when an execution is counted, and forgetGone's default `now`. */
  now?: () => number;
}

/**
 * Records every gateway request observation into the metrics, and offers the small
 * recording functions the engine, the rate limiter and the callback sender call.
 */
export class GatewayMetrics implements RequestObserver {
  readonly registry: Registry;
  readonly #consumers: ConsumerLabels;
  readonly #duration: RequestDurationHistogram<RequestLabel>;
  readonly #executions: Counter<'workflow_id' | 'result'>;
  /**
   * Its series by result and workflow, with when each was last counted (removed with
   * the counter's own: forgetGone).
   */
  readonly #executionSeries = new Map<string, { series: Counter.Internal; updatedMs: number }>();
  /** Succeeded executions whose records were discarded (ADR 0041), by workflow. */
  readonly #discarded: Counter<'workflow_id'>;
  readonly #discardedSeries = new Map<string, Counter.Internal>();
  readonly #now: () => number;
  readonly #rejected: Counter<'reason'>;
  readonly #queueDepth: Gauge;
  /** Rate limit decisions not yet added to their counter (see its collect). */
  readonly #decisions: Record<RateLimitDecision, number> = {
    allowed: 0,
    rejected: 0,
    shadowed: 0,
    failed_open: 0,
    failed_closed: 0,
  };
  readonly #callbacks: Counter<'result'>;
  readonly #retries: Counter<'source'>;
  readonly #deadLettered: Counter;
  readonly #engineQueueRefused: Counter<'reason'>;
  /** Request observations not yet recorded (see batch.ts); flushed before every scrape. */
  readonly #observations = new Batch<RequestObservation>((o) => this.#record(o));

  constructor(options: GatewayMetricsOptions) {
    const registers = [options.registry];
    this.registry = options.registry;
    this.#now = options.now ?? Date.now;
    // A route idle for a day starts its consumers again; its series go first, or the
    // consumers labelled after would add to those labelled before (docs/analytics.md).
    this.#consumers = new ConsumerLabels(options.consumers, (route) =>
      this.#duration.forget('http_route', route),
    );
    // Buckets: LATENCY_BUCKETS_SECONDS. Not prom-client's Histogram: see request-histogram.ts.
    const flush = this.#observations.flush;
    this.#duration = new RequestDurationHistogram({
      name: METRIC.requestDuration,
      help: 'Duration of HTTP server requests to webhook endpoints (OpenTelemetry http.server.request.duration).',
      labelNames: REQUEST_LABELS,
      registers,
      collect: flush,
    });
    this.#executions = new Counter({
      name: METRIC.executions,
      help: 'Workflow executions finished, by workflow and result.',
      labelNames: ['workflow_id', 'result'],
      registers,
    });
    this.#discarded = new Counter({
      name: METRIC.executionsDiscarded,
      help: "Succeeded executions whose record and events were discarded (the workflow's spec.executionRecords.succeeded: Discard), by workflow.",
      labelNames: ['workflow_id'],
      registers,
    });
    this.#rejected = new Counter({
      name: METRIC.rejectedRequests,
      help: 'Webhook requests the gateway answered with a problem, by problem type.',
      labelNames: ['reason'],
      registers,
      collect: flush,
    });
    const depth = options.queueDepth;
    this.#queueDepth = new Gauge({
      name: METRIC.queueDepth,
      help: 'Executions waiting in the execution queue.',
      registers,
      ...(depth
        ? {
            async collect(this: Gauge) {
              // Redis down: the last value stays; a scrape must not fail (a 500 on /metrics).
              await Promise.resolve()
                .then(depth)
                .then(
                  (n) => this.set(n),
                  () => {},
                );
            },
          }
        : {}),
    });
    if (options.queueOldestAge) this.addQueueOldestAge(options.queueOldestAge);
    const decisions = this.#decisions;
    new Counter({
      name: METRIC.rateLimitDecisions,
      help: 'Rate limiter decisions, by decision.',
      labelNames: ['decision'],
      registers,
      // Every request on a limited endpoint is a decision: counted in plain numbers and
      // added at scrape time, as a labelled inc() hashes and checks its labels each time.
      // Every series from the first scrape, at 0: rate() sees a pod's first failures.
      collect(this: Counter<'decision'>) {
        for (const decision of RATE_LIMIT_DECISIONS) {
          this.inc({ decision }, decisions[decision]);
          decisions[decision] = 0;
        }
      },
    });
    this.#callbacks = new Counter({
      name: METRIC.callbackDeliveries,
      help: 'Async callback delivery attempts, by result.',
      labelNames: ['result'],
      registers,
    });
    const deadLetters = options.deadLetters;
    new Gauge({
      name: METRIC.deadLetters,
      help: 'Executions in the dead-letter list (retry policy exhausted).',
      registers,
      ...(deadLetters
        ? {
            async collect(this: Gauge) {
              await Promise.resolve()
                .then(deadLetters)
                .then(
                  (n) => this.set(n),
                  () => {},
                );
            },
          }
        : {}),
    });
    this.#deadLettered = new Counter({
      name: METRIC.deadLettered,
      help: 'Executions moved to the dead-letter list.',
      registers,
    });
    this.#retries = new Counter({
      name: METRIC.executionRetries,
      help: 'Execution attempts scheduled again: by a retry policy (automatic) or out of the dead-letter list (dead_letter).',
      labelNames: ['source'],
      registers,
    });
    this.#engineQueueRefused = new Counter({
      name: METRIC.engineQueueRefused,
      help: "Executions an in-process engine's queue refused (503 engine-overloaded), by reason: queue_full (maxQueued waiting), namespace_share (the queue full and the namespace at its share while others wait).",
      labelNames: ['reason'],
      registers,
    });
    // Both series from the start (at 0), so that a rate over either is defined.
    for (const reason of ENGINE_QUEUE_REFUSALS) this.#engineQueueRefused.inc({ reason }, 0);
  }

  /** RequestObserver: one observation per webhook request, recorded in a batch. */
  observe(o: RequestObservation): void {
    this.#observations.push(o);
  }

  #record(o: RequestObservation): void {
    const minute = countedMinute(o);
    // Not a time (a duration that is no number): nothing counted, as the histogram
    // would refuse it, and no route's consumers touched.
    if (!Number.isFinite(minute)) return;
    // Label values in REQUEST_LABELS order.
    this.#duration.observe(
      [
        o.application,
        o.environment,
        normaliseMethod(o.method),
        o.route,
        String(o.statusCode),
        this.#consumers.label(o.route, o.consumer, minute),
      ],
      o.durationSeconds,
      // When it was counted: the request's end.
      o.at + o.durationSeconds * 1000,
    );
    if (o.problem) this.#rejected.inc({ reason: CATALOGUE[o.problem].type });
  }

  recordExecution(workflowId: string, result: ExecutionResult): void {
    // The labelled series, kept: prom-client hashes the labels on every inc otherwise.
    const key = `${result} ${workflowId}`;
    let held = this.#executionSeries.get(key);
    if (!held) {
      held = { series: this.#executions.labels({ workflow_id: workflowId, result }), updatedMs: 0 };
      this.#executionSeries.set(key, held);
    }
    held.series.inc();
    held.updatedMs = this.#now();
  }

  /** A succeeded execution's record discarded (counted with its workflow's series kept). */
  recordDiscarded(workflowId: string): void {
    let series = this.#discardedSeries.get(workflowId);
    if (!series) {
      series = this.#discarded.labels({ workflow_id: workflowId });
      this.#discardedSeries.set(workflowId, series);
    }
    series.inc();
  }

  /**
   * Drops the series of routes and workflows not served now (deleted or moved triggers,
   * unpublished workflows) whose counts have not changed for `graceMs`, so that churn
   * (a trigger per preview environment) does not grow the exposition and this process's
   * memory for good. The grace counts from a series' last count, not from when its
   * route went: it lets the scrapes after that count see it (a route idle for an hour
   * before it went has been scraped at its final counts all along, and goes at once).
   * A route served again keeps its series. `unmatched` (requests no route served)
   * always stays.
   */
  forgetGone(
    served: { routes: ReadonlySet<string>; workflows: ReadonlySet<string> },
    graceMs: number,
    now: number = this.#now(),
  ): void {
    this.#observations.flush();
    const stale = (value: string, updatedMs: number, servedNow: ReadonlySet<string>) =>
      !servedNow.has(value) && now - updatedMs >= graceMs;
    for (const [route, updatedMs] of this.#duration.lastUpdated('http_route')) {
      if (route === UNMATCHED_ROUTE || !stale(route, updatedMs, served.routes)) continue;
      // Its consumers stay until it has been idle for a day (forgetIdle), as in the
      // memory store, which does not know what is served: a route served again meanwhile
      // labels its consumers as before, in both.
      this.#duration.forget('http_route', route);
    }
    const workflows = new Map<string, number>();
    for (const [key, { updatedMs }] of this.#executionSeries) {
      const id = key.slice(key.indexOf(' ') + 1);
      workflows.set(id, Math.max(updatedMs, workflows.get(id) ?? -Infinity));
    }
    for (const [id, updatedMs] of workflows) {
      if (!stale(id, updatedMs, served.workflows)) continue;
      for (const result of ['succeeded', 'failed'] as const) {
        if (this.#executionSeries.delete(`${result} ${id}`))
          this.#executions.remove({ workflow_id: id, result });
      }
      // Goes with the workflow's execution series (a discard follows its success).
      if (this.#discardedSeries.delete(id)) this.#discarded.remove({ workflow_id: id });
    }
  }

  /**
   * Drops the series of every route (served or not, `unmatched` too) with no request
   * counted in the last 24 h, and starts its consumers again, as the memory store does
   * (and as the route's next request would): no analytics window reaches back to them,
   * and a route's consumers labelled after a quiet day do not add to those before it.
   */
  forgetIdle(now: number = this.#now()): void {
    this.#observations.flush();
    this.#consumers.forgetIdle(countedMinute({ at: now, durationSeconds: 0 }));
  }

  recordRateLimitDecision(decision: RateLimitDecision): void {
    this.#decisions[decision] += 1;
  }

  recordCallbackDelivery(result: CallbackResult): void {
    this.#callbacks.inc({ result });
  }

  recordRetry(source: RetrySource, count = 1): void {
    this.#retries.inc({ source }, count);
  }

  recordDeadLettered(): void {
    this.#deadLettered.inc();
  }

  recordEngineQueueRefused(reason: EngineQueueRefusal): void {
    this.#engineQueueRefused.inc({ reason });
  }

  /**
   * What the engine tells (its EngineObserver), recorded here: every role that runs
   * executions (dev, an inline gateway, the worker) counts them the same way.
   */
  engineObserver() {
    return {
      executionFinished: (e: { workflowId: string; status: string }) =>
        this.recordExecution(e.workflowId, e.status === 'succeeded' ? 'succeeded' : 'failed'),
      callbackDelivered: (r: { delivered: boolean; refused?: boolean }) =>
        this.recordCallbackDelivery(r.delivered ? 'delivered' : r.refused ? 'refused' : 'failed'),
      attemptRetried: () => this.recordRetry('automatic'),
      deadLettered: () => this.recordDeadLettered(),
      executionDiscarded: (e: { workflowId: string }) => this.recordDiscarded(e.workflowId),
      queueRefused: (reason: EngineQueueRefusal) => this.recordEngineQueueRefused(reason),
    };
  }

  /**
   * Queue mode with replica acknowledgements: requests by outcome, read from the plain
   * counts the acknowledgements keep (added at scrape time, as the rate-limit decisions).
   */
  addReplicaAcks(counts: Record<'confirmed' | 'unconfirmed' | 'failed', number>): void {
    if (this.registry.getSingleMetric(METRIC.queueReplicaAcks)) return;
    const seen = { confirmed: 0, unconfirmed: 0, failed: 0 };
    const counter = new Counter({
      name: METRIC.queueReplicaAcks,
      help: 'Queued executions by whether Redis replicas confirmed them before the answer (HOOKGATE_QUEUE_ACK_REPLICAS): confirmed, unconfirmed (too few in time: 503) or failed (the WAIT failed: 503).',
      labelNames: ['result'],
      registers: [this.registry],
      collect(this: Counter<'result'>) {
        for (const result of ['confirmed', 'unconfirmed', 'failed'] as const) {
          const added = counts[result] - seen[result];
          if (added > 0) this.inc({ result }, added);
          seen[result] = counts[result];
        }
      },
    });
    // Every series from the start (at 0), so that a rate over it is defined.
    for (const result of ['confirmed', 'unconfirmed', 'failed'] as const)
      counter.inc({ result }, 0);
  }

  /**
   * Registers hookgate_queue_oldest_age_seconds, read at every scrape (for a role
   * that learns only after its metrics exist whether it reads a queue).
   */
  addQueueOldestAge(age: () => number | Promise<number>): void {
    if (this.registry.getSingleMetric(METRIC.queueOldestAge)) return;
    new Gauge({
      name: METRIC.queueOldestAge,
      help: 'Age in seconds of the oldest execution job not done (waiting or running); 0 when the queue is empty.',
      registers: [this.registry],
      async collect(this: Gauge) {
        await Promise.resolve()
          .then(age)
          .then(
            (n) => this.set(n),
            () => {},
          );
      },
    });
  }

  setQueueDepth(depth: number): void {
    this.#queueDepth.set(depth);
  }
}
