// Scrape gaps around an analytics window, against a real Prometheus without waiting real
// minutes: synthetic history (the gateway's request histogram with its `_created`, and
// Prometheus's own `up`, one scrape every 15 s) is backfilled with promtool before
// Prometheus starts, and PrometheusAnalytics is asked at a time inside it. Each case is
// its own scrape job, picked with the backend's selector.
//
// The window is 5m and asked at W + 4m30s, so it covers [W, W + 5m]; its look-back for
// the value before it is [W - 2m, W]. Scrapes happen at W + 7 s + 15 s k (never on a
// window edge). A steady series counts 10 requests per scrape (all of 100 ms) from
// 1,000,000 (three days of traffic before the history starts, 30 minutes before W).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnalyticsFilter } from '../../runtime/analytics/backend.ts';
import { LATENCY_BUCKETS_SECONDS } from '../../runtime/analytics/definitions.ts';
import { METRIC } from '../../runtime/analytics/metrics.ts';
import { PrometheusAnalytics } from '../../runtime/analytics/prometheus.ts';
import {
  skipWithoutPrometheus,
  startPrometheus,
  type RunningPrometheus,
} from '../support/prometheus.ts';

const skip = skipWithoutPrometheus();

const HOUR_MS = 3_600_000;
/** The window's start: a whole hour, a few hours back (well inside the retention). */
const W = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - 3 * HOUR_MS;
/** Scrape times, seconds from W: -1793, -1778, ..., 292. */
const SCRAPES = Array.from({ length: (292 + 1793) / 15 + 1 }, (_, k) => -1793 + 15 * k);
const PER_SCRAPE = 10;
const DURATION_SECONDS = 0.1;
const STEADY_START = 1_000_000;

/**
 * What one scrape of a target stored: `up`, and the series' counter if it existed, with
 * when that counter started (seconds from W; none from a gateway before `_created`).
 */
interface Scrape {
  up?: 0 | 1;
  count?: number;
  created?: number;
}
interface Target {
  instance: string;
  scrape: (s: number) => Scrape;
}
interface Case {
  job: string;
  targets: Target[];
}

type Counter = (s: number) => Pick<Scrape, 'count' | 'created'>;
/** The steady counter at scrape time s (seconds from W), started three days before W. */
const steady: Counter = (s) => ({
  count: STEADY_START + PER_SCRAPE * ((s + 1793) / 15),
  created: -3 * 86_400,
});
/** A counter that started from 0 at `created` (default 5 s before its first scrape at `first`). */
const bornAt =
  (first: number, created = first - 5): Counter =>
  (s) =>
    s < first ? {} : { count: PER_SCRAPE * ((s - first) / 15 + 1), created };
/** Prometheus stored nothing in [from, to) (it was down, or restarting). */
const prometheusDown =
  (from: number, to: number, counter: Counter) =>
  (s: number): Scrape =>
    s >= from && s < to ? {} : { up: 1, ...counter(s) };

