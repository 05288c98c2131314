// What the Prometheus analytics backend costs Prometheus: the samples each query of an
// analytics summary reads, and how long it takes, over a 24 h and a 5 min window.
//   PATH=$PWD/node_modules/.bin:$PATH node bench/analytics-prometheus.ts
//   env: BENCH_LABEL_SETS label sets per gateway (default 5: 2 gateways x 5 label sets x
//        50 series = 500 series), BENCH_RUNS timed runs per query (default 7),
//        BENCH_PRINT_QUERIES=1 also prints each query's PromQL, BENCH_STEADY=1 leaves out
//        the restart and the gaps (every series scraped every 30 s: the samples a
//        query reads are then a formula of the window, see bench/README.md).
// Needs /usr/bin/prometheus and /usr/bin/promtool (or PROMETHEUS_BIN, PROMTOOL_BIN).
//
// 24 h (and 10 minutes) of the gateways' request histogram as Prometheus would have
// scraped it every 30 s (each label set: 47 `_bucket`, `_count`, `_sum`, `_created`) is
// backfilled with promtool (test/support/prometheus.ts), with what real history holds:
// counters days old when it starts, one gateway restarting (its counters reset, a new
// `_created`, a missed scrape), Prometheus down for 12 minutes, and the other gateway
// unreachable for 3 minutes across the 5 min window's start (so its look-back is empty).
// Then PrometheusAnalytics itself is asked for the summary of each window: its fetch
// adds `stats=all` to every call and keeps Prometheus's answer, so the queries measured
// are exactly the ones the product sends. Each query is then sent again BENCH_RUNS times
// on its own (after one warm-up), and the summary (the backend's query(), its calls in
// parallel) is timed as a whole; `options` (the filter lists) is measured apart.
//
// Prints one JSON line per query and a Markdown table for bench/README.md: samples read
// (Prometheus's totalQueryableSamples, and peakSamples: the most held at once), the
// median wall time seen by the client and the median execTotalTime Prometheus reports;
// then whether the summary answers within the product's default timeout (10 s per query).
// Samples are exact (the same history reads the same samples); timings depend on the
// machine.
import { PrometheusAnalytics } from '../runtime/analytics/prometheus.ts';
import type { AnalyticsFilter, AnalyticsResult } from '../runtime/analytics/backend.ts';
import {
  LATENCY_BUCKETS_SECONDS,
  latencyCell,
  type AnalyticsWindow,
} from '../runtime/analytics/definitions.ts';
import { METRIC } from '../runtime/analytics/metrics.ts';
import { HttpProblem } from '../runtime/errors.ts';
import { startPrometheus } from '../test/support/prometheus.ts';
import { median } from './support.ts';

const LABEL_SETS = Number(process.env.BENCH_LABEL_SETS ?? 5);
const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const PRINT_QUERIES = process.env.BENCH_PRINT_QUERIES === '1';
const STEADY = process.env.BENCH_STEADY === '1';

const MINUTE_S = 60;
const HOUR_S = 3600;
const SCRAPE_S = 30;
/** The end of the history (and of both windows): a whole hour, an hour back. */
const END_S = Math.floor(Date.now() / 1000 / HOUR_S) * HOUR_S - HOUR_S;
const START_S = END_S - 24 * HOUR_S - 10 * MINUTE_S;
/** "Now" for the backend: inside the history's last minute, whose end is END_S. */
const NOW_MS = (END_S - 20) * 1000;

interface Gateway {
  instance: string;
  /** Seconds after a whole 30 s at which Prometheus scrapes it. */
  phase: number;
  /** Its process started then (the counters' `_created` before any restart). */
  started: number;
  /** When it restarted (counters from zero again) and how long it was down, if it did. */
  restart?: { at: number; downFor: number };
  /** When Prometheus could not reach it: [from, to). */
  unreachable?: [number, number];
}

const GATEWAYS: Gateway[] = [
  {
    instance: '10.0.1.11:9464',
    phase: 7,
    started: START_S - 3 * 86_400,
    // Across the 5 min window's start: nothing of it in the window's 2 minute look-back.
    ...(STEADY ? {} : { unreachable: [END_S - 8 * MINUTE_S, END_S - 5 * MINUTE_S + 10] }),
  },
  {
    instance: '10.0.1.12:9464',
    phase: 22,
    started: START_S - 2 * 86_400,
    ...(STEADY ? {} : { restart: { at: END_S - 9 * HOUR_S + 3, downFor: 40 } }),
  },
];
/** Prometheus was down (restarting, replaying its WAL): no scrapes at all. */
const PROMETHEUS_DOWN: [number, number] | undefined = STEADY
  ? undefined
  : [END_S - 15 * HOUR_S, END_S - 15 * HOUR_S + 12 * MINUTE_S];

