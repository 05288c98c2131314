// Redis unreachable at start-up: a gateway and a worker process still listen, answer
// liveness, and report not-ready (the gateway: its routes are not loaded); once Redis
// answers they turn ready with no restart. When it goes away again the worker turns
// not-ready, the gateway stays ready and says so (ADR 0030: it answers 503 itself).
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { freePort } from '../support/prometheus.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';

const cli = join(import.meta.dirname, '..', '..', 'roles', 'cli.ts');
const children: ChildProcess[] = [];
let redis: RedisServer | undefined;

function start(role: string, port: number, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [cli, role, '--port', String(port)], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: 'ignore',
  });
  children.push(child);
  return child;
}

async function probe(port: number, path: string): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}${path}`)).status;
  } catch {
    return 0;
  }
}

describe.skipIf(!redisAvailable())('Redis down at start-up', () => {
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await redis?.stop();
  });

  it('gateway and worker listen, are live and not ready, then ready once Redis answers', async () => {
    const redisPort = await freePort();
    const env = { REDIS_URL: `redis://127.0.0.1:${redisPort}`, HOOKGATE_ADMIN_AUTH: 'none' };
    const gateway = await freePort();
    const worker = await freePort();
    start('gateway', gateway, { ...env, ADMIN_PORT: String(await freePort()) });
    start('worker', worker, env);

    for (const port of [gateway, worker]) {
      await eventually(async () => expect(await probe(port, '/healthz')).toBe(200), 15_000);
      expect(await probe(port, '/readyz')).toBe(503);
    }
    // Still up and still not ready a little later: no crash, no silent exit.
    await new Promise((r) => setTimeout(r, 1500));
    for (const port of [gateway, worker]) {
      expect(await probe(port, '/healthz')).toBe(200);
      expect(await probe(port, '/readyz')).toBe(503);
    }

    redis = await startRedis({ port: redisPort });
    for (const port of [gateway, worker])
      await eventually(async () => expect(await probe(port, '/readyz')).toBe(200), 20_000);

    await redis.stop();
    await eventually(async () => expect(await probe(worker, '/readyz')).toBe(503), 20_000);
    await eventually(async () => {
      const res = await fetch(`http://127.0.0.1:${gateway}/readyz`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { status: string }).status).toMatch(/^ready; redis /);
    }, 20_000);
    for (const port of [gateway, worker]) expect(await probe(port, '/healthz')).toBe(200);
  }, 90_000);
});
