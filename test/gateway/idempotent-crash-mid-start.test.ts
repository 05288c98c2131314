// An Idempotency-Key whose first request died mid-start (its gateway asked the engine,
// which queued the execution, and never answered: a crash, a pause past the claim's
// lease): the claim kept the execution the request would start from the moment it was
// taken (begin's hint, ADR 0027 amended 2026-11-28 (night)), so the retry that claims
// the key once the lease ran out, on another gateway, resumes that same id instead of
// starting a second execution. Two gateways share the idempotency store (memory: one
// object; Redis: a real redis-server, a client each) and one in-process engine.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RedisClient } from '../../api/records/redis-client.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import type { ExecutionEngine } from '../../runtime/engine/ports.ts';
import { createGuards } from '../../runtime/gateway/guards.ts';
import { RedisIdempotencyStore } from '../../runtime/gateway/idempotency/redis-store.ts';
import {
  MemoryIdempotencyStore,
  type IdempotencyStore,
} from '../../runtime/gateway/idempotency/store.ts';
import { installProblemHandlers } from '../../runtime/gateway/problem-handler.ts';
import { RouteTable } from '../../runtime/gateway/route-table.ts';
import { webhookRoutes } from '../../runtime/gateway/webhook-routes.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { makeRoute } from '../gateway-security/fixtures.ts';

/** The claims' lease, cut from the endpoint's timeout + 5 s so the test need not wait that long. */
const LEASE_MS = 1000;

/** A store whose claims last LEASE_MS. */
function shortLease(store: IdempotencyStore): IdempotencyStore {
  return {
    begin: (key, fingerprint, ttlMs, _leaseMs, hint) =>
      store.begin(key, fingerprint, ttlMs, LEASE_MS, hint),
    complete: (key, owner, record, ttlMs) => store.complete(key, owner, record, ttlMs),
    abandon: (key, owner, resume) => store.abandon(key, owner, resume),
  };
}

const route = makeRoute();
const registration: WorkflowRegistration = {
  workflowId: route.workflowId,
  namespace: 'shop',
  name: 'orders',
  generation: 1,
  application: 'shop',
  environment: 'production',
  spec: {
    publish: true,
    application: 'shop',
    environment: 'production',
    nodes: [{ id: 'out', type: 'transform', expression: '{ "n": body.n }' }],
  },
};

function suite(name: string, stores: () => Promise<[IdempotencyStore, IdempotencyStore]>) {
  describe(`a keyed request whose gateway died mid-start (${name} idempotency store)`, () => {
    let table: RouteTable;
    let engine: InProcessEngine;
    const apps: FastifyInstance[] = [];
    /** Starts the first gateway asked for and never answers (it died meanwhile). */
    const asked: string[] = [];
    let release: () => void = () => {};

    async function gateway(store: IdempotencyStore, starts: ExecutionEngine) {
      const app = Fastify();
      installProblemHandlers(app);
      await app.register((scope, _opts, done) => {
        webhookRoutes(scope, {
          table,
          engine: starts,
          guards: createGuards({}),
          idempotency: { store: shortLease(store) },
        });
        done();
      });
      apps.push(app);
      return app;
    }

    beforeAll(async () => {
      const routes = new MemoryRecordStore<RouteRecord>();
      const workflows = new MemoryRecordStore<WorkflowRegistration>();
      await routes.put(route.key, route);
      await workflows.put(registration.workflowId, registration);
      table = await RouteTable.create(routes, workflows);
      engine = new InProcessEngine({});
    });
    afterAll(async () => {
      release();
      for (const app of apps) await app.close();
      await engine?.close();
      table?.close();
    });

    it('the retry after the lease resumes the id the first asked for: one execution', async () => {
      const [storeA, storeB] = await stores();
      const stuck = new Promise<void>((resolve) => (release = resolve));
      // Gateway A: the engine queues the execution, the answer never comes back (until
      // the end of the test, when it comes too late to answer the key).
      const dying: ExecutionEngine = {
        start: (request) => {
          asked.push(request.input.metadata.executionId);
          return engine.start(request).then((execution) => stuck.then(() => execution));
        },
        get: (id) => engine.get(id),
        list: (filter) => engine.list(filter),
        page: (filter) => engine.page(filter),
        subscribe: (id, afterSeq, listener) => engine.subscribe(id, afterSeq, listener),
      };
      const a = await gateway(storeA, dying);
      const b = await gateway(storeB, engine);
      const send = (app: FastifyInstance) =>
        app.inject({
          method: 'POST',
          url: route.path,
          headers: { 'content-type': 'application/json', 'idempotency-key': 'order-7' },
          payload: JSON.stringify({ n: 7 }),
        });

      const claimed = Date.now();
      const first = send(a);
      await eventually(() => expect(asked).toHaveLength(1));
      const id = asked[0] as string;
      expect(await engine.get(id)).toBeDefined();
      // Within the lease the key is still the first request's (checked when the machine
      // was quick enough to ask well within it).
      const early = await send(b);
      if (Date.now() - claimed < LEASE_MS / 2) expect(early.statusCode, early.body).toBe(409);
      await sleep(LEASE_MS + 200);

      const retried = await send(b);
      expect(retried.statusCode, retried.body).toBe(202);
      expect(retried.json<{ executionId: string }>().executionId).toBe(id);
      expect(await engine.list({ triggerKey: route.key })).toHaveLength(1);
      // The retry's answer is the key's; the first, answered late, keeps nothing.
      const again = await send(b);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json<{ executionId: string }>().executionId).toBe(id);
      release();
      const late = await first;
      expect(late.json<{ executionId: string }>().executionId).toBe(id);
      // The links the first request answered with are the retry's: one token, kept too.
      expect(late.headers.location).toBe(retried.headers.location);
      expect(await engine.list({ triggerKey: route.key })).toHaveLength(1);
    });
  });
}

suite('memory', () => {
  const shared = new MemoryIdempotencyStore();
  return Promise.resolve([shared, shared]);
});

describe.skipIf(!redisAvailable())('over one Redis', () => {
  let backend: RedisBackend;
  beforeAll(async () => {
    backend = await singleRedis();
  }, 60_000);
  afterAll(async () => {
    await backend?.stop();
  });
  const others: RedisClient[] = [];
  afterAll(() => {
    for (const client of others) client.disconnect();
  });
  suite('Redis', async () => {
    await backend.flushall();
    const other = backend.connect();
    others.push(other);
    return [
      new RedisIdempotencyStore({ redis: backend.client }),
      new RedisIdempotencyStore({ redis: other }),
    ];
  });
});
