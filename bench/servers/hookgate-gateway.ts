// `hookgate gateway` as deployed: routes, rate-limit counters and the execution queue
// in Redis, executions run by a worker elsewhere. This process is the gateway alone;
// it starts redis-server, the control plane (reconcile loop) and a worker (`hookgate
// worker`) as children on the other core, so the gateway's core does only its work.
import { benchRedis, freePort, onOtherCore as helperOnOtherCore, output } from '../support.ts';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createGatewayRuntime } from '../../roles/gateway.ts';
import { ready, waitForRoutes } from './routes.ts';
import { tuneV8ForServing } from '../../roles/v8-tuning.ts';
import { REDIS_CLIENT_DEFAULTS, redisClients } from '../../roles/redis.ts';
import { pino } from 'pino';

const children: ChildProcess[] = [];

/** A helper on core 1 (bench/support.ts), stopped with this process. */
function onOtherCore(cmd: string, args: string[], nice: number, env = {}): ChildProcess {
  const child = helperOnOtherCore(cmd, args, nice, env);
  children.push(child);
  return child;
}

const { server: redisServer, url } = await benchRedis();
children.push(redisServer);
const redisPort = new URL(url).port;
// BENCH_GATEWAY_ACK_REPLICAS=N: N replicas, and the gateway answers once they have the
// execution (HOOKGATE_QUEUE_ACK_REPLICAS; their CPU counts with the helpers).
const ackReplicas = Number(process.env.BENCH_GATEWAY_ACK_REPLICAS ?? 0);
const replicaDirs: string[] = [];
for (let i = 0; i < ackReplicas; i++) {
  // A replica writes the copy it receives to disk: not into the checkout.
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-bench-replica-'));
  replicaDirs.push(dir);
  const replica = onOtherCore(
    'redis-server',
    [
      '--port',
      String(await freePort()),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--replicaof',
      '127.0.0.1',
      String(redisPort),
      '--dir',
      dir,
    ],
    0,
  );
  await output(replica, /Ready to accept connections/);
}
if (ackReplicas > 0) {
  const probe = new Redis(url);
  await probe.set('bench:replicas', '1');
  // Synced (a replica starts after the master's diskless-sync delay) and acknowledging.
  for (let i = 0; (await probe.wait(ackReplicas, 1_000)) < ackReplicas; i++) {
    if (i > 30) throw new Error('the bench replicas did not come up');
  }
  probe.disconnect();
}
const control = onOtherCore(process.execPath, [join(import.meta.dirname, 'control-plane.ts')], 19, {
  REDIS_URL: url,
});
await output(control, /READY/);
const workerPort = await freePort();
onOtherCore(
  process.execPath,
  [
    join(import.meta.dirname, '..', '..', 'roles', 'cli.ts'),
    'worker',
    '--port',
    String(workerPort),
  ],
  19,
  { REDIS_URL: url, LOG_LEVEL: 'warn' },
);
for (let i = 0; ; i++) {
  const ready = await fetch(`http://127.0.0.1:${workerPort}/readyz`).catch(() => undefined);
  if (ready?.ok) break;
  if (i > 300) throw new Error('the bench worker did not become ready');
  await new Promise((r) => setTimeout(r, 50));
}

// As roles/cli.ts starts the role: its two Redis clients (roles/redis.ts), the
// request path's behind the circuit breaker and with the write window
// (BENCH_GATEWAY_WRITE_WINDOW_MS, default HOOKGATE_REDIS_WRITE_WINDOW_MS's).
tuneV8ForServing();
const windowMs = process.env.BENCH_GATEWAY_WRITE_WINDOW_MS;
const clients = redisClients(
  url,
  {
    ...REDIS_CLIENT_DEFAULTS,
    ...(windowMs !== undefined ? { writeWindowMs: Number(windowMs) } : {}),
  },
  pino({ level: 'warn' }),
);
const runtime = await createGatewayRuntime({
  redis: clients.main,
  requests: clients.requests,
  baseUrl: 'http://127.0.0.1',
  // The worker on the busy core drains slower than the gateway accepts: let the
  // backlog grow during the run instead of answering 503.
  maxQueued: 100_000_000,
  ...(ackReplicas > 0 ? { queueAcks: { replicas: ackReplicas, timeoutMs: 250 } } : {}),
});
await waitForRoutes(runtime.table);
const address = await runtime.app.listen({ port: 0, host: '127.0.0.1' });
ready(address);
// The gateway first, its Redis connection next, the worker and the control plane then
// (waited for: stopped with redis-server, they printed reconnection errors for seconds),
// redis-server last.
function stopped(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
process.on('SIGTERM', () => {
  void runtime.close().finally(async () => {
    clients.disconnect();
    await Promise.all(children.filter((c) => c !== redisServer).map(stopped));
    redisServer.kill('SIGTERM');
    for (const dir of replicaDirs) rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  });
});
