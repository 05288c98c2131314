// Where the gateways' analytics API reads from, as the component's `analytics` argument:
// the chart's `analytics.*` values (charts/hookgate/README.md, "Analytics with several
// gateways"). Plain data, checked before anything is created.

export const ANALYTICS_BACKENDS = ['memory', 'prometheus'] as const;
export type AnalyticsBackend = (typeof ANALYTICS_BACKENDS)[number];

export interface AnalyticsArgs {
  /** Default: prometheus when `prometheus.url` is given, else memory (one replica's view). */
  backend?: AnalyticsBackend;
  prometheus?: {
    /** Prometheus base URL; it must scrape every gateway (e.g. `serviceMonitor: true`). */
    url?: string;
    /** Label matchers added to every query, e.g. `namespace="hooks"`. */
    selector?: string;
    /** Per query, ms (default 10000); slower answers are a 504 problem. */
    timeoutMs?: number;
    /** Secret holding a bearer token (key `tokenKey`, default `token`). */
    tokenSecret?: { name: string; key?: string };
    /** Secret with `username` and `password`, for basic auth instead of a token. */
    basicAuthSecret?: string;
    /** ConfigMap holding the CA bundle of an https URL (key default `ca.crt`). */
    caConfigMap?: { name: string; key?: string };
    /** Create the PrometheusRule with the recording rules (default false). */
    rules?: { enabled: boolean; interval?: string; labels?: Record<string, string> };
  };
}

export interface ChartAnalytics {
  backend: '' | AnalyticsBackend;
  prometheus: {
    url: string;
    selector: string;
    timeoutMs: number;
    existingSecret: string;
    tokenKey: string;
    basicAuth: { existingSecret: string };
    caConfigMap: string;
    caKey: string;
    rules: { enabled: boolean; interval: string; labels: Record<string, string> };
  };
}

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const KEY = /^[-._a-zA-Z0-9]+$/;
const DURATION = /^(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?$/;

/** Every problem with the analytics argument (empty when valid). */
export function validateAnalytics(a: AnalyticsArgs): string[] {
  const errors: string[] = [];
  const p = a.prometheus ?? {};
  if (a.backend !== undefined && !ANALYTICS_BACKENDS.includes(a.backend))
    errors.push(`analytics.backend must be memory or prometheus, got "${String(a.backend)}"`);
  if (a.backend === 'prometheus' && !p.url)
    errors.push('analytics.backend prometheus needs analytics.prometheus.url');
  if (p.url !== undefined && !/^https?:\/\/\S+$/.test(p.url))
    errors.push(`analytics.prometheus.url "${p.url}" must be an http(s) URL`);
  if (p.timeoutMs !== undefined && !(Number.isInteger(p.timeoutMs) && p.timeoutMs >= 100))
    errors.push(`analytics.prometheus.timeoutMs must be a whole number >= 100, got ${p.timeoutMs}`);
  if (p.tokenSecret && p.basicAuthSecret)
    errors.push('analytics.prometheus.tokenSecret and basicAuthSecret exclude each other');
  errors.push(...referenceProblems(p));
  const interval = p.rules?.interval;
  if (interval !== undefined && (interval === '' || !DURATION.test(interval)))
    errors.push(`analytics.prometheus.rules.interval "${interval}" is not a duration like 1m`);
  return errors;
}

type Prometheus = NonNullable<AnalyticsArgs['prometheus']>;

function referenceProblems(p: Prometheus): string[] {
  const errors: string[] = [];
  const refs: [string, string | undefined, string | undefined][] = [
    ['tokenSecret', p.tokenSecret?.name, p.tokenSecret?.key],
    ['basicAuthSecret', p.basicAuthSecret, undefined],
    ['caConfigMap', p.caConfigMap?.name, p.caConfigMap?.key],
  ];
  for (const [what, name, key] of refs) {
    if (name !== undefined && (name.length > 253 || !NAME.test(name)))
      errors.push(`analytics.prometheus.${what} "${name}" is not a valid object name`);
    if (key !== undefined && !KEY.test(key))
      errors.push(`analytics.prometheus.${what} key "${key}" is not a valid key`);
  }
  return errors;
}

/**
 * The Prometheus URL when the gateways' analytics API reads from Prometheus, else
 * undefined: the chart's "hookgate.analytics.prometheus" (backend prometheus, or a URL
 * with no backend named).
 */
export function analyticsPrometheusUrl(a: AnalyticsArgs | undefined): string | undefined {
  const url = a?.prometheus?.url;
  if (a?.backend === 'prometheus') return url ?? '';
  return a?.backend !== 'memory' && url ? url : undefined;
}

/** The chart's `analytics` values for the argument. */
export function analyticsValues(a: AnalyticsArgs): ChartAnalytics {
  const p = a.prometheus ?? {};
  return {
    backend: a.backend ?? '',
    prometheus: {
      url: p.url ?? '',
      selector: p.selector ?? '',
      timeoutMs: p.timeoutMs ?? 10_000,
      ...credentials(p),
      rules: rules(p.rules),
    },
  };
}

function credentials(p: Prometheus) {
  return {
    existingSecret: p.tokenSecret?.name ?? '',
    tokenKey: p.tokenSecret?.key ?? 'token',
    basicAuth: { existingSecret: p.basicAuthSecret ?? '' },
    caConfigMap: p.caConfigMap?.name ?? '',
    caKey: p.caConfigMap?.key ?? 'ca.crt',
  };
}

function rules(r: Prometheus['rules']): ChartAnalytics['prometheus']['rules'] {
  return { enabled: r?.enabled ?? false, interval: r?.interval ?? '1m', labels: r?.labels ?? {} };
}
