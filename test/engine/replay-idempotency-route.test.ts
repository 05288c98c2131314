// POST /api/executions/<id>/replay with an Idempotency-Key (recovery-routes.ts): a
// client that sends the replay again (its answer was lost) starts one execution, not
// two; another caller with the same key starts its own; over the memory and the Redis
// idempotency stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import {
  AdminAccess,
  type AdminAuthenticator,
  type AdminUser,
} from '../../runtime/admin/access.ts';
import { HttpProblem } from '../../runtime/errors.ts';
import { RedisIdempotencyStore } from '../../runtime/gateway/idempotency/redis-store.ts';
import {
  MemoryIdempotencyStore,
  type IdempotencyStore,
} from '../../runtime/gateway/idempotency/store.ts';
import type { Execution, ExecutionEngine, StartRequest } from '../../runtime/engine/ports.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { deadLetteredExecution, queuedExecution, route, workflow } from './helpers.ts';

const KEY = 'shop/orders-hook';

/** Every bearer token is its own user, who may do anything. */
class Everyone implements AdminAuthenticator {
  authenticate(token: string): Promise<AdminUser | undefined> {
    return Promise.resolve({ username: token, groups: [] });
  }
  authorize(): Promise<boolean> {
    return Promise.resolve(true);
  }
}
const target = workflow([{ id: 'ok', type: 'transform', expression: '1' }]);

interface Answer {
  executionId: string;
  replayOf: string;
}

