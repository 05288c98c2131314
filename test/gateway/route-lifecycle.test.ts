// The route lifecycle end to end: per-route state goes when its route leaves the table
// or is replaced, so a gateway's heap does not grow as triggers are edited and deleted.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import type { Execution, ExecutionEngine } from '../../runtime/engine/ports.ts';
import { createGuards } from '../../runtime/gateway/guards.ts';
import { installProblemHandlers } from '../../runtime/gateway/problem-handler.ts';
import { RouteTable } from '../../runtime/gateway/route-table.ts';
import { EndpointRateLimiter } from '../../runtime/gateway/security/rate-limit.ts';
import { webhookRoutes } from '../../runtime/gateway/webhook-routes.ts';
import { makeRoute } from '../gateway-security/fixtures.ts';

const run = promisify(execFile);
const churnScript = fileURLToPath(new URL('./support/route-churn.ts', import.meta.url));

describe('route churn (heap)', () => {
  it('after 10,000 routes created, edited and deleted, the heap is back within 1 MiB', async () => {
    // A child process, for --expose-gc; bytecode flushing off, so that code run only
    // at start-up and dropped later does not make the heap look smaller than it is.
    const { stdout } = await run(
      process.execPath,
      ['--expose-gc', '--no-flush-bytecode', churnScript, '10000', '200'],
      { timeout: 170_000 },
    );
    const result = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
      requests: number;
      startMiB: number;
      afterChurnMiB: number;
      afterGcMiB: number;
      retainedMiB: number;
    };
    console.log('route churn heap (MiB):', result);
    // one request per route and generation, and a refused body per schema route's
    expect(result.requests).toBe(2 * 10_000 + 2 * 200);
    expect(result.retainedMiB).toBeLessThan(1);
  }, 180_000);
});

describe('state kept by route key', () => {
  const routes = new MemoryRecordStore<RouteRecord>();
  const workflows = new MemoryRecordStore<WorkflowRegistration>();
  let table: RouteTable;
  let app: FastifyInstance;
  const engine: ExecutionEngine = {
    start: (request) =>
      Promise.resolve({
        id: request.input.metadata.executionId,
        workflowId: request.workflow.workflowId,
        triggerKey: request.input.metadata.triggerKey,
        status: 'queued',
        createdAt: request.input.metadata.timestamp,
        input: request.input,
        log: [],
      } satisfies Execution),
    get: () => Promise.resolve(undefined),
    list: () => Promise.resolve([]),
    page: () => Promise.resolve({ items: [] }),
    subscribe: () => () => {},
  };
  const limited = (generation: number) =>
    makeRoute(
      { rateLimit: { requestsPerMinute: 1, failureMode: 'open', enforce: true } },
      {},
      'shop/orders',
      generation,
    );
  const send = () => app.inject({ method: 'POST', url: limited(1).path, payload: {} });

  beforeAll(async () => {
    const route = limited(1);
    await workflows.put(route.workflowId, {
      workflowId: route.workflowId,
      namespace: 'shop',
      name: 'orders',
      generation: 1,
      application: 'shop',
      environment: 'production',
      spec: { nodes: [{ id: 'out', type: 'transform', expression: '1' }] },
    } as WorkflowRegistration);
    table = await RouteTable.create(routes, workflows);
    // A clock that never moves: a used-up limit stays used up.
    const guards = createGuards({ rateLimiter: new EndpointRateLimiter({ now: () => 0 }) });
    app = Fastify();
    installProblemHandlers(app);
    await app.register((scope, _opts, done) => {
      webhookRoutes(scope, { table, engine, guards });
      done();
    });
  });
  afterAll(async () => {
    await app.close();
    table.close();
  });

  it('a rate-limit count carries over to the next generation and goes with the route', async () => {
    await routes.put('shop/orders', limited(1));
    await table.refresh();
    expect((await send()).statusCode).toBe(202);
    expect((await send()).statusCode).toBe(429);
    await routes.put('shop/orders', limited(2));
    await table.refresh();
    expect((await send()).statusCode).toBe(429);
    await routes.delete('shop/orders');
    await table.refresh();
    expect((await send()).statusCode).toBe(404);
    await routes.put('shop/orders', limited(2));
    await table.refresh();
    expect((await send()).statusCode).toBe(202);
  });
});
