// The control plane of the distributed deployment for the gateway benchmark (on the
// load generator's core at the lowest priority): the reconcile loop writing the bench
// manifests' routes to Redis. The worker is a process of its own (`hookgate worker`),
// so that its CPU per execution is reported on its own.
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createDevRuntime } from '../../roles/dev.ts';

const url = process.env.REDIS_URL;
if (!url) throw new Error('REDIS_URL is not set');
const redis = new Redis(url);
const control = await createDevRuntime({
  dir: join(import.meta.dirname, 'manifests'),
  baseUrl: 'http://127.0.0.1',
  redis,
});
console.log('READY 0');
process.on('SIGTERM', () => {
  // redis-server is stopped at the same moment: closing may wait on it, so bound it.
  setTimeout(() => process.exit(0), 3_000).unref();
  void control.close().finally(() => process.exit(0));
});