function suite(name: string, makeStore: () => Promise<IdempotencyStore>) {
  describe(`replay with an Idempotency-Key over the ${name} store`, () => {
    /** The admin routes over an engine that records its starts (an id runs once, as a real one). */
    async function server(
      wrap: (store: IdempotencyStore) => IdempotencyStore = (store) => store,
      access?: AdminAccess,
    ) {
      const executions = new Map<string, Execution>();
      for (const id of ['orig-1', 'orig-2']) executions.set(id, deadLetteredExecution(id));
      const starts: StartRequest[] = [];
      const state = {
        refuse: undefined as HttpProblem | undefined,
        published: true,
        /** Run before a start answers (a slow engine). */
        slow: undefined as (() => Promise<void>) | undefined,
      };
      let made = 0;
      const engine: ExecutionEngine = {
        start: async (request) => {
          starts.push(request);
          const slow = state.slow;
          state.slow = undefined;
          await slow?.();
          if (state.refuse) return Promise.reject(state.refuse);
          const id = request.input.metadata.executionId || `new-${++made}`;
          const existing = executions.get(id);
          if (existing) return Promise.resolve(existing);
          const execution: Execution = {
            ...queuedExecution(request, id),
            replayOf: request.replayOf ?? '',
          };
          executions.set(id, execution);
          return Promise.resolve(execution);
        },
        get: (id) => Promise.resolve(executions.get(id)),
        list: () => Promise.resolve([...executions.values()]),
        page: () => Promise.resolve({ items: [...executions.values()] }),
        subscribe: () => () => undefined,
      };
      const { app } = createHttpApp({});
      access?.install(app);
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(KEY, route(KEY));
      recoveryRoutes(app, {
        engine,
        routes,
        workflow: (id) => (state.published && id === target.workflowId ? target : undefined),
        // No dead letters: what a replay asks of the list (it looks, then tries to take).
        deadLetters: {
          get: () => Promise.resolve(undefined),
          take: () => Promise.resolve(undefined),
        } as never,
        idempotency: { store: wrap(await makeStore()) },
        ...(access ? { access } : {}),
      });
      const replay = (id: string, key?: string, query = '', caller?: string) =>
        app.inject({
          method: 'POST',
          url: `/api/executions/${id}/replay${query}`,
          headers: {
            ...(key === undefined ? {} : { 'idempotency-key': key }),
            ...(caller === undefined ? {} : { authorization: `Bearer ${caller}` }),
          },
        });
      const replays = () => [...executions.values()].filter((e) => e.replayOf !== undefined);
      return { app, replay, starts, state, replays };
    }

    it('the same key again: the first answer (Idempotent-Replayed), one execution', async () => {
      const { app, replay, replays } = await server();
      try {
        const first = await replay('orig-1', 'k-1');
        expect(first.statusCode, first.body).toBe(202);
        const answer = first.json<Answer>();
        expect(answer.replayOf).toBe('orig-1');
        const again = await replay('orig-1', 'k-1');
        expect(again.statusCode, again.body).toBe(202);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.headers.location).toBe(first.headers.location);
        expect(again.json<Answer>()).toEqual(answer);
        expect(replays().map((e) => e.id)).toEqual([answer.executionId]);
        // Without a key each call is a replay of its own, as before.
        const [a, b] = [await replay('orig-1'), await replay('orig-1')];
        expect(a.json<Answer>().executionId).not.toBe(b.json<Answer>().executionId);
        expect(replays()).toHaveLength(3);
      } finally {
        await app.close();
      }
    });

    it('a key is per execution; with allowRecreated set otherwise it is 422, a bad one 400', async () => {
      const { app, replay, replays } = await server();
      try {
        const one = await replay('orig-1', 'shared');
        const two = await replay('orig-2', 'shared');
        expect(two.statusCode, two.body).toBe(202);
        expect(two.json<Answer>()).toMatchObject({ replayOf: 'orig-2' });
        expect(two.json<Answer>().executionId).not.toBe(one.json<Answer>().executionId);
        const other = await replay('orig-1', 'shared', '?allowRecreated=true');
        expect(other.statusCode, other.body).toBe(422);
        expect(other.json<{ type: string }>().type).toMatch(/idempotency-key-reused$/);
        const bad = await replay('orig-1', 'two words');
        expect(bad.statusCode, bad.body).toBe(400);
        expect(bad.json<{ type: string }>().type).toMatch(/idempotency-key-invalid$/);
        expect(replays()).toHaveLength(2);
      } finally {
        await app.close();
      }
    });

    it('a key is per caller: two callers with one key for one execution get a replay each, and each its own answer again', async () => {
      const { app, replay, replays } = await server(undefined, new AdminAccess(new Everyone()));
      try {
        const alice = await replay('orig-1', 'shared', '', 'alice');
        const bob = await replay('orig-1', 'shared', '', 'bob');
        expect(alice.statusCode, alice.body).toBe(202);
        expect(bob.statusCode, bob.body).toBe(202);
        expect(bob.headers['idempotent-replayed']).toBeUndefined();
        const mine = alice.json<Answer>().executionId;
        expect(bob.json<Answer>().executionId).not.toBe(mine);
        const again = await replay('orig-1', 'shared', '', 'alice');
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.json<Answer>().executionId).toBe(mine);
        // Bob's key with another allowRecreated is his own mismatch, not Alice's.
        const other = await replay('orig-1', 'shared', '?allowRecreated=true', 'bob');
        expect(other.statusCode, other.body).toBe(422);
        expect(replays()).toHaveLength(2);
      } finally {
        await app.close();
      }
    });

    it('the engine refused: the retry with the key starts the execution the first asked for', async () => {
      const { app, replay, starts, state, replays } = await server();
      try {
        state.refuse = new HttpProblem('HG_ERR_ENGINE_OVERLOADED', 'busy');
        expect((await replay('orig-1', 'k-2')).statusCode).toBe(503);
        state.refuse = undefined;
        const retry = await replay('orig-1', 'k-2');
        expect(retry.statusCode, retry.body).toBe(202);
        const [first, second] = starts;
        const asked = first?.input.metadata.executionId;
        expect(asked).toBeTruthy();
        expect(second?.input.metadata.executionId).toBe(asked);
        expect(second?.hinted).toBe(true);
        expect(retry.json<Answer>().executionId).toBe(asked);
        expect(replays()).toHaveLength(1);
      } finally {
        await app.close();
      }
    });

    it("an engine that answers after the claim's lease ran out: the retry with the key starts the same execution", async () => {
      // The claim's lease cut to 50 ms (the route's is 30 s), as if the engine took that long.
      const shortLease = (store: IdempotencyStore): IdempotencyStore => ({
        begin: (key, fingerprint, ttlMs, _leaseMs, hint) =>
          store.begin(key, fingerprint, ttlMs, 50, hint),
        complete: (key, owner, record, ttlMs) => store.complete(key, owner, record, ttlMs),
        abandon: (key, owner, resume) => store.abandon(key, owner, resume),
      });
      const { app, replay, starts, state, replays } = await server(shortLease);
      try {
        let retried: Awaited<ReturnType<typeof replay>> | undefined;
        state.slow = async () => {
          await new Promise((resolve) => setTimeout(resolve, 150));
          retried = await replay('orig-1', 'k-5');
        };
        const first = await replay('orig-1', 'k-5');
        expect(first.statusCode, first.body).toBe(202);
        expect(retried?.statusCode, retried?.body).toBe(202);
        const asked = starts[0]?.input.metadata.executionId;
        expect(starts[1]?.input.metadata.executionId).toBe(asked);
        expect(retried?.json<Answer>().executionId).toBe(asked);
        expect(first.json<Answer>().executionId).toBe(asked);
        expect(replays()).toHaveLength(1);
      } finally {
        await app.close();
      }
    });

    it('a refused replay gives the key back: sent again once it can run, it runs', async () => {
      const { app, replay, state, replays } = await server();
      try {
        state.published = false;
        const refused = await replay('orig-1', 'k-3');
        expect(refused.statusCode, refused.body).toBe(409);
        expect(refused.json<{ type: string }>().type).toMatch(/replay-trigger-gone$/);
        state.published = true;
        const ran = await replay('orig-1', 'k-3');
        expect(ran.statusCode, ran.body).toBe(202);
        expect(ran.headers['idempotent-replayed']).toBeUndefined();
        expect(replays()).toHaveLength(1);
      } finally {
        await app.close();
      }
    });
  });
}

suite('memory', () => Promise.resolve(new MemoryIdempotencyStore()));

describe.skipIf(!redisAvailable())('over one Redis', () => {
  let backend: RedisBackend;
  beforeAll(async () => {
    backend = await singleRedis();
  }, 60_000);
  afterAll(async () => {
    await backend?.stop();
  });
  suite('Redis', async () => {
    await backend.flushall();
    return new RedisIdempotencyStore({ redis: backend.client });
  });
});