const CASES: Case[] = [
  {
    job: 'prometheus-down',
    targets: [{ instance: 'gw:9090', scrape: prometheusDown(-240, 0, steady) }],
  },
  {
    job: 'target-unreachable',
    targets: [
      {
        instance: 'gw:9090',
        scrape: (s) => (s >= -240 && s < 0 ? { up: 0 } : { up: 1, ...steady(s) }),
      },
    ],
  },
  {
    job: 'born-between-scrapes',
    targets: [{ instance: 'gw:9090', scrape: (s) => ({ up: 1, ...bornAt(67)(s) }) }],
  },
  {
    job: 'born-before-the-first-scrape',
    targets: [{ instance: 'gw:9090', scrape: (s) => ({ up: 1, ...bornAt(7)(s) }) }],
  },
  {
    // Born at W - 5 s, after the last scrape before the window (W - 8 s): nothing of it
    // before the window, and no gap either.
    job: 'born-just-before-the-window',
    targets: [{ instance: 'gw:9090', scrape: (s) => ({ up: 1, ...bornAt(7, -5)(s) }) }],
  },
  {
    // Born at W + 55 s, first scraped at W + 67 s: in the chart, just before the minute
    // its first scrape falls in.
    job: 'born-just-before-a-minute',
    targets: [{ instance: 'gw:9090', scrape: (s) => ({ up: 1, ...bornAt(67, 55)(s) }) }],
  },
  {
    job: 'new-target',
    targets: [
      { instance: 'old:9090', scrape: (s) => ({ up: 1, ...steady(s) }) },
      { instance: 'new:9090', scrape: (s) => (s < 7 ? {} : { up: 1, ...bornAt(7)(s) }) },
    ],
  },
  {
    job: 'born-after-prometheus-came-back',
    targets: [{ instance: 'gw:9090', scrape: prometheusDown(-240, 0, bornAt(37)) }],
  },
  {
    job: 'reset',
    targets: [
      {
        instance: 'gw:9090',
        scrape: (s) => ({ up: 1, ...(s < 120 ? steady(s) : bornAt(127)(s)) }),
      },
    ],
  },
  {
    // A label set that counted 5 (long ago) restarted between W + 112 s and W + 127 s
    // under the same labels, and counted more than 5 by its first scrape: no value lower
    // than the one before it.
    job: 'restart-counted-more',
    targets: [
      {
        instance: 'gw:9090',
        scrape: (s) => ({ up: 1, ...(s < 120 ? { count: 5, created: -86_400 } : bornAt(127)(s)) }),
      },
    ],
  },
  {
    job: 'short-gap',
    targets: [{ instance: 'gw:9090', scrape: prometheusDown(-30, 0, steady) }],
  },
  {
    job: 'born-without-created',
    targets: [{ instance: 'gw:9090', scrape: (s) => ({ up: 1, count: bornAt(67)(s).count }) }],
  },
];

/** The OpenMetrics text of every case's history, as the gateways and Prometheus wrote it. */
function history(): string {
  const name = METRIC.requestDuration;
  const histogram: string[] = [];
  const up: string[] = [];
  for (const s of SCRAPES) {
    const at = (W / 1000 + s).toFixed(3);
    for (const { job, targets } of CASES) {
      for (const { instance, scrape } of targets) {
        const { up: scraped, count, created } = scrape(s);
        const target = `job="${job}",instance="${instance}"`;
        if (scraped !== undefined) up.push(`up{${target}} ${scraped} ${at}`);
        if (count === undefined) continue;
        const labels =
          `${target},application="gaps",environment="production",http_request_method="POST",` +
          `http_route="/webhook/gaps_production_in/default",http_response_status_code="200",` +
          `consumer="anonymous"`;
        for (const le of [...LATENCY_BUCKETS_SECONDS.map(String), '+Inf']) {
          const inBucket = le === '+Inf' || Number(le) >= DURATION_SECONDS ? count : 0;
          histogram.push(`${name}_bucket{${labels},le="${le}"} ${inBucket} ${at}`);
        }
        histogram.push(`${name}_count{${labels}} ${count} ${at}`);
        histogram.push(`${name}_sum{${labels}} ${(count * DURATION_SECONDS).toFixed(1)} ${at}`);
        if (created !== undefined) {
          histogram.push(`${name}_created{${labels}} ${W / 1000 + created} ${at}`);
        }
      }
    }
  }
  return [`# TYPE ${name} histogram`, ...histogram, '# TYPE up gauge', ...up, '# EOF', ''].join(
    '\n',
  );
}

let prometheus: RunningPrometheus | undefined;

afterAll(async () => {
  await prometheus?.stop();
});

