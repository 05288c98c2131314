// Analytics query time over a full 24 h window with 1,000,000 observations in the
// memory store, and the memory the store holds.
//   node --expose-gc bench/analytics-query.ts [observations] [runs]
// Prints one JSON line per measurement and a Markdown table for bench/README.md.
import { MemoryAnalytics } from '../runtime/analytics/memory.ts';
import type { AnalyticsFilter } from '../runtime/analytics/backend.ts';
import type { RequestObservation } from '../runtime/gateway/observations.ts';

const OBSERVATIONS = Number(process.argv[2] ?? 1_000_000);
const RUNS = Number(process.argv[3] ?? 9);
const DAY_MS = 24 * 60 * 60_000;
const NOW = Date.parse('2026-11-23T12:00:00Z');

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) console.warn('run with --expose-gc for memory figures');

function heap(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
}

/** Deterministic traffic: 12 routes of 4 applications, 3 environments, 2 methods,
 * 6 status codes, 8 consumers (+ anonymous); log-normal latencies around 40 ms. */
function* traffic(count: number): Generator<RequestObservation> {
  let seed = 12345;
  const rnd = (): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const apps = ['shop', 'billing', 'crm', 'search'];
  const envs = ['production', 'production', 'staging', 'development'];
  const segments = ['ingest', 'notify', 'callback'];
  const statuses = [200, 200, 200, 202, 202, 401, 404, 429, 500, 408];
  for (let i = 0; i < count; i += 1) {
    const app = apps[Math.floor(rnd() * apps.length)] as string;
    const env = envs[Math.floor(rnd() * envs.length)] as string;
    const segment = segments[Math.floor(rnd() * segments.length)] as string;
    const consumerIndex = Math.floor(rnd() * 9);
    const gaussian = Math.sqrt(-2 * Math.log(rnd() || 1e-9)) * Math.cos(2 * Math.PI * rnd());
    yield {
      at: NOW - DAY_MS + Math.floor((i / count) * DAY_MS),
      application: app,
      environment: env,
      workflowId: `${app}_${env}_orders`,
      triggerKey: `${app}/${segment}`,
      method: rnd() < 0.8 ? 'POST' : 'GET',
      route: `/webhook/${app}_${env}_orders/${segment}`,
      statusCode: statuses[Math.floor(rnd() * statuses.length)] as number,
      ...(consumerIndex === 8 ? {} : { consumer: `consumer-${consumerIndex}` }),
      durationSeconds: Math.min(30, 0.04 * Math.exp(0.9 * gaussian)),
      correlationId: '',
      requestId: '',
    };
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  await fn(); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i += 1) {
    const start = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return median(samples);
}

const before = heap();
const store = new MemoryAnalytics({ now: () => NOW });
const ingestStart = process.hrtime.bigint();
for (const o of traffic(OBSERVATIONS)) store.observe(o);
const ingestMs = Number(process.hrtime.bigint() - ingestStart) / 1e6;
const after = heap();
const stats = store.stats();

const day: AnalyticsFilter = { applications: [], window: '24h' };
const cases: [string, () => Promise<unknown>][] = [
  ['summary, 24h, no filter', () => store.query(day)],
  [
    'summary, 24h, application + environment',
    () => store.query({ ...day, applications: ['shop'], environment: 'production' }),
  ],
  ['summary, 24h, consumer', () => store.query({ ...day, consumer: 'consumer-3' })],
  ['summary, 1h, no filter', () => store.query({ ...day, window: '1h' })],
  ['options, 24h', () => store.options(day)],
];

const rows: string[] = [];
for (const [name, fn] of cases) {
  const ms = await time(fn);
  console.log(JSON.stringify({ case: name, medianMs: Number(ms.toFixed(2)) }));
  rows.push(`| ${name} | ${ms.toFixed(1)} ms |`);
}
const mib = (after - before) / 1024 / 1024;
console.log(
  JSON.stringify({
    observations: OBSERVATIONS,
    ingestMs: Math.round(ingestMs),
    observationsPerSecond: Math.round(OBSERVATIONS / (ingestMs / 1000)),
    storeMiB: Number(mib.toFixed(1)),
    ...stats,
  }),
);
console.log(
  [
    '',
    `Node ${process.version}, ${OBSERVATIONS.toLocaleString('en-US')} observations over 24 h, median of ${RUNS} runs:`,
    '',
    '| query | median |',
    '|---|---|',
    ...rows,
    '',
    `Store: ${mib.toFixed(1)} MiB for ${stats.series} series in ${stats.minutes} minutes (${stats.cells} minute cells); ingest ${Math.round(OBSERVATIONS / (ingestMs / 1000)).toLocaleString('en-US')} observations/s.`,
  ].join('\n'),
);
