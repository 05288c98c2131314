// The memory analytics backend: an in-process windowed store fed by the gateway's
// RequestObserver feed. One bucket per wall-clock minute for 24 h; in each minute, per
// series (application, environment, method, route, status code, consumer) a count, a
// latency sum and a sparse latency histogram over LATENCY_BUCKETS_SECONDS (mergeable:
// cells add up). Old minutes are evicted as time moves on, and the number of series
// is capped, so memory stays bounded whatever the traffic.
import type { RequestObservation, RequestObserver } from '../gateway/observations.ts';
import {
  buildResult,
  DEFAULT_TOP_LIMIT,
  type AnalyticsBackend,
  type AnalyticsFilter,
  type AnalyticsResult,
  type FilterOptions,
  type GroupTotals,
  type TimeseriesPoint,
} from './backend.ts';
import { ConsumerLabels, type ConsumerLabelOptions } from './consumers.ts';
import {
  ENVIRONMENTS,
  isErrorStatus,
  LATENCY_CELLS,
  latencyCell,
  MAX_WINDOW_MINUTES,
  normaliseMethod,
  WINDOWS,
} from './definitions.ts';

const MINUTE_MS = 60_000;

export interface MemoryAnalyticsOptions {
  /** Clock for "now" when querying; default Date.now. */
  now?: () => number;
  consumers?: ConsumerLabelOptions;
  /** Most distinct series kept at once; observations of new series beyond it are dropped. */
  maxSeries?: number;
}

export const DEFAULT_MAX_SERIES = 10_000;

interface Series {
  id: number;
  application: string;
  environment: string;
  method: string;
  route: string;
  statusCode: number;
  consumer: string;
  /** Newest minute with data for this series (for eviction). */
  lastMinute: number;
}

/** One series' data within one minute. Cells are a sparse window [lo, lo + cells.length). */
class Cell {
  count = 0;
  sumSeconds = 0;
  lo = -1;
  cells = new Uint32Array(0);

  add(durationSeconds: number): void {
    this.count += 1;
    this.sumSeconds += durationSeconds;
    const index = latencyCell(durationSeconds);
    if (this.lo < 0) {
      this.lo = index;
      this.cells = new Uint32Array(1);
    } else if (index < this.lo || index >= this.lo + this.cells.length) {
      const lo = Math.min(this.lo, index);
      const hi = Math.max(this.lo + this.cells.length, index + 1);
      const grown = new Uint32Array(hi - lo);
      grown.set(this.cells, this.lo - lo);
      this.cells = grown;
      this.lo = lo;
    }
    const at = index - this.lo;
    this.cells[at] = (this.cells[at] as number) + 1;
  }

  mergeInto(target: Float64Array): void {
    for (let i = 0; i < this.cells.length; i += 1) {
      target[this.lo + i] = (target[this.lo + i] as number) + (this.cells[i] as number);
    }
  }
}

export interface MemoryStats {
  minutes: number;
  series: number;
  cells: number;
  droppedObservations: number;
}

export class MemoryAnalytics implements AnalyticsBackend, RequestObserver {
  readonly #now: () => number;
  readonly #consumers: ConsumerLabels;
  readonly #maxSeries: number;
  readonly #series = new Map<string, Series>();
  readonly #seriesById = new Map<number, Series>();
  /** epoch minute -> series id -> data */
  readonly #minutes = new Map<number, Map<number, Cell>>();
  #nextId = 0;
  #newestMinute = -Infinity;
  #dropped = 0;

  constructor(options: MemoryAnalyticsOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#consumers = new ConsumerLabels(options.consumers);
    this.#maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
  }

