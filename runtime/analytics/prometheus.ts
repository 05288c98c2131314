// The Prometheus analytics backend: PromQL over the Prometheus HTTP API, summing the
// series of every gateway replica. Each figure is computed from window deltas of the
// http_server_request_duration_seconds counters (_count, _sum, _bucket), then turned
// into the answer by the same code as the memory backend (buildResult), so both
// backends compute the same definitions (docs/analytics.md).
//
// Window delta of a counter x over window w, evaluated at the end of the current
// minute (so the window is the current minute plus the w-1 minutes before it, like
// the memory store):
//   last_over_time(x[w]) - ((last_over_time(x[2m] offset w) unless <reset>)
//     or min_over_time(x[w]) * (0 if <reset> or <born since the look-back began>, else 1))
// i.e. per series the last value seen in the window minus the last value before the
// window starts, or minus 0, or minus the window's first value (below). Exact: unlike
// increase(), nothing is extrapolated, so counts are integers. last_over_time, unlike
// a plain selector, ignores staleness markers: a failed scrape or a replica that went
// away inside the window does not remove what it counted. A series whose counter reset
// inside the window (a process restarted under the same labels) counts what it
// gathered since the restart: a reset is a value lower than the one before it
// (resets(), or the window's lowest value below the last one before the window), or a
// `_created` inside the window (a restarted process that counted more by its first
// scrape than the old one had shows no lower value), told from the series' _count and
// _created so that its _sum and _bucket series take the same branch.
// Subtracting the value from before the window undercounted there whenever the
// restarted process counted more than the old one had.
// A series without a value in the 2 minutes before the window counts its whole value
// only when it was born in the window or in those 2 minutes: its `_created` (when its
// counters started from zero, exported by the gateway) is no older than the look-back's
// start (a series born after the last scrape before the window has its first value in
// it; one born during a gap just before the window counts those 2 minutes at most, and
// a gateway's clock behind Prometheus's by up to 2 minutes changes nothing). Otherwise Prometheus did not see
// it just before the window (Prometheus down or restarting, the gateway unreachable:
// a scrape gap), and it counts from its first value in the window, like increase(): the
// whole value was its whole history, days of traffic in a 5-minute window.
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
import {
  isErrorStatus,
  LATENCY_BUCKETS_SECONDS,
  LATENCY_CELLS,
  WINDOWS,
  type AnalyticsWindow,
} from './definitions.ts';
import { Agent, fetch as undiciFetch } from 'undici';
import { HttpProblem } from '../errors.ts';
import { sortedOptions } from './memory.ts';
import { METRIC } from './metrics.ts';

const MINUTE_MS = 60_000;

export interface PrometheusAnalyticsOptions {
  /** Base URL of the Prometheus server, e.g. http://prometheus.monitoring:9090 */
  url: string;
  /** Extra label matchers for every selector, e.g. `job="hookgate-gateway"`. */
  selector?: string;
  /** Request timeout; default 10 s. A slower answer is a 504 analytics-timeout problem. */
  timeoutMs?: number;
  /** Extra request headers, e.g. `authorization: Bearer <token>`. */
  headers?: Record<string, string>;
  /** PEM CA bundle to trust for an https URL (instead of the system's roots). */
  ca?: string;
  now?: () => number;
  fetch?: typeof fetch;
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}
interface RangeSample {
  metric: Record<string, string>;
  values: [number, string][];
}
interface ApiAnswer<T> {
  status: 'success' | 'error';
  data?: { resultType: string; result: T[] };
  errorType?: string;
  error?: string;
}

/**
 * A PromQL double-quoted string literal. JSON's escapes are Go's, except that PromQL's
 * lexer refuses a raw U+FFFD (it reads it as an invalid byte) and a `\u` escape of a
 * lone surrogate: U+FFFD is escaped, and a lone surrogate becomes U+FFFD, which is what
 * the exposition wrote for it (a consumer from a token's JSON can hold one).
 */
export function promString(value: string): string {
  return JSON.stringify(value.toWellFormed()).replaceAll('\uFFFD', '\\uFFFD');
}

