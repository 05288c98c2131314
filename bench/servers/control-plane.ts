// The rest of the distributed deployment for the gateway benchmark, in one process
// (run.ts puts it on the load generator's core at the lowest priority): the reconcile
// loop writing the bench manifests' routes to Redis, and a worker draining the queue.
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createDevRuntime } from '../../roles/dev.ts';
import { createWorkerRuntime } from '../../roles/worker.ts';

const url = process.env.REDIS_URL;
if (!url) throw new Error('REDIS_URL is not set');
const redis = new Redis(url);
const control = await createDevRuntime({
  dir: join(import.meta.dirname, 'manifests'),
  baseUrl: 'http://127.0.0.1',
  redis,
});
const worker = await createWorkerRuntime({ redis: new Redis(url) });
console.log('READY 0');
process.on('SIGTERM', () => {
  // redis-server is stopped at the same moment: closing may wait on it, so bound it.
  setTimeout(() => process.exit(0), 3_000).unref();
  void Promise.all([control.close(), worker.close(1_000)]).finally(() => process.exit(0));
});
