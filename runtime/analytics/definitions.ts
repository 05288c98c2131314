// The analytics vocabulary, written once and shared by the metrics, both analytics
// backends, the API and the tests: latency buckets, windows, what counts as an error,
// and how a P99 is read from a bucketed histogram. docs/analytics.md explains each.

/**
 * Upper bounds (seconds) of the latency histogram buckets: the R10 preferred numbers
 * (1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8 per decade) from 1 ms to 30 s, so every
 * bucket is at most 28 % wider than the one before and a P99 read by linear
 * interpolation is off by at most one bucket width (< 28 % of the value). The
 * Prometheus histogram and the in-memory sketch use the same bounds, so both
 * backends read the same P99 from the same traffic.
 */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = (() => {
  const mantissas = [1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8];
  const bounds: number[] = [];
  for (let exponent = -3; exponent <= 1; exponent += 1) {
    for (const m of mantissas) {
      const bound = Number((m * 10 ** exponent).toPrecision(3));
      if (bound <= 30) bounds.push(bound);
    }
  }
  bounds.push(12.5, 16, 20, 25, 30);
  return Object.freeze([...new Set(bounds)].sort((a, b) => a - b));
})();

/** Number of cells of a latency histogram: one per bound plus the +Inf overflow cell. */
export const LATENCY_CELLS = LATENCY_BUCKETS_SECONDS.length + 1;

/** Index of the (non-cumulative) histogram cell a duration falls in (le semantics). */
export function latencyCell(durationSeconds: number): number {
  const bounds = LATENCY_BUCKETS_SECONDS;
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((bounds[mid] as number) >= durationSeconds) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * The q-quantile (seconds) of a histogram given as non-cumulative cell counts aligned
 * with LATENCY_BUCKETS_SECONDS (+Inf last). Same algorithm as PromQL
 * histogram_quantile: find the bucket holding rank q*total and interpolate linearly
 * inside it (the first bucket starts at 0; a rank in +Inf answers the highest bound).
 * Returns null when the histogram is empty.
 */
export function quantileFromCells(q: number, cells: ArrayLike<number>): number | null {
  let total = 0;
  for (let i = 0; i < cells.length; i += 1) total += cells[i] as number;
  if (total <= 0) return null;
  const rank = q * total;
  const bounds = LATENCY_BUCKETS_SECONDS;
  let cumulative = 0;
  for (let i = 0; i < bounds.length; i += 1) {
    const count = cells[i] as number;
    if (cumulative + count >= rank && count > 0) {
      const lower = i === 0 ? 0 : (bounds[i - 1] as number);
      const upper = bounds[i] as number;
      return lower + (upper - lower) * ((rank - cumulative) / count);
    }
    cumulative += count;
  }
  return bounds[bounds.length - 1] as number;
}

/** Analytics time windows the API accepts, in minutes. */
export const WINDOWS = {
  '5m': 5,
  '15m': 15,
  '30m': 30,
  '1h': 60,
  '3h': 180,
  '6h': 360,
  '12h': 720,
  '24h': 1440,
} as const;
export type AnalyticsWindow = keyof typeof WINDOWS;
export const DEFAULT_WINDOW: AnalyticsWindow = '1h';
/** Longest window, and the memory store's retention. */
export const MAX_WINDOW_MINUTES = 1440;

export const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
/** What a method outside HTTP_METHODS is recorded as (OpenTelemetry's convention). */
export const OTHER_METHOD = '_OTHER';

/** Consumer label when the request carried no authenticated consumer. */
export const ANONYMOUS_CONSUMER = 'anonymous';
/** Consumer label for consumers beyond the per-route cap. */
export const OTHER_CONSUMER = 'other';

/**
 * A request is an error when the gateway answered 5xx (the server failed), or 408 (the
 * workflow did not answer within the endpoint's timeout: a server-side failure too).
 * Other 4xx answers (401, 403, 404, 422, 429, ...) are the caller's mistakes or the
 * gateway doing its job; they are counted in Total Spans, not in Error Count.
 */
export function isErrorStatus(statusCode: number): boolean {
  return statusCode >= 500 || statusCode === 408;
}

/** The same rule as a PromQL regular expression over http_response_status_code. */
export const ERROR_STATUS_REGEX = '5..|408';

/** Round to two decimals (for milliseconds and percentages in API answers). */
export function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

const KNOWN_METHODS: ReadonlySet<string> = new Set(HTTP_METHODS);

export function normaliseMethod(method: string): string {
  if (KNOWN_METHODS.has(method)) return method; // Node hands over known methods upper-case
  const upper = method.toUpperCase();
  return KNOWN_METHODS.has(upper) ? upper : OTHER_METHOD;
}