function regexEscape(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Label matchers for a filter (environment only for `scope: 'environment'`). */
export function matchers(
  filter: AnalyticsFilter,
  extra?: string,
  scope: 'all' | 'environment' = 'all',
): string {
  const out: string[] = extra ? [extra] : [];
  if (filter.environment) out.push(`environment=${promString(filter.environment)}`);
  if (scope === 'all') {
    if (filter.applications.length > 0) {
      out.push(`application=~${promString(filter.applications.map(regexEscape).join('|'))}`);
    }
    if (filter.method) out.push(`http_request_method=${promString(filter.method)}`);
    if (filter.statusCode !== undefined) {
      out.push(`http_response_status_code=${promString(String(filter.statusCode))}`);
    }
    if (filter.consumer !== undefined) out.push(`consumer=${promString(filter.consumer)}`);
  }
  return `{${out.join(',')}}`;
}

/**
 * How far before the window the value it starts from is looked for: two scrapes at a 1 m
 * interval. The reset check compares with the same value, so both use it. A longer one
 * would add more of a gap's traffic before the window to it and read more samples; a
 * series without a value in it takes the last two branches of windowDelta instead.
 */
const LOOK_BACK = '2m';

/** `5m`, `1h`, `1500ms` ... in seconds. */
function seconds(duration: string): number {
  const m = /^(\d+)(ms|s|m|h)$/.exec(duration);
  if (!m) throw new Error(`not a duration: ${duration}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] as 'ms' | 's' | 'm' | 'h'];
}

/** The `_created` series of a histogram's `_count` selector (when its counters started). */
export function createdOf(count: string): string {
  const created = count.replace(/_count(?=\{|$)/, '_created');
  if (created === count) throw new Error(`not a _count selector: ${count}`);
  return created;
}

/**
 * The window delta of a counter selector (see the file comment). `counter` is the
 * `_count` of the histogram whose resets tell that the process restarted (for its
 * `_sum` and `_bucket` too: a bucket that counted nothing since the restart shows no
 * reset of its own), matched ignoring `le`; its `_created` series tells a series born
 * in the window from one Prometheus did not see just before it (a scrape gap).
 */
export function windowDelta(selector: string, window: string, counter = selector): string {
  const before = `last_over_time(${selector}[${LOOK_BACK}] offset ${window})`;
  const created = `last_over_time(${createdOf(counter)}[${window}])`;
  // A reset: a value lower than the one before it, or counters that started from zero
  // inside the window (a restart or a series forgotten and made again, whose first
  // value was already above the old one's last: no lower value shows it).
  const reset =
    `resets(${counter}[${window}]) > 0 or ` +
    `min_over_time(${counter}[${window}]) < last_over_time(${counter}[${LOOK_BACK}] offset ${window}) or ` +
    `${created} > time() - ${seconds(window)}`;
  // Born since the look-back began: a series born after the last scrape before the
  // window has its first value in it (a scrape interval after its birth at most), and
  // counts from zero, not from that value; so does one born during a gap shortly before
  // the window (at most LOOK_BACK of its traffic before the window is counted in).
  const born = `${created} >= time() - ${seconds(window) + seconds(LOOK_BACK)}`;
  // Per `counter` series: 0 when its whole value counts (reset, born), else 1.
  const fromFirst = `(0 * (${reset} or ${born}) or 0 * min_over_time(${counter}[${window}]) + 1)`;
  // What the window's last value is counted from: the value before the window, else 0
  // (a reset, a series born in the window or its look-back), else the window's first value (a gap).
  // Written so that x is read over the window twice (last, min), as before.
  const base =
    `((${before} unless ignoring(le) (${reset}))` +
    ` or min_over_time(${selector}[${window}]) * ignoring(le) group_left() ${fromFirst})`;
  return `(last_over_time(${selector}[${window}]) - ${base})`;
}

const GROUP = 'http_request_method, http_route, http_response_status_code';

export class PrometheusAnalytics implements AnalyticsBackend {
  readonly #url: string;
  readonly #selector: string | undefined;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #now: () => number;
  readonly #fetch: typeof fetch;

  constructor(options: PrometheusAnalyticsOptions) {
    this.#url = options.url.replace(/\/+$/, '');
    this.#selector = options.selector;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#headers = options.headers ?? {};
    this.#now = options.now ?? Date.now;
    this.#fetch = options.fetch ?? (options.ca ? fetchWithCa(options.ca) : fetch);
  }

  async query(filter: AnalyticsFilter): Promise<AnalyticsResult> {
    const now = this.#now();
    const { first, end } = alignedWindow(now, filter.window);
    const m = matchers(filter, this.#selector);
    const count = `${METRIC.requestDuration}_count${m}`;
    const d = (suffix: string): string =>
      windowDelta(`${METRIC.requestDuration}_${suffix}${m}`, filter.window, count);
    const [counts, sums, buckets, series] = await Promise.all([
      this.#instant(`sum by (${GROUP}) (${d('count')})`, end),
      this.#instant(`sum by (${GROUP}) (${d('sum')})`, end),
      this.#instant(`sum by (le) (${d('bucket')})`, end),
      this.#range(
        `sum by (http_response_status_code) (${windowDelta(count, '1m')})`,
        first + MINUTE_MS,
        end,
      ),
    ]);
    return buildResult({
      groups: groupTotals(counts, sums),
      cells: cellsFromBuckets(buckets),
      limit: filter.limit ?? DEFAULT_TOP_LIMIT,
      from: first,
      to: now,
      points: timeseries(series, first, WINDOWS[filter.window]),
    });
  }

  async options(filter: AnalyticsFilter): Promise<FilterOptions> {
    const { end } = alignedWindow(this.#now(), filter.window);
    const selector = `${METRIC.requestDuration}_count${matchers(filter, this.#selector, 'environment')}`;
    const rows = await this.#instant(
      `sum by (application, http_request_method, http_route, http_response_status_code, consumer) (${windowDelta(selector, filter.window)}) > 0`,
      end,
    );
    const apps = new Set(filter.applications);
    const sets = {
      applications: new Set<string>(),
      methods: new Set<string>(),
      statusCodes: new Set<number>(),
      consumers: new Set<string>(),
      routes: new Set<string>(),
    };
    for (const { metric } of rows) {
      const application = metric.application ?? '';
      sets.applications.add(application);
      if (apps.size > 0 && !apps.has(application)) continue;
      sets.methods.add(metric.http_request_method ?? '');
      sets.statusCodes.add(Number(metric.http_response_status_code));
      sets.consumers.add(metric.consumer ?? '');
      sets.routes.add(metric.http_route ?? '');
    }
    return sortedOptions(sets);
  }

  #instant(query: string, time: number): Promise<Sample[]> {
    return this.#call<Sample>('/api/v1/query', { query, time: String(time / 1000) });
  }

  #range(query: string, start: number, end: number): Promise<RangeSample[]> {
    return this.#call<RangeSample>('/api/v1/query_range', {
      query,
      start: String(start / 1000),
      end: String(end / 1000),
      step: '60',
    });
  }

  async #post(path: string, params: Record<string, string>) {
    try {
      const response = await this.#fetch(this.#url + path, {
        method: 'POST',
        headers: { ...this.#headers, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(params).toString(),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      return { status: response.status, text: await response.text() };
    } catch (err) {
      throw unavailable(err, this.#timeoutMs);
    }
  }

  /**
   * One PromQL call. Failures become problems (never a hang: the whole call, body
   * included, is bounded by the timeout): 504 HG_ERR_ANALYTICS_TIMEOUT when Prometheus
   * is slower than the timeout, 503 HG_ERR_ANALYTICS_UNAVAILABLE when it cannot be
   * reached or answers an error. The cause stays on the error for the log.
   */
  async #call<T>(path: string, params: Record<string, string>): Promise<T[]> {
    const { status, text } = await this.#post(path, params);
    let answer: ApiAnswer<T>;
    try {
      answer = JSON.parse(text) as ApiAnswer<T>;
    } catch (err) {
      throw problem(`Prometheus answered ${status} with a body that is not JSON`, err);
    }
    if (answer.status !== 'success' || !answer.data) {
      throw problem(
        `Prometheus answered ${status}${answer.errorType ? ` (${answer.errorType})` : ''}`,
        new Error(answer.error ?? ''),
      );
    }
    return answer.data.result;
  }
}

