// `hookgate gateway` as deployed: routes, rate-limit counters and the execution queue
// in Redis, executions run by a worker elsewhere. This process is the gateway alone;
// it starts redis-server and the control plane (reconcile loop + worker) as children
// on the other core, so the gateway's core does only the gateway's work.
import { freePort, output } from '../support.ts';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createGatewayRuntime } from '../../roles/gateway.ts';

const hasTaskset = spawnSync('taskset', ['-c', '1', 'true']).status === 0;
const children: ChildProcess[] = [];

/** On core 1 (the load generator's) when taskset exists; `nice` lowers the priority. */
function onOtherCore(cmd: string, args: string[], nice: number, env = {}): ChildProcess {
  const pinned = hasTaskset ? ['taskset', '-c', '1', cmd, ...args] : [cmd, ...args];
  const child = spawn('nice', ['-n', String(nice), ...pinned], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  children.push(child);
  return child;
}

const redisPort = await freePort();
const redisServer = onOtherCore(
  'redis-server',
  ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
  0,
);
await output(redisServer, /Ready to accept connections/);
const url = `redis://127.0.0.1:${redisPort}`;
const control = onOtherCore(process.execPath, [join(import.meta.dirname, 'control-plane.ts')], 19, {
  REDIS_URL: url,
});
await output(control, /READY/);

const runtime = await createGatewayRuntime({
  redis: new Redis(url, { enableAutoPipelining: true }),
  baseUrl: 'http://127.0.0.1',
  // The worker on the busy core drains slower than the gateway accepts: let the
  // backlog grow during the run instead of answering 503.
  maxQueued: 100_000_000,
});
for (let i = 0; i < 200 && runtime.table.size < 2; i++) await new Promise((r) => setTimeout(r, 25));
if (runtime.table.size < 2) throw new Error('bench routes did not deploy');
const address = await runtime.app.listen({ port: 0, host: '127.0.0.1' });
console.log(`READY ${new URL(address).port}`);
process.on('SIGTERM', () => {
  for (const child of children) child.kill('SIGTERM');
  void runtime.close().then(() => process.exit(0));
});
