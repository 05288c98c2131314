// The memory analytics backend: an in-process windowed store fed by the gateway's
// RequestObserver feed. One block per wall-clock minute for 24 h; in each block, per
// series (application, environment, method, route, status code, consumer) a count, a
// latency sum and a sparse latency histogram over LATENCY_BUCKETS_SECONDS (mergeable:
// cells add up). Blocks are columnar (typed arrays, no object per series and minute)
// and sealed to their exact size once their minute is past. Old minutes are evicted
// as time moves on, the number of series is capped, and the whole is bounded in bytes
// (docs/limits.md): past the budget the oldest minutes go first, and with them the
// series seen in no minute left. A route's consumers are not forgotten with its series:
// they follow the consumer rule (consumers.ts), a day after the route's last request,
// as the gateway's metrics do, so both label a request alike.
import type { BoundedStore, BoundedStoreStats } from '../bounded.ts';
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
import { Batch } from './batch.ts';
import { ConsumerLabels, countedMinute, type ConsumerLabelOptions } from './consumers.ts';
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
/** Blocks this many minutes older than the newest stay writable (late observations). */
const OPEN_MINUTES = 2;

export interface MemoryAnalyticsOptions {
  /** Clock for "now" when querying; default Date.now. */
  now?: () => number;
  consumers?: ConsumerLabelOptions;
  /** Most distinct series kept at once; observations of new series beyond it are dropped. */
  maxSeries?: number;
  /** Bytes the minutes and series may take; past it the oldest minutes are dropped. */
  maxBytes?: number;
}

export const DEFAULT_MAX_SERIES = 10_000;
export const DEFAULT_ANALYTICS_BYTES = 64 * 1024 * 1024;
/** One entry of a Map index while a block is open (key, value, hash table slot). */
const INDEX_ENTRY_BYTES = 40;
/**
 * A block's objects: itself, its six typed arrays and its Map entry (measured: about
 * 1.9 KiB per sealed block beyond its arrays' contents, 600 blocks of 400 rows).
 */
const BLOCK_BYTES = 2048;
/** A series object, its fields and its Map entries, beyond the key's characters. */
const SERIES_BYTES = 200;

interface Series {
  id: number;
  key: string;
  application: string;
  environment: string;
  method: string;
  route: string;
  statusCode: number;
  consumer: string;
  /** Newest minute with data for this series (for eviction). */
  lastMinute: number;
}

function grow<T extends Uint32Array | Int32Array | Float64Array | Uint8Array>(
  array: T,
  needed: number,
): T {
  if (needed <= array.length) return array;
  const bigger = new (array.constructor as new (n: number) => T)(
    Math.max(needed, array.length * 2),
  );
  bigger.set(array);
  return bigger;
}

/**
 * One minute of data. Rows: one per series seen in the minute (series id, count,
 * latency sum). Entries: the non-empty histogram cells of each row (row, cell, count).
 */
class MinuteBlock {
  rows = 0;
  series = new Int32Array(8);
  counts = new Uint32Array(8);
  sums = new Float64Array(8);
  entries = 0;
  entryRow = new Uint32Array(8);
  entryCell = new Uint8Array(8);
  entryCount = new Uint32Array(8);
  /** series id -> row, and row * 64 + cell -> entry; only while the block is open. */
  #rowIndex: Map<number, number> | null = new Map();
  #entryIndex: Map<number, number> | null = new Map();
  /** What the block takes: its arrays and, while open, its indexes. */
  bytes = this.#measure();