/** Deterministic pseudo-random numbers in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 4294967296;
  };
}

interface LabelSet {
  labels: string;
  /** Mean requests per scrape interval, median latency (s), spread of its logarithm. */
  perScrape: number;
  medianS: number;
  sigma: number;
}

/** `count` distinct label sets of a webhook gateway's traffic. */
function labelSets(count: number): LabelSet[] {
  const rnd = random(20261128);
  const apps = ['shop', 'billing', 'crm', 'search', 'erp', 'support'];
  const envs = ['production', 'production', 'staging'];
  const paths = ['orders/ingest', 'invoices/notify', 'contacts/callback', 'events/default'];
  const statuses = ['202', '200', '200', '401', '404', '429', '500'];
  const sets = new Map<string, LabelSet>();
  while (sets.size < count) {
    const app = apps[Math.floor(rnd() * apps.length)] as string;
    const env = envs[Math.floor(rnd() * envs.length)] as string;
    const [workflow, segment] = (paths[Math.floor(rnd() * paths.length)] as string).split('/');
    const consumerIndex = Math.floor(rnd() * 9);
    const labels =
      `job="hookgate-gateway",application="${app}",environment="${env}",` +
      `http_request_method="${rnd() < 0.85 ? 'POST' : 'GET'}",` +
      `http_route="/webhook/${app}_${env}_${workflow}/${segment}",` +
      `http_response_status_code="${statuses[Math.floor(rnd() * statuses.length)]}",` +
      `consumer="${consumerIndex === 8 ? 'anonymous' : `consumer-${consumerIndex}`}"`;
    sets.set(labels, {
      labels,
      perScrape: 5 + Math.floor(rnd() * 60),
      medianS: 0.01 + rnd() * 0.08,
      sigma: 0.5 + rnd() * 0.6,
    });
  }
  return [...sets.values()];
}

/** One label set's counters on one gateway. */
class Counters {
  count = 0;
  sum = 0;
  readonly cells = new Float64Array(LATENCY_BUCKETS_SECONDS.length + 1);
  created: number;

  readonly set: LabelSet;
  readonly #rnd: () => number;

  constructor(set: LabelSet, created: number, rnd: () => number) {
    this.set = set;
    this.created = created;
    this.#rnd = rnd;
  }