  /**
   * RequestObserver. The observation counts in the minute the request finished
   * (arrival + duration), which is when Prometheus would see it too.
   */
  observe(o: RequestObservation): void {
    const minute = Math.floor((o.at + o.durationSeconds * 1000) / MINUTE_MS);
    if (minute > this.#newestMinute) this.#advance(minute);
    if (minute <= this.#newestMinute - MAX_WINDOW_MINUTES) {
      this.#dropped += 1;
      return;
    }
    const series = this.#seriesFor(o);
    if (!series) {
      this.#dropped += 1;
      return;
    }
    if (minute > series.lastMinute) series.lastMinute = minute;
    let bucket = this.#minutes.get(minute);
    if (!bucket) {
      bucket = new Map();
      this.#minutes.set(minute, bucket);
    }
    let cell = bucket.get(series.id);
    if (!cell) {
      cell = new Cell();
      bucket.set(series.id, cell);
    }
    cell.add(o.durationSeconds);
  }

  stats(): MemoryStats {
    let cells = 0;
    for (const bucket of this.#minutes.values()) cells += bucket.size;
    return {
      minutes: this.#minutes.size,
      series: this.#series.size,
      cells,
      droppedObservations: this.#dropped,
    };
  }

  query(filter: AnalyticsFilter): Promise<AnalyticsResult> {
    const now = this.#now();
    const { first, last } = windowMinutes(now, filter);
    const match = this.#matcher(filter);
    const groups = new Map<string, GroupTotals>();
    const histogram = new Float64Array(LATENCY_CELLS);
    const points: TimeseriesPoint[] = [];
    for (let minute = first; minute <= last; minute += 1) {
      const point = { at: new Date(minute * MINUTE_MS).toISOString(), requests: 0, errors: 0 };
      points.push(point);
      const bucket = this.#minutes.get(minute);
      if (!bucket) continue;
      for (const [id, cell] of bucket) {
        const series = match(id);
        if (!series) continue;
        const key = `${series.method} ${series.route} ${series.statusCode}`;
        let group = groups.get(key);
        if (!group) {
          group = {
            method: series.method,
            route: series.route,
            statusCode: series.statusCode,
            count: 0,
            sumSeconds: 0,
          };
          groups.set(key, group);
        }
        group.count += cell.count;
        group.sumSeconds += cell.sumSeconds;
        cell.mergeInto(histogram);
        point.requests += cell.count;
        if (isErrorStatus(series.statusCode)) point.errors += cell.count;
      }
    }
    return Promise.resolve(
      buildResult({
        groups: [...groups.values()],
        cells: histogram,
        limit: filter.limit ?? DEFAULT_TOP_LIMIT,
        from: first * MINUTE_MS,
        to: now,
        points,
      }),
    );
  }

  options(filter: AnalyticsFilter): Promise<FilterOptions> {
    const { first, last } = windowMinutes(this.#now(), filter);
    const seen = new Set<number>();
    for (let minute = first; minute <= last; minute += 1) {
      const bucket = this.#minutes.get(minute);
      if (bucket) for (const id of bucket.keys()) seen.add(id);
    }
    const applications = new Set<string>();
    const methods = new Set<string>();
    const statusCodes = new Set<number>();
    const consumers = new Set<string>();
    const routes = new Set<string>();
    const apps = new Set(filter.applications);
    for (const id of seen) {
      const s = this.#seriesById.get(id) as Series;
      if (filter.environment && s.environment !== filter.environment) continue;
      applications.add(s.application);
      if (apps.size > 0 && !apps.has(s.application)) continue;
      methods.add(s.method);
      statusCodes.add(s.statusCode);
      consumers.add(s.consumer);
      routes.add(s.route);
    }
    return Promise.resolve(
      sortedOptions({ applications, methods, statusCodes, consumers, routes }),
    );
  }

  /** Per query: which series pass the filter (memoised by series id). */
  #matcher(filter: AnalyticsFilter): (id: number) => Series | undefined {
    const apps = new Set(filter.applications);
    const memo = new Map<number, Series | undefined>();
    return (id) => {
      if (memo.has(id)) return memo.get(id);
      const s = this.#seriesById.get(id) as Series;
      const ok =
        (apps.size === 0 || apps.has(s.application)) &&
        (filter.environment === undefined || s.environment === filter.environment) &&
        (filter.method === undefined || s.method === filter.method) &&
        (filter.statusCode === undefined || s.statusCode === filter.statusCode) &&
        (filter.consumer === undefined || s.consumer === filter.consumer);
      const result = ok ? s : undefined;
      memo.set(id, result);
      return result;
    };
  }

  #seriesFor(o: RequestObservation): Series | undefined {
    const method = normaliseMethod(o.method);
    const consumer = this.#consumers.label(o.route, o.consumer);
    const key = JSON.stringify([
      o.application,
      o.environment,
      method,
      o.route,
      o.statusCode,
      consumer,
    ]);
    let series = this.#series.get(key);
    if (series) return series;
    if (this.#series.size >= this.#maxSeries) return undefined;
    series = {
      id: this.#nextId++,
      application: o.application,
      environment: o.environment,
      method,
      route: o.route,
      statusCode: o.statusCode,
      consumer,
      lastMinute: -Infinity,
    };
    this.#series.set(key, series);
    this.#seriesById.set(series.id, series);
    return series;
  }

  /** Time moved to a new minute: evict minutes (and series) older than the retention. */
  #advance(minute: number): void {
    this.#newestMinute = minute;
    const oldest = minute - MAX_WINDOW_MINUTES + 1;
    let evicted = false;
    for (const m of this.#minutes.keys()) {
      if (m < oldest) {
        this.#minutes.delete(m);
        evicted = true;
      }
    }
    if (!evicted) return;
    for (const [key, s] of this.#series) {
      if (s.lastMinute < oldest) {
        this.#series.delete(key);
        this.#seriesById.delete(s.id);
      }
    }
  }
}

/** The minutes a window covers: the current minute and the window's earlier minutes. */
export function windowMinutes(
  now: number,
  filter: AnalyticsFilter,
): { first: number; last: number } {
  const last = Math.floor(now / MINUTE_MS);
  return { first: last - WINDOWS[filter.window] + 1, last };
}

export function sortedOptions(sets: {
  applications: Set<string>;
  methods: Set<string>;
  statusCodes: Set<number>;
  consumers: Set<string>;
  routes: Set<string>;
}): FilterOptions {
  const sort = (values: Set<string>): string[] => [...values].sort((a, b) => a.localeCompare(b));
  return {
    applications: sort(sets.applications),
    environments: ENVIRONMENTS,
    methods: sort(sets.methods),
    statusCodes: [...sets.statusCodes].sort((a, b) => a - b),
    consumers: sort(sets.consumers),
    routes: sort(sets.routes),
  };
}