  #measure(): number {
    const arrays =
      this.series.byteLength +
      this.counts.byteLength +
      this.sums.byteLength +
      this.entryRow.byteLength +
      this.entryCell.byteLength +
      this.entryCount.byteLength +
      BLOCK_BYTES;
    return this.open ? arrays + (this.rows + this.entries) * INDEX_ENTRY_BYTES : arrays;
  }

  /** Records one observation; returns how many bytes the block grew by. */
  add(seriesId: number, durationSeconds: number): number {
    const before = this.bytes;
    const rows = this.rows;
    const entries = this.entries;
    const rowIndex = (this.#rowIndex ??= this.#buildRowIndex());
    let row = rowIndex.get(seriesId);
    if (row === undefined) {
      row = this.rows;
      this.rows += 1;
      this.series = grow(this.series, this.rows);
      this.counts = grow(this.counts, this.rows);
      this.sums = grow(this.sums, this.rows);
      this.series[row] = seriesId;
      rowIndex.set(seriesId, row);
    }
    this.counts[row] = (this.counts[row] as number) + 1;
    this.sums[row] = (this.sums[row] as number) + durationSeconds;
    const cell = latencyCell(durationSeconds);
    const entryIndex = (this.#entryIndex ??= this.#buildEntryIndex());
    const key = row * 64 + cell;
    let entry = entryIndex.get(key);
    if (entry === undefined) {
      entry = this.entries;
      this.entries += 1;
      this.entryRow = grow(this.entryRow, this.entries);
      this.entryCell = grow(this.entryCell, this.entries);
      this.entryCount = grow(this.entryCount, this.entries);
      this.entryRow[entry] = row;
      this.entryCell[entry] = cell;
      entryIndex.set(key, entry);
    }
    this.entryCount[entry] = (this.entryCount[entry] as number) + 1;
    if (this.rows !== rows || this.entries !== entries) this.bytes = this.#measure();
    return this.bytes - before;
  }

  /** Drop the write indexes and shrink the arrays to their content; returns the change in bytes. */
  seal(): number {
    if (!this.#rowIndex && !this.#entryIndex) return 0;
    const before = this.bytes;
    this.#rowIndex = null;
    this.#entryIndex = null;
    this.series = this.series.slice(0, this.rows);
    this.counts = this.counts.slice(0, this.rows);
    this.sums = this.sums.slice(0, this.rows);
    this.entryRow = this.entryRow.slice(0, this.entries);
    this.entryCell = this.entryCell.slice(0, this.entries);
    this.entryCount = this.entryCount.slice(0, this.entries);
    this.bytes = this.#measure();
    return this.bytes - before;
  }

  get open(): boolean {
    return this.#rowIndex !== null;
  }

  #buildRowIndex(): Map<number, number> {
    const index = new Map<number, number>();
    for (let row = 0; row < this.rows; row += 1) index.set(this.series[row] as number, row);
    return index;
  }

  #buildEntryIndex(): Map<number, number> {
    const index = new Map<number, number>();
    for (let e = 0; e < this.entries; e += 1) {
      index.set((this.entryRow[e] as number) * 64 + (this.entryCell[e] as number), e);
    }
    return index;
  }
}

export interface MemoryStats extends BoundedStoreStats {
  minutes: number;
  series: number;
  /** (minute, series) rows across all minutes. */
  cells: number;
  droppedObservations: number;
}

/** What one query needs per series id: does it match, its group, is it an error. */
interface Selection {
  match: Uint8Array;
  error: Uint8Array;
  group: Int32Array;
  groups: GroupTotals[];
}

export class MemoryAnalytics implements AnalyticsBackend, RequestObserver, BoundedStore {
  readonly storeName = 'analytics';
  readonly #now: () => number;
  readonly #consumers: ConsumerLabels;
  readonly #maxSeries: number;
  readonly #maxBytes: number;
  /** Bytes of the minute blocks and the series. */
  #bytes = 0;
  /** Rows dropped for the byte budget and by age; observations refused by the series cap. */
  readonly #evictions = { bytes: 0, count: 0, expired: 0 };
  /** Minutes before this one were dropped for the byte budget: late observations too. */
  #floorMinute = -Infinity;
  readonly #series = new Map<string, Series>();
  readonly #seriesById: (Series | undefined)[] = [];
  readonly #freeIds: number[] = [];
  readonly #minutes = new Map<number, MinuteBlock>();
  #newestMinute = -Infinity;
  #dropped = 0;
  /** Observations not yet recorded (see batch.ts); every read flushes them first. */
  readonly #observations = new Batch<RequestObservation>((o) => this.#record(o));

  constructor(options: MemoryAnalyticsOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#consumers = new ConsumerLabels(options.consumers);
    this.#maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
    this.#maxBytes = options.maxBytes ?? DEFAULT_ANALYTICS_BYTES;
  }

  /** RequestObserver: one observation per webhook request, recorded in a batch. */
  observe(o: RequestObservation): void {
    this.#observations.push(o);
  }

