// A role exits on SIGTERM within its shutdown budget whatever its stdout does, and loses
// no log line when stdout is read (docs/availability.md, "Log lines at shutdown").
// stdout is a FIFO (test/support/fifo.ts, 64 KiB on Linux) whose reader holds it open
// and reads only when the test says so: never (a log collector that stopped reading),
// from the start, or only after the signal (one that paused). Every case logs more than
// the FIFO holds.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, sleep } from '../support/eventually.ts';
import { openFifo, type Fifo } from '../support/fifo.ts';
import { manifestDir, trigger, workflow } from '../support/manifests.ts';
import { freePort } from '../support/ports.ts';

const root = resolve(import.meta.dirname, '..', '..');
const PATH = '/webhook/default_production_orders/logged';
/** Requests the dev server logs (two debug lines each, about 350 bytes): over 64 KiB. */
const REQUESTS = 400;
/** Lines the fixture logs as it starts, and again while it closes: over 64 KiB each. */
const LINES = 2_000;
/** A stuck stdout may cost the shutdown a few seconds, never the 25 s grace period. */
const EXIT_WITHIN_MS = 10_000;

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A FIFO for a child's stdout, closed after the test. */
function stdoutFifo(): Fifo {
  const fifo = openFifo();
  cleanups.push(() => fifo.close());
  return fifo;
}

