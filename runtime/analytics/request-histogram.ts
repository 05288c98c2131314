// The request duration histogram (http_server_request_duration_seconds), with storage
// made for the request path.
//
// prom-client's Histogram, on every observe, wraps the labels in a new object,
// validates every label name, hashes the label object into a string and finds the
// bucket by using its bound as a property name. At thousands of webhook requests per
// second, that was most of the gateway's metrics cost. This histogram takes the label
// values in order, looks the label set up by their join, and keeps for it the bucket
// counts in a Float64Array whose cell is found by binary search (latencyCell).
//
// It is exposed through the same prom-client Registry, and produces what a prom-client
// Histogram produces: per label set in first-seen order, the cumulative `_bucket`
// series (`le` first, then +Inf), `_sum` and `_count`; and then, as OpenMetrics does,
// `_created`: when the label set's counters started from zero (epoch seconds: when its
// first observation was recorded). The Prometheus analytics read it to tell a series born in
// a window from one that Prometheus did not see before it (docs/analytics.md).
import type { Histogram, Registry } from 'prom-client';
import { LATENCY_BUCKETS_SECONDS, LATENCY_CELLS, latencyCell } from './definitions.ts';

interface LabelSet<L extends string> {
  labels: Record<L, string>;
  /** Non-cumulative counts per cell of LATENCY_BUCKETS_SECONDS, +Inf last. */
  cells: Float64Array;
  sum: number;
  count: number;
  /** When it last changed (epoch ms: the latest observation's time). */
  updatedMs: number;
  /** When its counters started from zero (epoch ms: when the set was made). */
  createdMs: number;
}

interface ExportedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

export interface RequestHistogramOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  registers: Registry[];
  /** Called before every read of the metric, like prom-client's `collect`. */
  collect?: () => void;
}

export class RequestDurationHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly labelNames: readonly L[];
  #sets = new Map<string, LabelSet<L>>();
  readonly #collect: (() => void) | undefined;

  constructor(options: RequestHistogramOptions<L>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.#collect = options.collect;
    // The registry only reads name, help, type and aggregator, and calls get() and reset().
    for (const registry of options.registers)
      registry.registerMetric(this as unknown as Histogram<L>);
  }

  /**
   * One observation; `values` are the label values in `labelNames` order (like
   * prom-client's labels(...values)), so the key is one join and no object is built.
   * `atMs`: when it was made (epoch ms; default now), for lastUpdated.
   */
  observe(values: readonly string[], seconds: number, atMs: number = Date.now()): void {
    if (!Number.isFinite(seconds)) throw new TypeError(`Value is not a valid number: ${seconds}`);
    const key = values.join('\u0000');
    let set = this.#sets.get(key);
    if (!set) {
      set = {
        labels: this.#labels(values),
        cells: new Float64Array(LATENCY_CELLS),
        sum: 0,
        count: 0,
        updatedMs: atMs,
        createdMs: Date.now(),
      };
      this.#sets.set(key, set);
    }
    const cell = latencyCell(seconds);
    set.cells[cell] = (set.cells[cell] as number) + 1;
    set.sum += seconds;
    set.count += 1;
    if (atMs > set.updatedMs) set.updatedMs = atMs;
  }

  #labels(values: readonly string[]): Record<L, string> {
    if (values.length !== this.labelNames.length) {
      throw new Error(`${this.name} takes ${this.labelNames.length} label values`);
    }
    const labels = {} as Record<L, string>;
    this.labelNames.forEach((name, i) => (labels[name] = values[i] as string));
    return labels;
  }

  reset(): void {
    this.#sets = new Map();
  }

  /**
   * The values `label` has among the label sets recorded, each with when one of its
   * sets last changed (epoch ms).
   */
  lastUpdated(label: L): Map<string, number> {
    const values = new Map<string, number>();
    for (const set of this.#sets.values()) {
      const value = set.labels[label];
      const seen = values.get(value);
      if (seen === undefined || set.updatedMs > seen) values.set(value, set.updatedMs);
    }
    return values;
  }

  /** Drops every label set whose `label` is `value` (its series leave the exposition). */
  forget(label: L, value: string): void {
    for (const [key, set] of this.#sets) if (set.labels[label] === value) this.#sets.delete(key);
  }

  /** The metric as prom-client's Registry reads it (the Histogram's get() format). */
  get(): Promise<{
    name: string;
    help: string;
    type: string;
    aggregator: string;
    values: ExportedValue[];
  }> {
    this.#collect?.();
    const values: ExportedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const set of this.#sets.values()) {
      let cumulative = 0;
      LATENCY_BUCKETS_SECONDS.forEach((le, i) => {
        cumulative += set.cells[i] as number;
        values.push({ labels: { le, ...set.labels }, value: cumulative, metricName: bucket });
      });
      values.push(
        { labels: { le: '+Inf', ...set.labels }, value: set.count, metricName: bucket },
        { labels: { ...set.labels }, value: set.sum, metricName: `${this.name}_sum` },
        { labels: { ...set.labels }, value: set.count, metricName: `${this.name}_count` },
        {
          labels: { ...set.labels },
          value: set.createdMs / 1000,
          metricName: `${this.name}_created`,
        },
      );
    }
    const { name, help, type, aggregator } = this;
    return Promise.resolve({ name, help, type, aggregator, values });
  }
}