describe.skipIf(skip)('prometheus analytics across scrape gaps', () => {
  beforeAll(async () => {
    prometheus = await startPrometheus([], { backfill: history() });
  });

  /** The 5m window asked at W + 4m30s, of one case's job only. */
  async function window(job: string, extra: Partial<AnalyticsFilter> = {}) {
    const backend = new PrometheusAnalytics({
      url: prometheus!.url,
      selector: `job="${job}"`,
      now: () => W + 270_000,
    });
    const result = await backend.query({ applications: ['gaps'], window: '5m', ...extra });
    const charted = result.timeseries.points.reduce((n, p) => n + p.requests, 0);
    return { result, total: result.summary.totalSpans, charted };
  }

  it('counts from the first scrape in the window after Prometheus was down for 4 minutes before it, not the whole counter', async () => {
    const { result, total, charted } = await window('prometheus-down');
    // The scrapes at W + 7 s ... W + 292 s: 19 increases of 10. What the window's first
    // scrape counted (requests during the gap, most of them before the window) is left
    // out, as increase() would; before, the whole counter (1,001,390) was answered.
    expect(total).toBe(190);
    expect(charted).toBe(190);
    expect(result.topByRequestCount[0]?.count).toBe(190);
    // The histogram and the sum take the same branch: every request in the 100 ms bucket.
    expect(result.summary.avgP99LatencyMs).toBeGreaterThan(80);
    expect(result.summary.avgP99LatencyMs).toBeLessThanOrEqual(100);
    expect(result.topByLatency[0]?.avgLatencyMs).toBe(100);
  });

  it('counts from the first scrape in the window after its target was unreachable for 4 minutes', async () => {
    const { total, charted } = await window('target-unreachable');
    expect(total).toBe(190);
    expect(charted).toBe(190);
  });

  it('counts the whole value of a series born inside the window (between two scrapes of its target)', async () => {
    // First scrape with it at W + 67 s (10), last at W + 292 s (160).
    const { total, charted } = await window('born-between-scrapes');
    expect(total).toBe(160);
    expect(charted).toBe(160);
  });

  it('counts the whole value of a series born before the window`s first scrape (its target scraped just before the window)', async () => {
    const { total, charted } = await window('born-before-the-first-scrape');
    expect(total).toBe(200);
    expect(charted).toBe(200);
  });

  it('counts the whole value of a series born after the last scrape before the window (its first value is in the window)', async () => {
    // Its counter started at W - 5 s, its first scrape (10) at W + 7 s: that scrape's
    // requests came after the last scrape before the window, none before it was born.
    // They were left out as if Prometheus had missed it (190).
    const { total, charted } = await window('born-just-before-the-window');
    expect(total).toBe(200);
    expect(charted).toBe(200);
  });

  it('charts the first scrape of a series born just before the minute that scrape falls in', async () => {
    // Born at W + 55 s, first scraped (10) at W + 67 s: the 5-minute total counted it,
    // the minute (W + 60 s, W + 120 s] did not (charted 150 for a total of 160).
    const { total, charted } = await window('born-just-before-a-minute');
    expect(total).toBe(160);
    expect(charted).toBe(160);
  });

  it('counts the whole value of the series of a target first scraped inside the window (a new pod)', async () => {
    // The old target: 200 since the last scrape before the window; the new one: 200.
    const { total, charted } = await window('new-target');
    expect(total).toBe(400);
    expect(charted).toBe(400);
  });

  it('counts the whole value of a series born after Prometheus came back inside the window', async () => {
    // Prometheus was down before the window; the series started at W + 32 s.
    const { total, charted } = await window('born-after-prometheus-came-back');
    expect(total).toBe(180);
    expect(charted).toBe(180);
  });

  it('counts what a restarted process gathered since its restart inside the window', async () => {
    // Restarted between W + 112 s and W + 127 s: 10 at W + 127 s ... 120 at W + 292 s.
    const { total } = await window('reset');
    expect(total).toBe(120);
  });

  it('counts what a restarted process gathered since its restart when it counted more than before the restart', async () => {
    // 10 at W + 127 s ... 120 at W + 292 s; the 5 before the restart were counted before
    // the window. Its _created tells the restart; the values alone do not (115).
    const { total, charted } = await window('restart-counted-more');
    expect(total).toBe(120);
    expect(charted).toBe(120);
  });

  it('counts a series born in the window from its first scrape when its gateway does not export _created (before the upgrade)', async () => {
    // Nothing tells it from a series Prometheus did not see before the window: its first
    // scrape's 10 are left out rather than risk counting days.
    const { total } = await window('born-without-created');
    expect(total).toBe(150);
  });

  it('is unchanged by a 30 s gap before the window (the value before it is older but found)', async () => {
    // The last value before the window is the one at W - 38 s: 22 increases of 10.
    const { total, charted } = await window('short-gap');
    expect(total).toBe(220);
    expect(charted).toBe(220);
  });
});