  /**
   * The observation counts in the minute the request finished (arrival + duration),
   * which is when Prometheus would see it too.
   */
  #record(o: RequestObservation): void {
    const minute = countedMinute(o);
    if (!Number.isFinite(minute) || !(o.durationSeconds >= 0)) {
      this.#dropped += 1;
      return;
    }
    if (minute > this.#newestMinute) this.#advance(minute);
    if (minute <= this.#newestMinute - MAX_WINDOW_MINUTES || minute < this.#floorMinute) {
      this.#dropped += 1;
      return;
    }
    const series = this.#seriesFor(o, minute);
    if (!series) {
      this.#dropped += 1;
      this.#evictions.count += 1;
      return;
    }
    if (minute > series.lastMinute) series.lastMinute = minute;
    let block = this.#minutes.get(minute);
    if (!block) {
      block = new MinuteBlock();
      this.#minutes.set(minute, block);
      this.#bytes += block.bytes;
    }
    this.#bytes += block.add(series.id, o.durationSeconds);
    if (this.#bytes > this.#maxBytes) this.#shrink();
  }

  /**
   * Over the byte budget: drops the oldest minutes (never the newest) until the store
   * is back under 90 % of it, so that a store at its budget does not shrink on every
   * observation; then the series seen in none of the minutes left.
   */
  #shrink(): void {
    const target = this.#maxBytes * 0.9;
    let oldestKept = -Infinity;
    while (this.#bytes > target && this.#minutes.size > 1) {
      let oldest = Infinity;
      for (const m of this.#minutes.keys()) if (m < oldest) oldest = m;
      if (oldest >= this.#newestMinute) break;
      const block = this.#minutes.get(oldest) as MinuteBlock;
      this.#minutes.delete(oldest);
      this.#bytes -= block.bytes;
      this.#evictions.bytes += block.rows;
      oldestKept = oldest + 1;
    }
    if (oldestKept === -Infinity) return;
    this.#floorMinute = oldestKept;
    this.#forgetSeriesBefore(oldestKept);
  }

  /**
   * Drops the series whose newest minute is before `minute`. The consumers of their
   * routes stay: their own rule forgets them (#advance), not the byte budget, which the
   * gateway's metrics do not share.
   */
  #forgetSeriesBefore(minute: number): void {
    for (const s of this.#seriesById) {
      if (!s || s.lastMinute >= minute) continue;
      this.#series.delete(s.key);
      this.#seriesById[s.id] = undefined;
      this.#freeIds.push(s.id);
      this.#bytes -= seriesBytes(s.key);
    }
  }

  stats(): MemoryStats {
    this.#observations.flush();
    let cells = 0;
    for (const block of this.#minutes.values()) cells += block.rows;
    return {
      bytes: this.#bytes,
      entries: cells,
      evictions: { ...this.#evictions },
      minutes: this.#minutes.size,
      series: this.#series.size,
      cells,
      droppedObservations: this.#dropped,
    };
  }

  query(filter: AnalyticsFilter): Promise<AnalyticsResult> {
    this.#observations.flush();
    const now = this.#now();
    const { first, last } = windowMinutes(now, filter);
    const { match, error, group, groups } = this.#select(filter);
    const counts = new Float64Array(groups.length);
    const sums = new Float64Array(groups.length);
    const histogram = new Float64Array(LATENCY_CELLS);
    const points: TimeseriesPoint[] = [];
    for (let minute = first; minute <= last; minute += 1) {
      const point = { at: new Date(minute * MINUTE_MS).toISOString(), requests: 0, errors: 0 };
      points.push(point);
      const block = this.#minutes.get(minute);
      if (!block) continue;
      const { series, counts: rowCounts, sums: rowSums } = block;
      for (let row = 0; row < block.rows; row += 1) {
        const id = series[row] as number;
        if (match[id] === 0) continue;
        const g = group[id] as number;
        const c = rowCounts[row] as number;
        counts[g] = (counts[g] as number) + c;
        sums[g] = (sums[g] as number) + (rowSums[row] as number);
        point.requests += c;
        if (error[id] === 1) point.errors += c;
      }
      const { entryRow, entryCell, entryCount } = block;
      for (let e = 0; e < block.entries; e += 1) {
        if (match[series[entryRow[e] as number] as number] === 0) continue;
        const cell = entryCell[e] as number;
        histogram[cell] = (histogram[cell] as number) + (entryCount[e] as number);
      }
    }
    groups.forEach((g, i) => {
      g.count = counts[i] as number;
      g.sumSeconds = sums[i] as number;
    });
    return Promise.resolve(
      buildResult({
        groups,
        cells: histogram,
        limit: filter.limit ?? DEFAULT_TOP_LIMIT,
        from: first * MINUTE_MS,
        to: now,
        points,
      }),
    );
  }

  options(filter: AnalyticsFilter): Promise<FilterOptions> {
    this.#observations.flush();
    const { first, last } = windowMinutes(this.#now(), filter);
    const seen = new Uint8Array(this.#seriesById.length);
    for (let minute = first; minute <= last; minute += 1) {
      const block = this.#minutes.get(minute);
      if (!block) continue;
      for (let row = 0; row < block.rows; row += 1) seen[block.series[row] as number] = 1;
    }
    const applications = new Set<string>();
    const methods = new Set<string>();
    const statusCodes = new Set<number>();
    const consumers = new Set<string>();
    const routes = new Set<string>();
    const apps = new Set(filter.applications);
    for (const s of this.#seriesById) {
      if (!s || seen[s.id] !== 1) continue;
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

  /** Per query, once per series: whether it passes the filter, and its group. */
  #select(filter: AnalyticsFilter): Selection {
    const size = this.#seriesById.length;
    const match = new Uint8Array(size);
    const error = new Uint8Array(size);
    const group = new Int32Array(size);
    const groups: GroupTotals[] = [];
    const groupIndex = new Map<string, number>();
    const apps = new Set(filter.applications);
    for (const s of this.#seriesById) {
      if (!s) continue;
      const ok =
        (apps.size === 0 || apps.has(s.application)) &&
        (filter.environment === undefined || s.environment === filter.environment) &&
        (filter.method === undefined || s.method === filter.method) &&
        (filter.statusCode === undefined || s.statusCode === filter.statusCode) &&
        (filter.consumer === undefined || s.consumer === filter.consumer);
      if (!ok) continue;
      const key = `${s.method} ${s.route} ${s.statusCode}`;
      let g = groupIndex.get(key);
      if (g === undefined) {
        g = groups.length;
        groups.push({
          method: s.method,
          route: s.route,
          statusCode: s.statusCode,
          count: 0,
          sumSeconds: 0,
        });
        groupIndex.set(key, g);
      }
      match[s.id] = 1;
      error[s.id] = isErrorStatus(s.statusCode) ? 1 : 0;
      group[s.id] = g;
    }
    return { match, error, group, groups };
  }

  #seriesFor(o: RequestObservation, minute: number): Series | undefined {
    const method = normaliseMethod(o.method);
    const consumer = this.#consumers.label(o.route, o.consumer, minute);
    // join builds the key flat in one go (a template builds a rope the Map then flattens).
    const key = [o.application, o.environment, method, o.route, o.statusCode, consumer].join(
      '\u0000',
    );
    let series = this.#series.get(key);
    if (series) return series;
    if (this.#series.size >= this.#maxSeries) return undefined;
    series = {
      id: this.#freeIds.pop() ?? this.#seriesById.length,
      key,
      application: o.application,
      environment: o.environment,
      method,
      route: o.route,
      statusCode: o.statusCode,
      consumer,
      lastMinute: -Infinity,
    };
    this.#series.set(key, series);
    this.#seriesById[series.id] = series;
    this.#bytes += seriesBytes(key);
    return series;
  }

  /**
   * Time moved to a new minute: seal past blocks, evict minutes (and series) too old,
   * and the consumers of routes idle for a day (a deleted trigger's would stay for good).
   */
  #advance(minute: number): void {
    this.#newestMinute = minute;
    const oldest = minute - MAX_WINDOW_MINUTES + 1;
    let evicted = false;
    for (const [m, block] of this.#minutes) {
      if (m < oldest) {
        this.#minutes.delete(m);
        this.#bytes -= block.bytes;
        this.#evictions.expired += block.rows;
        evicted = true;
      } else if (m < minute - OPEN_MINUTES && block.open) {
        this.#bytes += block.seal();
      }
    }
    if (evicted) this.#forgetSeriesBefore(oldest);
    this.#consumers.forgetIdle(minute);
  }
}

/** About what a series takes: its key's characters (two bytes each at most) and the rest. */
function seriesBytes(key: string): number {
  return SERIES_BYTES + 2 * key.length;
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
  // '' (a request that matched no endpoint has no application; an anonymous caller no
  // consumer) is no value a filter can take: not offered.
  const named = (values: Set<string>): string[] => sort(values).filter((v) => v !== '');
  return {
    applications: named(sets.applications),
    environments: ENVIRONMENTS,
    methods: sort(sets.methods),
    statusCodes: [...sets.statusCodes].sort((a, b) => a - b),
    consumers: named(sets.consumers),
    routes: sort(sets.routes),
  };
}