  /** `requests` requests with log-normal durations. */
  add(requests: number): void {
    for (let i = 0; i < requests; i += 1) {
      const gaussian =
        Math.sqrt(-2 * Math.log(this.#rnd() || 1e-9)) * Math.cos(2 * Math.PI * this.#rnd());
      const duration = Math.min(60, this.set.medianS * Math.exp(this.set.sigma * gaussian));
      this.count += 1;
      this.sum += duration;
      this.cells[latencyCell(duration)] = (this.cells[latencyCell(duration)] as number) + 1;
    }
  }

  /** Everything counted before the history: days of traffic, scaled from 2,000 draws. */
  addHistory(seconds: number): void {
    const total = Math.round((this.set.perScrape * seconds) / SCRAPE_S);
    this.add(2000);
    const scale = total / 2000;
    this.sum *= scale;
    for (let i = 0; i < this.cells.length; i += 1) {
      this.cells[i] = Math.round((this.cells[i] as number) * scale);
    }
    this.count = this.cells.reduce((a, b) => a + b, 0);
  }

  reset(created: number): void {
    this.count = 0;
    this.sum = 0;
    this.cells.fill(0);
    this.created = created;
  }

  /** The OpenMetrics lines of one scrape at `at` (seconds). */
  lines(target: string, at: number, out: string[]): void {
    const name = METRIC.requestDuration;
    const t = at.toFixed(3);
    const labels = `${target},${this.set.labels}`;
    let cumulative = 0;
    LATENCY_BUCKETS_SECONDS.forEach((le, i) => {
      cumulative += this.cells[i] as number;
      out.push(`${name}_bucket{${labels},le="${le}"} ${cumulative} ${t}`);
    });
    out.push(`${name}_bucket{${labels},le="+Inf"} ${this.count} ${t}`);
    out.push(`${name}_count{${labels}} ${this.count} ${t}`);
    out.push(`${name}_sum{${labels}} ${this.sum.toFixed(6)} ${t}`);
    out.push(`${name}_created{${labels}} ${this.created.toFixed(3)} ${t}`);
  }
}

/** What the history holds, counted as it is written. */
const written = { series: 0, samples: 0, bytes: 0 };

/** The OpenMetrics text of the whole history, one chunk per scrape interval. */
function* history(): Generator<string> {
  const sets = labelSets(LABEL_SETS);
  const rnd = random(42);
  const gateways = GATEWAYS.map((gateway) => {
    const counters = sets.map((set) => new Counters(set, gateway.started, rnd));
    for (const c of counters) c.addHistory(START_S - gateway.started);
    return { gateway, counters, target: `instance="${gateway.instance}"` };
  });
  written.series = GATEWAYS.length * sets.length * (LATENCY_BUCKETS_SECONDS.length + 4);
  const emit = (text: string): string => {
    written.bytes += text.length;
    return text;
  };
  yield emit(`# TYPE ${METRIC.requestDuration} histogram\n`);
  const within = (t: number, range?: [number, number]): boolean =>
    range !== undefined && t >= range[0] && t < range[1];
  const restarted = new Set<Gateway>();
  for (let slot = START_S; slot < END_S; slot += SCRAPE_S) {
    const lines: string[] = [];
    for (const { gateway, counters, target } of gateways) {
      const at = slot + gateway.phase;
      if (at > END_S) continue;
      const restart = gateway.restart;
      const down = restart !== undefined && at >= restart.at && at < restart.at + restart.downFor;
      if (restart && at >= restart.at && !restarted.has(gateway)) {
        restarted.add(gateway);
        for (const c of counters) c.reset(restart.at + restart.downFor);
      }
      if (down) continue;
      // The gateway served its traffic whether it was scraped or not.
      for (const c of counters) c.add(Math.round(c.set.perScrape * (0.5 + rnd())));
      if (within(at, PROMETHEUS_DOWN) || within(at, gateway.unreachable)) continue;
      for (const c of counters) c.lines(target, at, lines);
    }
    written.samples += lines.length;
    if (lines.length > 0) yield emit(lines.join('\n') + '\n');
  }
  yield emit('# EOF\n');
}

interface Stats {
  timings: { execTotalTime: number; evalTotalTime: number };
  samples: { totalQueryableSamples: number; peakSamples: number };
}
interface Call {
  path: string;
  params: URLSearchParams;
  stats: Stats;
}

const NO_STATS: Stats = {
  timings: { execTotalTime: NaN, evalTotalTime: NaN },
  samples: { totalQueryableSamples: NaN, peakSamples: NaN },
};

/** A fetch for PrometheusAnalytics that asks for `stats=all` and keeps each call. */
function capturingFetch(calls: Call[]): typeof fetch {
  return async (input, init) => {
    // PrometheusAnalytics posts a form as a string to a URL string.
    const params = new URLSearchParams(init?.body as string);
    params.set('stats', 'all');
    // Kept in the order the backend sends them (in parallel, so answers come in any order).
    const call: Call = { path: new URL(input as string).pathname, params, stats: NO_STATS };
    calls.push(call);
    const response = await fetch(input, { ...init, body: params.toString() });
    const text = await response.text();
    const answer = JSON.parse(text) as { data?: { stats?: Stats } };
    if (!answer.data?.stats) throw new Error(`no stats in the answer: ${text.slice(0, 300)}`);
    call.stats = answer.data.stats;
    return new Response(text, { status: response.status, headers: response.headers });
  };
}

/** What a query of the summary is, from its PromQL (the backend's order: counts, sums, buckets, chart). */
function queryName(call: Call): string {
  const q = call.params.get('query') ?? '';
  if (call.path.endsWith('query_range')) return 'per-minute chart (range, 60 s step)';
  if (q.startsWith('sum by (le)')) return 'latency buckets';
  if (q.startsWith('sum by (application,')) return 'options (filter lists)';
  if (q.includes(`${METRIC.requestDuration}_sum{`)) return 'sums';
  return 'counts';
}

async function timed(fn: () => Promise<unknown>): Promise<number[]> {
  await fn(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i += 1) {
    const start = process.hrtime.bigint();
    await fn();
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return ms;
}

interface Row {
  window: AnalyticsWindow;
  query: string;
  samples: number;
  peak: number;
  wallMs: number;
  execMs: number;
  chars?: number;
}

async function post(url: string, call: Call): Promise<Stats> {
  const response = await fetch(url + call.path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: call.params.toString(),
  });
  const answer = (await response.json()) as { status: string; data?: { stats?: Stats } };
  if (answer.status !== 'success' || !answer.data?.stats) {
    throw new Error(`${call.path} answered ${response.status}`);
  }
  return answer.data.stats;
}

async function measure(
  url: string,
  window: AnalyticsWindow,
): Promise<{ rows: Row[]; defaultTimeout: string }> {
  const calls: Call[] = [];
  const backend = new PrometheusAnalytics({
    url,
    now: () => NOW_MS,
    timeoutMs: 300_000,
    fetch: capturingFetch(calls),
  });
  const filter: AnalyticsFilter = { applications: [], window };
  const result: AnalyticsResult = await backend.query(filter);
  const summaryCalls = calls.splice(0);
  await backend.options(filter);
  const optionsCalls = calls.splice(0);
  console.error(
    `${window}: ${result.summary.totalSpans} requests, ${result.timeseries.points.length} points`,
  );
  const rows: Row[] = [];
  for (const call of [...summaryCalls, ...optionsCalls]) {
    const exec: number[] = [];
    const wall = await timed(async () => {
      exec.push((await post(url, call)).timings.execTotalTime * 1000);
    });
    const row: Row = {
      window,
      query: queryName(call),
      samples: call.stats.samples.totalQueryableSamples,
      peak: call.stats.samples.peakSamples,
      wallMs: median(wall),
      execMs: median(exec.slice(1)),
      chars: call.params.get('query')?.length ?? 0,
    };
    console.log(JSON.stringify(row));
    if (PRINT_QUERIES) console.log(call.params.get('query'));
    rows.push(row);
  }
  // The summary as the product asks for it: its calls in parallel, through the backend.
  const plain = new PrometheusAnalytics({ url, now: () => NOW_MS, timeoutMs: 300_000 });
  const summaryWall = await timed(() => plain.query(filter));
  const summaryExec = summaryCalls.map((c) => rows.find((r) => r.query === queryName(c)));
  const total: Row = {
    window,
    query: `summary (${summaryCalls.length} calls in parallel)`,
    samples: summaryCalls.reduce((n, c) => n + c.stats.samples.totalQueryableSamples, 0),
    peak: Math.max(...summaryCalls.map((c) => c.stats.samples.peakSamples)),
    wallMs: median(summaryWall),
    execMs: summaryExec.reduce((n, r) => n + (r?.execMs ?? 0), 0),
  };
  console.log(JSON.stringify(total));
  rows.splice(summaryCalls.length, 0, total);
  // And as the product is configured by default: does the summary answer within the
  // default per-query timeout (HOOKGATE_PROMETHEUS_TIMEOUT_MS, 10 s)?
  const defaults = new PrometheusAnalytics({ url, now: () => NOW_MS });
  const outcomes = new Map<string, number>();
  for (let i = 0; i < RUNS; i += 1) {
    const outcome = await defaults.query(filter).then(
      () => 'answered',
      (err: unknown) => (err instanceof HttpProblem ? `${err.status} ${err.code}` : String(err)),
    );
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
  }
  const defaultTimeout = [...outcomes].map(([o, n]) => `${n} of ${RUNS} ${o}`).join(', ');
  console.log(JSON.stringify({ window, defaultTimeout }));
  return { rows, defaultTimeout };
}

const fmt = (n: number): string => n.toLocaleString('en-US');
const ms = (n: number): string => (n >= 100 ? n.toFixed(0) : n.toFixed(1));

const backfillStart = Date.now();
const prometheus = await startPrometheus([], { backfill: history() });
console.error(
  `history: ${fmt(written.series)} series, ${fmt(written.samples)} samples, ` +
    `${(written.bytes / 1e6).toFixed(0)} MB of OpenMetrics; written, backfilled by promtool ` +
    `and Prometheus started in ${((Date.now() - backfillStart) / 1000).toFixed(0)} s`,
);
try {
  const day = await measure(prometheus.url, '24h');
  const fiveMinutes = await measure(prometheus.url, '5m');
  const rows = [...day.rows, ...fiveMinutes.rows];
  console.log(
    `\n${GATEWAYS.length} gateways x ${LABEL_SETS} label sets = ${fmt(written.series)} series, ` +
      `30 s scrapes, ${STEADY ? 'steady (no restart, no gap)' : 'a restart and 2 gaps'}; ` +
      `medians of ${RUNS} runs after a warm-up\n`,
  );
  console.log(
    '| window | query | samples read | peak samples | median ms (client) | median ms (Prometheus exec) |',
  );
  console.log('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const r of rows) {
    const summary = r.query.startsWith('summary');
    const b = (s: string): string => (summary ? `**${s}**` : s);
    console.log(
      `| ${r.window} | ${b(r.query)} | ${b(fmt(r.samples))} | ${fmt(r.peak)} | ${b(ms(r.wallMs))} | ` +
        `${summary ? `${ms(r.execMs)} (sum)` : ms(r.execMs)} |`,
    );
  }
  console.log(
    `\nWith the default 10 s timeout per query, the summary: 24h ${day.defaultTimeout}; ` +
      `5m ${fiveMinutes.defaultTimeout}.`,
  );
} finally {
  await prometheus.stop();
}
