// What the queue benchmarks (worker.ts, cluster.ts) share: the bench manifests deployed
// into a Redis as the operator would, and the trigger output a gateway would queue.
import { join } from 'node:path';
import type { RedisClient } from '../api/records/redis-client.ts';
import { REDIS_KEYS, RedisRecordStore } from '../api/records/redis-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../api/records/records.ts';
import { createDevRuntime } from '../roles/dev.ts';
import type { StartRequest, TriggerOutput, TriggerRef } from '../runtime/engine/ports.ts';
import { triggerRef } from '../runtime/engine/trigger-ref.ts';

const here = import.meta.dirname;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What the gateway would hand the engine for POST /webhook/default_production_bench/ack;
 * with `padBytes`, the body carries a `note` of that many bytes (a larger payload).
 */
export function triggerOutput(route: TriggerRef, i: number, padBytes = 0): TriggerOutput {
  return {
    body: {
      orderId: `A-${1000 + i}`,
      total: 1250,
      ...(padBytes > 0 ? { note: 'x'.repeat(padBytes) } : {}),
    },
    headers: {
      host: '127.0.0.1:3000',
      connection: 'keep-alive',
      'content-type': 'application/json',
      'content-length': '37',
      'x-api-key': '[redacted]',
    },
    query: {},
    params: {},
    metadata: {
      timestamp: new Date().toISOString(),
      correlationId: `bench-${i}`,
      requestId: `req-${i}`,
      executionId: '',
      method: 'POST',
      path: route.path,
      route: route.path,
      contentType: 'application/json',
      consumer: 'bench',
      triggerKey: route.key,
      workflowId: route.workflowId,
    },
  };
}

/** The bench manifests' routes and workflow, reconciled into Redis as the operator would. */
export async function deploy(redis: RedisClient): Promise<Omit<StartRequest, 'input'>> {
  const control = await createDevRuntime({
    dir: join(here, 'servers', 'manifests'),
    baseUrl: 'http://127.0.0.1',
    redis,
  });
  for (let i = 0; i < 200 && control.table.size < 2; i++) await sleep(25);
  await control.close();
  const routes = new RedisRecordStore<RouteRecord>({ redis, key: REDIS_KEYS.routes });
  const workflows = new RedisRecordStore<WorkflowRegistration>({
    redis,
    key: REDIS_KEYS.workflows,
  });
  const route = (await routes.list()).find((r) => r.path.endsWith('/ack'));
  const workflow = route && (await workflows.get(route.workflowId));
  routes.close();
  workflows.close();
  if (!route || !workflow) throw new Error('bench routes did not deploy');
  return { trigger: triggerRef(route), workflow };
}