function problem(detail: string, cause: unknown): HttpProblem {
  const p = new HttpProblem('HG_ERR_ANALYTICS_UNAVAILABLE', detail, {
    headers: { 'retry-after': '5' },
  });
  p.cause = cause;
  return p;
}

function unavailable(err: unknown, timeoutMs: number): HttpProblem {
  if (err instanceof Error && err.name === 'TimeoutError') {
    const p = new HttpProblem(
      'HG_ERR_ANALYTICS_TIMEOUT',
      `Prometheus did not answer within ${timeoutMs} ms`,
    );
    p.cause = err;
    return p;
  }
  return problem('Prometheus could not be reached', err);
}

/** fetch that trusts the given CA bundle (a private CA in front of Prometheus). */
function fetchWithCa(ca: string): typeof fetch {
  const dispatcher = new Agent({ connect: { ca } });
  return ((input: string, init: RequestInit) =>
    undiciFetch(input, {
      ...(init as Parameters<typeof undiciFetch>[1]),
      dispatcher,
    })) as unknown as typeof fetch;
}

/** Window start (start of its first minute) and end (end of the current minute), ms. */
function alignedWindow(now: number, window: AnalyticsWindow): { first: number; end: number } {
  const current = Math.floor(now / MINUTE_MS);
  return {
    first: (current - WINDOWS[window] + 1) * MINUTE_MS,
    end: (current + 1) * MINUTE_MS,
  };
}

