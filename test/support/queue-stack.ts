// The distributed shape in one process, for end-to-end tests on a real Redis: a control
// plane (the dev runtime on Redis) applies manifests and writes the routes, a gateway
// (the gateway role) serves them and queues executions, and a worker (the worker role)
// runs them. Every role has its own connection, as separate pods would.
import { expect } from 'vitest';
import type { RedisClient } from '../../api/records/redis-client.ts';
import { createGatewayRuntime, type GatewayOptions } from '../../roles/gateway.ts';
import type { Serving } from '../../roles/serving.ts';
import {
  createWorkerRuntime,
  type WorkerRuntime,
  type WorkerRuntimeOptions,
} from '../../roles/worker.ts';
import { eventually } from './eventually.ts';
import { startRuntime, type TestRuntime } from './gateway.ts';
import { singleRedis, type RedisBackend } from './redis-backends.ts';

export interface QueueStackOptions {
  /**
   * The Redis: one the caller started (and stops after close()), or how to start one
   * that the stack stops on close(). Default: a fresh single redis-server.
   */
  backend?: RedisBackend | (() => Promise<RedisBackend>);
  /** What the control plane applies, and the triggers that must be Ready. */
  manifests: { file: string; docs: object[]; ready: string[] };
  /** Routes the gateway's table serves before start returns. Default: `ready`'s length. */
  routes?: number;
  /**
   * The gateway's options. Its `redis` defaults to a new connection to the backend (one
   * given, e.g. through a fault proxy, is disconnected on close() too); `baseUrl` to
   * http://localhost.
   */
  gateway?: Partial<GatewayOptions>;
  /** The worker's options (its own connection); no worker when omitted. */
  worker?: Omit<WorkerRuntimeOptions, 'redis'>;
  /** Listen on loopback (the webhook and the admin listener). Default true. */
  listen?: boolean;
}

export interface QueueStack {
  backend: RedisBackend;
  control: TestRuntime;
  gateway: Serving;
  /** The gateway's connection (its queued engine defines its scripts on it). */
  gatewayRedis: RedisClient;
  /** Undefined when no worker was asked for. */
  worker: WorkerRuntime | undefined;
  /** The gateway's webhook listener, e.g. http://127.0.0.1:41234 ('' without listen). */
  base: string;
  /** The gateway's admin listener ('' without listen). */
  admin: string;
  /** A new connection to the stack's Redis, disconnected on close(). */
  redis(): RedisClient;
  /**
   * Gateway, worker (2 s to finish its runs), control plane, the stack's connections,
   * then the Redis it started. Safe after a partial start.
   */
  close(): Promise<void>;
}

/** Starts the stack; on a failure stops what had started, then throws. */
export async function startQueueStack(options: QueueStackOptions): Promise<QueueStack> {
  /** Every connection the roles use: the stack disconnects them on close(). */
  const clients: RedisClient[] = options.gateway?.redis ? [options.gateway.redis] : [];
  const owned = typeof options.backend !== 'object';
  let backend: RedisBackend | undefined;
  let control: TestRuntime | undefined;
  let gateway: Serving | undefined;
  let worker: WorkerRuntime | undefined;
  const redis = () => {
    if (!backend) throw new Error('no Redis yet');
    const client = backend.connect();
    clients.push(client);
    return client;
  };
  const close = async () => {
    await gateway?.close();
    await worker?.close(2_000);
    await control?.stop();
    for (const client of clients) client.disconnect();
    if (owned) await backend?.stop();
  };
  try {
    const start = typeof options.backend === 'function' ? options.backend : singleRedis;
    backend = typeof options.backend === 'object' ? options.backend : await start();
    control = await startRuntime({ redis: redis() });
    const { file, docs, ready } = options.manifests;
    await control.apply(file, docs, ready);
    const gatewayRedis = options.gateway?.redis ?? redis();
    const serving = await createGatewayRuntime({
      baseUrl: 'http://localhost',
      ...options.gateway,
      redis: gatewayRedis,
    });
    gateway = serving;
    const routes = options.routes ?? ready.length;
    await eventually(() => expect(serving.table.size).toBe(routes));
    if (options.worker) worker = await createWorkerRuntime({ ...options.worker, redis: redis() });
    const listen = options.listen ?? true;
    const loopback = { port: 0, host: '127.0.0.1' };
    const base = listen ? await serving.app.listen(loopback) : '';
    const admin = listen ? await serving.admin.listen(loopback) : '';
    return { backend, control, gateway: serving, gatewayRedis, worker, base, admin, redis, close };
  } catch (error) {
    await close();
    throw error;
  }
}