interface Started {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

/** `node <args>` with stdout on the FIFO's write end (the test's copy closed). */
function start(args: string[], stdout: number, env: Record<string, string>): Started {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  closeSync(stdout);
  cleanups.push(() => {
    child.kill('SIGKILL');
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once('exit', (code, signal) => done({ code, signal })),
  );
  return { child, exited, stderr: () => stderr };
}

/** SIGTERM, then how the process ended and how long it took, or `running` after `ms`. */
async function terminate(started: Started, ms: number) {
  const sent = Date.now();
  started.child.kill('SIGTERM');
  const ended = await Promise.race([started.exited, sleep(ms).then(() => 'running' as const)]);
  return { ended, tookMs: Date.now() - sent };
}

/** The samples of the log-drop counters on a /metrics page, by name and reason. */
async function logDrops(url: string): Promise<Record<string, number>> {
  const page = await (await fetch(url)).text();
  return Object.fromEntries(
    [...page.matchAll(/^(hookgate_log_\w+_dropped_total\{reason="\w+"\}) (\d+)$/gm)].map((m) => [
      m[1] as string,
      Number(m[2]),
    ]),
  );
}

describe('hookgate dev at LOG_LEVEL=debug (two lines per request)', () => {
  /** The dev server with its stdout on `stdout`, once it answered REQUESTS requests. */
  async function devServer(
    stdout: number,
    env: Record<string, string> = {},
    requests = REQUESTS,
  ): Promise<Started & { metrics: string }> {
    const manifests = await manifestDir();
    cleanups.push(() => manifests.cleanup());
    await manifests.write(
      'all.yaml',
      workflow('orders'),
      trigger('logged', { pathSegment: 'logged' }),
    );
    const port = await freePort();
    const started = start(['roles/cli.ts', 'dev', '--port', String(port)], stdout, {
      HOOKGATE_MANIFESTS: manifests.dir,
      ADMIN_PORT: String(await freePort()),
      LOG_LEVEL: 'debug',
      ...env,
    });
    const url = `http://127.0.0.1:${port}${PATH}`;
    const metrics = `http://127.0.0.1:${port}/metrics`;
    await eventually(
      async () => expect((await fetch(url, { method: 'OPTIONS' })).status).toBe(405),
      45_000,
      100,
    );
    // Counted from the start, at 0 while nothing is dropped (alerts need the series).
    expect(await logDrops(metrics)).toEqual({
      'hookgate_log_lines_dropped_total{reason="buffer_full"}': 0,
      'hookgate_log_lines_dropped_total{reason="write_error"}': 0,
      'hookgate_log_bytes_dropped_total{reason="buffer_full"}': 0,
      'hookgate_log_bytes_dropped_total{reason="write_error"}': 0,
    });
    for (let i = 0; i < requests; i++) {
      const res = await fetch(url, { method: 'POST', body: '{}' });
      expect(res.status).toBe(202);
      await res.arrayBuffer();
    }
    return { ...started, metrics };
  }

  /** The JSON lines of a dev server's stdout, and the POSTs it logged. */
  function parse(output: string) {
    const lines = output
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { msg: string; req?: { method: string } });
    const posts = lines.filter((l) => l.msg === 'incoming request' && l.req?.method === 'POST');
    return { lines, posts: posts.length };
  }

  it('stdout never read: SIGTERM still exits 0, within seconds', async () => {
    const fifo = stdoutFifo();
    const started = await devServer(fifo.writer);
    const { ended, tookMs } = await terminate(started, EXIT_WITHIN_MS + 5_000);
    expect(ended, started.stderr()).toEqual({ code: 0, signal: null });
    expect(tookMs).toBeLessThan(EXIT_WITHIN_MS);
  }, 90_000);

  it('stdout never read, HOOKGATE_LOG_BUFFER_BYTES=64Ki and HOOKGATE_LOG_STALL_MS=300: /metrics counts the lines dropped, and the exit gives up on stdout after 300 ms', async () => {
    const fifo = stdoutFifo();
    // About 280 KB of lines: the FIFO's 64 KiB, 64 KiB waiting, the rest dropped.
    const started = await devServer(
      fifo.writer,
      { HOOKGATE_LOG_BUFFER_BYTES: '64Ki', HOOKGATE_LOG_STALL_MS: '300' },
      2 * REQUESTS,
    );
    const drops = await logDrops(started.metrics);
    const lines = drops['hookgate_log_lines_dropped_total{reason="buffer_full"}'] ?? 0;
    const bytes = drops['hookgate_log_bytes_dropped_total{reason="buffer_full"}'] ?? 0;
    // Two debug lines of about 175 bytes a request.
    expect(lines).toBeGreaterThan(REQUESTS / 2);
    expect(bytes).toBeGreaterThan(lines * 100);
    expect(bytes).toBeLessThan(lines * 1000);
    expect(drops['hookgate_log_lines_dropped_total{reason="write_error"}']).toBe(0);
    // Stuck for longer than 300 ms already: the exit does not wait for stdout at all
    // (5 s with the default).
    const { ended, tookMs } = await terminate(started, EXIT_WITHIN_MS + 5_000);
    expect(ended, started.stderr()).toEqual({ code: 0, signal: null });
    expect(tookMs).toBeLessThan(2_000);
  }, 90_000);

  it('stdout read throughout: every line written, `stopped` last, none counted dropped', async () => {
    const fifo = stdoutFifo();
    const started = await devServer(fifo.writer);
    const output = fifo.readAll();
    expect(Object.values(await logDrops(started.metrics))).toEqual([0, 0, 0, 0]);
    const { ended } = await terminate(started, EXIT_WITHIN_MS + 5_000);
    expect(ended, started.stderr()).toEqual({ code: 0, signal: null });
    const { lines, posts } = parse(await output);
    expect(posts).toBe(REQUESTS);
    expect(lines.slice(-2).map((l) => l.msg)).toEqual(['shutting down', 'stopped']);
  }, 90_000);

  it('stdout read only a second after the signal: every line written, `stopped` last', async () => {
    const fifo = stdoutFifo();
    const started = await devServer(fifo.writer);
    const stopping = terminate(started, EXIT_WITHIN_MS + 5_000);
    await sleep(1_000);
    const output = await fifo.readAll();
    const { ended } = await stopping;
    expect(ended, started.stderr()).toEqual({ code: 0, signal: null });
    const { lines, posts } = parse(output);
    expect(posts).toBe(REQUESTS);
    expect(lines.slice(-2).map((l) => l.msg)).toEqual(['shutting down', 'stopped']);
  }, 90_000);
});

/** `a a a b` as `[['a', 3], ['b', 1]]`: the order of the messages, and how many in a row. */
function runs(messages: string[]): [string, number][] {
  const result: [string, number][] = [];
  for (const message of messages) {
    const last = result.at(-1);
    if (last?.[0] === message) last[1]++;
    else result.push([message, 1]);
  }
  return result;
}

describe.each([
  ['JSON lines', '0'],
  ['pino-pretty', '1'],
])('the role logger writing %s', (_format, pretty) => {
  const fixture = join(root, 'test', 'fixtures', 'lifecycle', 'logging-role.ts');
  async function role(stdout: number): Promise<Started> {
    const started = start([fixture], stdout, {
      PRETTY: pretty,
      LINES: String(LINES),
      NO_COLOR: '1',
    });
    await eventually(() => expect(started.stderr()).toContain('ready'), 15_000);
    return started;
  }

  it('stdout never read: SIGTERM still exits 0, within seconds', async () => {
    const fifo = stdoutFifo();
    const started = await role(fifo.writer);
    const { ended, tookMs } = await terminate(started, EXIT_WITHIN_MS + 5_000);
    expect(ended, started.stderr()).toEqual({ code: 0, signal: null });
    expect(tookMs).toBeLessThan(EXIT_WITHIN_MS);
  }, 30_000);

  it('stdout read only a second after the signal: every line written, `stopped` last', async () => {
    const fifo = stdoutFifo();
    const started = await role(fifo.writer);
    const stopping = terminate(started, EXIT_WITHIN_MS + 5_000);
    await sleep(1_000);
    const output = await fifo.readAll();
    const { ended } = await stopping;
    expect(ended, started.stderr()).toEqual({ code: 0, signal: null });
    const messages = output.match(/\b(starting|shutting down|closing|stopped)\b/g) ?? [];
    expect(runs(messages)).toEqual([
      ['starting', LINES],
      ['shutting down', 1],
      ['closing', LINES],
      ['stopped', 1],
    ]);
  }, 30_000);
});