function groupKey(metric: Record<string, string>): string {
  return `${metric.http_request_method} ${metric.http_route} ${metric.http_response_status_code}`;
}

function groupTotals(counts: Sample[], sums: Sample[]): GroupTotals[] {
  const sumByKey = new Map(sums.map((s) => [groupKey(s.metric), Number(s.value[1])]));
  return counts.map((c) => ({
    method: c.metric.http_request_method ?? '',
    route: c.metric.http_route ?? '',
    statusCode: Number(c.metric.http_response_status_code),
    count: Math.round(Number(c.value[1])),
    sumSeconds: sumByKey.get(groupKey(c.metric)) ?? 0,
  }));
}

/** Cumulative `le` buckets -> non-cumulative cells aligned with LATENCY_BUCKETS_SECONDS. */
function cellsFromBuckets(buckets: Sample[]): Float64Array {
  const cumulative = new Float64Array(LATENCY_CELLS);
  for (const b of buckets) {
    const le = b.metric.le === '+Inf' ? Infinity : Number(b.metric.le);
    const index =
      le === Infinity ? LATENCY_CELLS - 1 : LATENCY_BUCKETS_SECONDS.findIndex((x) => x === le);
    if (index >= 0) cumulative[index] = Math.round(Number(b.value[1]));
  }
  const cells = new Float64Array(LATENCY_CELLS);
  for (let i = 0; i < LATENCY_CELLS; i += 1) {
    cells[i] = Math.max(
      0,
      (cumulative[i] as number) - (i === 0 ? 0 : (cumulative[i - 1] as number)),
    );
  }
  return cells;
}

/** Range answer (one point per minute end) -> one point per minute start. */
function timeseries(series: RangeSample[], first: number, minutes: number): TimeseriesPoint[] {
  const points: TimeseriesPoint[] = [];
  for (let i = 0; i < minutes; i += 1) {
    points.push({ at: new Date(first + i * MINUTE_MS).toISOString(), requests: 0, errors: 0 });
  }
  for (const s of series) {
    const error = isErrorStatus(Number(s.metric.http_response_status_code));
    for (const [t, v] of s.values) {
      const point = points[Math.round((t * 1000 - first) / MINUTE_MS) - 1];
      if (!point) continue;
      const n = Math.round(Number(v));
      point.requests += n;
      if (error) point.errors += n;
    }
  }
  return points;
}
