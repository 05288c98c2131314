// SIGTERM under keep-alive load resets no connection (issue 17). A spawned process
// (the embedded dev server, and a gateway over Redis) serves many keep-alive clients
// that send continuously, plus clients whose connections sit idle; it gets SIGTERM.
//
// What counts (docs/availability.md, "Shutdown"):
// - every request is answered (any status), or refused before it was sent: the
//   connection attempt refused (ECONNREFUSED) once the listener has closed;
// - a connection the server ends while idle reaches the client as a clean end (FIN):
//   an idle client sees `end`, never an error, and its next request goes out on a
//   fresh connection (answered or refused);
// - never ECONNRESET, never "socket hang up" / "other side closed" on a request;
// - answers given after the signal carry `Connection: close`; the process exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, sleep } from '../support/eventually.ts';
import { manifestDir, trigger, workflow } from '../support/manifests.ts';
import { freePort } from '../support/prometheus.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const root = resolve(import.meta.dirname, '..', '..');
const PATH = '/webhook/default_production_orders/steady';
const CLIENTS = 24;
const IDLE_CLIENTS = 8;

interface Outcome {
  sentAt: number;
  answeredAt?: number;
  status?: number;
  connection?: string | undefined;
  afterSignal: boolean;
  error?: string;
}

const children: ChildProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const cleanup of cleanups) await cleanup();
});

function spawnRole(role: string, port: number, env: Record<string, string>): ChildProcess {
  const child = spawn(
    process.execPath,
    [join(root, 'roles/cli.ts'), role, '--port', String(port)],
    {
      env: { ...process.env, LOG_LEVEL: 'warn', HOOKGATE_ADMIN_AUTH: 'none', ...env },
      stdio: 'ignore',
    },
  );
  children.push(child);
  return child;
}

/** An idle keep-alive connection: one request answered, then nothing. */
async function idleConnection(port: number): Promise<{ socket: Socket; events: string[] }> {
  const socket = connect(port, '127.0.0.1');
  const events: string[] = [];
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let answered = '';
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer) => {
      answered += chunk.toString('latin1');
      if (/\r\n\r\n[\s\S]*\}/.test(answered)) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.write(
      `POST ${PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
    );
  });
  socket.on('data', () => events.push('data'));
  socket.on('end', () => events.push('end'));
  socket.on('error', (error: NodeJS.ErrnoException) => events.push(`error ${error.code}`));
  return { socket, events };
}

async function underLoadThenSigterm(child: ChildProcess, port: number) {
  const agent = new Agent({ connections: CLIENTS, keepAliveTimeout: 60_000, pipelining: 1 });
  const idle = await Promise.all(Array.from({ length: IDLE_CLIENTS }, () => idleConnection(port)));
  const outcomes: Outcome[] = [];
  let signalledAt = 0;
  let stop = false;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  const loop = async () => {
    while (!stop) {
      const afterSignal = signalledAt > 0;
      const sentAt = performance.now();
      try {
        const res = await request(`http://127.0.0.1:${port}${PATH}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"n":1}',
          dispatcher: agent,
        });
        await res.body.text();
        const connection = res.headers.connection;
        outcomes.push({
          sentAt,
          answeredAt: performance.now(),
          status: res.statusCode,
          connection: Array.isArray(connection) ? connection.join(',') : connection,
          afterSignal,
        });
      } catch (error) {
        const e = error as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
        const code = e.code ?? e.cause?.code ?? e.message;
        outcomes.push({ sentAt, error: `${code}: ${e.message}`, afterSignal });
        // Refused: the listener is gone, as expected after the signal.
        if (code === 'ECONNREFUSED') return;
      }
    }
  };
  const loops = Array.from({ length: CLIENTS }, loop);
  await sleep(1_500);
  signalledAt = Date.now();
  const signalledPerf = performance.now();
  child.kill('SIGTERM');
  const code = await exited;
  const stoppedMs = Date.now() - signalledAt;
  stop = true;
  await Promise.all(loops);
  // Each idle client, after the server ended its connection, sends again: on a fresh
  // connection, which is refused (the listener is closed).
  const retries = await Promise.all(
    idle.map(
      () =>
        new Promise<string>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.once('connect', () => {
            socket.destroy();
            resolve('connected');
          });
          socket.once('error', (error: NodeJS.ErrnoException) => resolve(String(error.code)));
        }),
    ),
  );
  await agent.close().catch(() => {});
  for (const { socket } of idle) socket.destroy();
  return {
    outcomes,
    idle: idle.map((c) => c.events),
    retries,
    code,
    stoppedMs,
    signalledPerf,
  };
}

