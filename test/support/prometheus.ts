// Starts a real Prometheus for a test suite: the Debian binary on a free loopback port,
// a temporary config that scrapes the given targets every second, and a temporary
// TSDB directory removed on stop (optionally holding backfilled history: promtool turns
// OpenMetrics text into blocks before Prometheus starts). Tests that need it call
// prometheusMissing() first:
// without the binary they fail under CI=true and are skipped (loudly) elsewhere.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
export const PROMTOOL_BIN = process.env.PROMTOOL_BIN ?? '/usr/bin/promtool';

/** Why Prometheus tests cannot run here, or undefined when they can. */
export function prometheusMissing(): string | undefined {
  return existsSync(PROMETHEUS_BIN)
    ? undefined
    : `${PROMETHEUS_BIN} not found (apt-get install prometheus, or set PROMETHEUS_BIN)`;
}

/** Skip (with a loud message) when Prometheus is missing, unless CI=true: then fail. */
export function skipWithoutPrometheus(): boolean {
  const missing = prometheusMissing();
  if (!missing) return false;
  if (process.env.CI === 'true') return false;
  console.warn(`\n*** SKIPPING Prometheus tests: ${missing} ***\n`);
  return true;
}

import { freePort } from './ports.ts';

export { freePort };

export interface RunningPrometheus {
  url: string;
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  /** Labels put on every scraped series, e.g. the `namespace` a ServiceMonitor adds. */
  labels?: Record<string, string>;
  /** Rule files (recording and alerting rules) to load, evaluated every second. */
  ruleFiles?: string[];
  /**
   * History to load before Prometheus starts: OpenMetrics text with explicit timestamps
   * (seconds), ending in `# EOF`, turned into TSDB blocks by
   * `promtool tsdb create-blocks-from openmetrics`. Query it at a time inside it.
   * Chunks (an iterable of strings, e.g. a generator) are written as they come, for
   * history too large for one string (bench/analytics-prometheus.ts).
   */
  backfill?: string | Iterable<string> | AsyncIterable<string>;
}

/** Starts Prometheus scraping `targets` (host:port, path /metrics) every second. */
export async function startPrometheus(
  targets: string[],
  options: PrometheusOptions = {},
): Promise<RunningPrometheus> {
  const missing = prometheusMissing();
  if (missing) throw new Error(missing);
  const dir = await mkdtemp(join(tmpdir(), 'hookgate-prometheus-'));
  const labels = Object.entries(options.labels ?? {});
  const config = [
    'global:',
    '  scrape_interval: 1s',
    '  scrape_timeout: 1s',
    '  evaluation_interval: 1s',
    ...(options.ruleFiles?.length
      ? ['rule_files:', ...options.ruleFiles.map((f) => `  - ${JSON.stringify(f)}`)]
      : []),
    'scrape_configs:',
    '  - job_name: hookgate',
    '    static_configs:',
    `      - targets: [${targets.map((t) => JSON.stringify(t)).join(', ')}]`,
    ...(labels.length
      ? ['        labels:', ...labels.map(([k, v]) => `          ${k}: ${JSON.stringify(v)}`)]
      : []),
  ].join('\n');
  await writeFile(join(dir, 'prometheus.yml'), config);
  if (options.backfill !== undefined) {
    const file = join(dir, 'backfill.om');
    await writeFile(file, options.backfill);
    try {
      await promisify(execFile)(PROMTOOL_BIN, [
        'tsdb',
        'create-blocks-from',
        'openmetrics',
        file,
        join(dir, 'data'),
      ]);
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const stop = async (): Promise<void> => {
    await terminate(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitReady(url, child, () => stderr);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, stop };
}

async function waitReady(url: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`prometheus exited with ${child.exitCode}: ${stderr()}`);
    }
    try {
      const res = await fetch(`${url}/-/ready`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`prometheus not ready after 15 s: ${stderr()}`);
}

function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Polls `probe` until it returns true (or throws after `timeoutMs`). */
export async function eventually(
  probe: () => Promise<boolean>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
