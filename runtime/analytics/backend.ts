// The analytics port: what the analytics API asks of a backend, whichever adapter
// (the in-process windowed store, or Prometheus) answers. Both compute every figure
// by the definitions in docs/analytics.md, from the same data model: per series
// (application, environment, method, route, status code, consumer) a request count,
// a latency sum and a latency histogram over LATENCY_BUCKETS_SECONDS.
import {
  isErrorStatus,
  quantileFromCells,
  round2,
  type AnalyticsWindow,
  type Environment,
} from './definitions.ts';

export interface AnalyticsFilter {
  /** Empty: all applications. */
  applications: string[];
  environment?: Environment;
  window: AnalyticsWindow;
  method?: string;
  statusCode?: number;
  consumer?: string;
  /** Rows per top list; default 10. */
  limit?: number;
}

export interface SummaryCards {
  /** Number of requests in the window. */
  totalSpans: number;
  /** P99 of request durations over the whole window, ms; null without requests. */
  avgP99LatencyMs: number | null;
  /** Requests answered 5xx or 408. */
  errorCount: number;
  /** errorCount / totalSpans * 100; null without requests. */
  errorRatePercent: number | null;
}

export interface EndpointByCount {
  method: string;
  path: string;
  statusCode: number;
  count: number;
  /** count / totalSpans * 100, two decimals. */
  sharePercent: number;
}

export interface EndpointByLatency {
  method: string;
  path: string;
  statusCode: number;
  count: number;
  /** Mean duration, ms, two decimals. */
  avgLatencyMs: number;
}

export interface TimeseriesPoint {
  /** Start of the minute, ISO 8601. */
  at: string;
  requests: number;
  errors: number;
}

export interface AnalyticsResult {
  /** Window bounds, ISO 8601. */
  from: string;
  to: string;
  summary: SummaryCards;
  topByRequestCount: EndpointByCount[];
  topByLatency: EndpointByLatency[];
  timeseries: { stepSeconds: number; points: TimeseriesPoint[] };
}

export interface FilterOptions {
  applications: string[];
  environments: readonly string[];
  methods: string[];
  statusCodes: number[];
  consumers: string[];
  /** Route templates seen (the live event stream offers them). */
  routes: string[];
}

export interface AnalyticsBackend {
  query(filter: AnalyticsFilter): Promise<AnalyticsResult>;
  options(filter: AnalyticsFilter): Promise<FilterOptions>;
}

export const DEFAULT_TOP_LIMIT = 10;

/** Window totals of one (method, route, status code) group. */
export interface GroupTotals {
  method: string;
  route: string;
  statusCode: number;
  count: number;
  sumSeconds: number;
}

/**
 * Turns window totals into the answer: the one place where the cards and the top lists
 * are computed, so both backends agree by construction. Ties are broken by method,
 * path, then status code so the order is stable.
 */
export function buildResult(input: {
  groups: GroupTotals[];
  cells: ArrayLike<number>;
  limit: number;
  from: number;
  to: number;
  points: TimeseriesPoint[];
}): AnalyticsResult {
  const groups = input.groups.filter((g) => g.count > 0);
  let total = 0;
  let errors = 0;
  for (const g of groups) {
    total += g.count;
    if (isErrorStatus(g.statusCode)) errors += g.count;
  }
  const p99 = quantileFromCells(0.99, input.cells);
  const tie = (a: GroupTotals, b: GroupTotals): number =>
    a.method.localeCompare(b.method) ||
    a.route.localeCompare(b.route) ||
    a.statusCode - b.statusCode;
  const avg = (g: GroupTotals): number => (g.sumSeconds / g.count) * 1000;
  const byCount = [...groups].sort((a, b) => b.count - a.count || tie(a, b));
  const byLatency = [...groups].sort((a, b) => avg(b) - avg(a) || tie(a, b));
  return {
    from: new Date(input.from).toISOString(),
    to: new Date(input.to).toISOString(),
    summary: {
      totalSpans: total,
      avgP99LatencyMs: p99 === null ? null : round2(p99 * 1000),
      errorCount: errors,
      errorRatePercent: total === 0 ? null : round2((errors / total) * 100),
    },
    topByRequestCount: byCount.slice(0, input.limit).map((g) => ({
      method: g.method,
      path: g.route,
      statusCode: g.statusCode,
      count: g.count,
      sharePercent: round2((g.count / total) * 100),
    })),
    topByLatency: byLatency.slice(0, input.limit).map((g) => ({
      method: g.method,
      path: g.route,
      statusCode: g.statusCode,
      count: g.count,
      avgLatencyMs: round2(avg(g)),
    })),
    timeseries: { stepSeconds: 60, points: input.points },
  };
}