function verdict(result: Awaited<ReturnType<typeof underLoadThenSigterm>>, label: string) {
  const { outcomes } = result;
  const errors = outcomes.filter((o) => o.error !== undefined);
  const refused = errors.filter((o) => o.error?.startsWith('ECONNREFUSED'));
  // Answered after the signal: in flight when it came, or sent after it on a kept-alive
  // connection. (Those sent after it may all be refused on a slow machine, where the
  // server closes before any client gets another request in.)
  const after = outcomes.filter(
    (o) => o.status !== undefined && (o.answeredAt ?? 0) > result.signalledPerf,
  );
  const summary = {
    requests: outcomes.length,
    answered: outcomes.length - errors.length,
    answeredAfterSignal: after.length,
    refusedBeforeSending: refused.length,
    otherErrors: errors.length - refused.length,
    statuses: count(outcomes.map((o) => String(o.status ?? o.error?.split(':')[0]))),
    idleConnections: count(result.idle.map((e) => e.join(' ') || 'nothing')),
    idleRetries: count(result.retries),
    exitCode: result.code,
    stoppedMs: result.stoppedMs,
  };
  console.info(`${label} SIGTERM under keep-alive load:`, JSON.stringify(summary));
  expect(outcomes.length).toBeGreaterThan(100);
  expect(after.length, 'requests answered after the signal').toBeGreaterThan(0);
  // No reset, no hang-up: every error is a refused connection attempt.
  expect(errors.filter((o) => !o.error?.startsWith('ECONNREFUSED'))).toEqual([]);
  // Only 202s: nothing was cut short or refused as shutting down on a kept-alive connection.
  expect(outcomes.filter((o) => o.status !== undefined && o.status !== 202)).toEqual([]);
  // Once the close has begun (the first answer that says so), every request sent after
  // it is answered with Connection: close. (A gateway withdraws its report from Redis
  // before its listeners close: answers right after the signal may still keep alive.)
  const firstClose = Math.min(
    ...outcomes.filter((o) => o.connection === 'close').map((o) => o.answeredAt ?? Infinity),
  );
  expect(firstClose).toBeLessThan(Infinity);
  const late = outcomes.filter((o) => o.sentAt > firstClose && o.status !== undefined);
  expect(late.filter((o) => o.connection !== 'close')).toEqual([]);
  // Idle connections were ended cleanly, and a retry found the listener closed.
  for (const events of result.idle) expect(events).toEqual(['end']);
  for (const retry of result.retries) expect(retry).toBe('ECONNREFUSED');
  expect(result.code).toBe(0);
}

describe('SIGTERM under keep-alive load', () => {
  it('the embedded dev server: no reset, every request answered or refused before sending', async () => {
    const manifests = await manifestDir();
    cleanups.push(() => manifests.cleanup());
    await manifests.write(
      'all.yaml',
      workflow('orders'),
      trigger('steady', { pathSegment: 'steady' }),
    );
    const port = await freePort();
    const child = spawnRole('dev', port, {
      HOOKGATE_MANIFESTS: manifests.dir,
      ADMIN_PORT: String(await freePort()),
    });
    await eventually(
      async () =>
        expect((await fetch(`http://127.0.0.1:${port}${PATH}`, { method: 'OPTIONS' })).status).toBe(
          405,
        ),
      45_000,
      100,
    );
    verdict(await underLoadThenSigterm(child, port), 'dev');
  }, 120_000);

  it.skipIf(!redisAvailable())(
    'a gateway process over Redis: no reset, every request answered or refused before sending',
    async () => {
      const redis: RedisServer = await startRedis();
      cleanups.push(() => redis.stop());
      // The routes come from a dev process over the same Redis (what an operator writes).
      const manifests = await manifestDir();
      cleanups.push(() => manifests.cleanup());
      await manifests.write(
        'all.yaml',
        workflow('orders'),
        trigger('steady', { pathSegment: 'steady' }),
      );
      const devPort = await freePort();
      const dev = spawnRole('dev', devPort, {
        HOOKGATE_MANIFESTS: manifests.dir,
        ADMIN_PORT: String(await freePort()),
        REDIS_URL: redis.url,
      });
      await eventually(
        async () =>
          expect(
            (await fetch(`http://127.0.0.1:${devPort}${PATH}`, { method: 'OPTIONS' })).status,
          ).toBe(405),
        45_000,
        100,
      );
      const port = await freePort();
      const gateway = spawnRole('gateway', port, {
        REDIS_URL: redis.url,
        ADMIN_PORT: String(await freePort()),
        HOOKGATE_EXECUTIONS: 'inline',
      });
      await eventually(
        async () =>
          expect(
            (await fetch(`http://127.0.0.1:${port}${PATH}`, { method: 'OPTIONS' })).status,
          ).toBe(405),
        45_000,
        100,
      );
      verdict(await underLoadThenSigterm(gateway, port), 'gateway');
      dev.kill('SIGKILL');
    },
    120_000,
  );
});

function count(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}
