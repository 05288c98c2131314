// The dead-letter retry route (runtime/read-api/recovery-routes.ts) and the record the
// list holds for each entry (ADR 0039), over the memory stores and over Redis: a retry
// that started releases the record; one that cannot start puts its entry back, and says
// so when its record went meanwhile (nothing else would).
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteRecord } from '../../api/records/records.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import {
  deadLetterOf,
  MemoryDeadLetterStore,
  type DeadLetterStore,
  type HeldRecords,
} from '../../runtime/engine/dead-letters.ts';
import { RedisDeadLetterStore } from '../../runtime/engine/dead-letters-redis.ts';
import { MemoryExecutionStore, type ExecutionStore } from '../../runtime/engine/execution-store.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { Execution, ExecutionEngine, StartRequest } from '../../runtime/engine/ports.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import { redisAvailable } from '../support/redis.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { deadLetteredExecution, queuedExecution, route, workflow } from './helpers.ts';

const KEY = 'shop/orders-hook';
const target = workflow([{ id: 'ok', type: 'transform', expression: '1' }]);

interface Stores {
  store: ExecutionStore & HeldRecords;
  deadLetters: DeadLetterStore;
  /** The record of `id` goes (it expires): the store no longer has it. */
  lose(id: string): Promise<void>;
}

type Line = { level: number; msg: string; executionId?: string };

function suite(name: string, make: () => Promise<Stores>) {
  describe(`the dead-letter retry route over ${name}`, () => {
    /** A dead-lettered execution listed, its record held; the admin app over it. */
    async function listed(start: (request: StartRequest) => Promise<Execution>) {
      const stores = await make();
      const dead = deadLetteredExecution('dead-1');
      await stores.store.save({ ...dead, status: 'running' });
      await stores.store.save(dead);
      expect(await stores.deadLetters.add(deadLetterOf(dead))).toBe(true);
      expect(await stores.store.heldBytes()).toBeGreaterThan(0);
      const engine: ExecutionEngine = {
        start,
        get: (id) => stores.store.get(id),
        list: (filter) => stores.store.list(filter),
        page: (filter) => stores.store.page(filter),
        subscribe: () => () => undefined,
      };
      const lines: Line[] = [];
      const logger = pino(
        { level: 'info' },
        { write: (l: string) => lines.push(JSON.parse(l) as Line) },
      );
      const { app } = createHttpApp({ logger });
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(KEY, route(KEY));
      recoveryRoutes(app, {
        engine,
        routes,
        workflow: (id) => (id === target.workflowId ? target : undefined),
        deadLetters: stores.deadLetters,
      });
      const retry = () => app.inject({ method: 'POST', url: `/api/dead-letters/${dead.id}/retry` });
      return { ...stores, dead, app, lines, retry };
    }

    const started = (request: StartRequest): Promise<Execution> =>
      Promise.resolve(queuedExecution(request, 'retry-1'));

    it("a retry that started releases its entry's record: an ordinary finished one again", async () => {
      const { store, deadLetters, dead, app, retry } = await listed(started);
      try {
        const res = await retry();
        expect(res.statusCode, res.body).toBe(202);
        expect(res.json()).toMatchObject({ executionId: 'retry-1', replayOf: dead.id });
        expect(await deadLetters.get(dead.id)).toBeUndefined();
        expect(await store.heldBytes()).toBe(0);
        expect(await store.get(dead.id)).toMatchObject({ deadLetteredAt: dead.deadLetteredAt });
      } finally {
        await app.close();
      }
    });

    it('a retry that cannot start puts its entry back, held; its record gone meanwhile, that is said in the log', async () => {
      let lose: (() => Promise<void>) | undefined;
      const full = async (): Promise<Execution> => {
        await lose?.();
        throw new Error('the queue is full');
      };
      const listing = await listed(full);
      const { store, deadLetters, dead, app, lines, retry } = listing;
      try {
        // The record still there: the entry is back, its record still held; nothing said.
        expect((await retry()).statusCode).toBe(500);
        expect(await deadLetters.get(dead.id)).toBeDefined();
        expect(await store.heldBytes()).toBeGreaterThan(0);
        const said = (l: Line) => l.msg.includes('not listed again');
        expect(lines.filter(said)).toEqual([]);
        // Its record expires while the retry tries to start: not listed again, and said.
        lose = () => listing.lose(dead.id);
        expect((await retry()).statusCode).toBe(500);
        expect(await deadLetters.get(dead.id)).toBeUndefined();
        expect(lines.filter(said)).toEqual([
          expect.objectContaining({
            level: 50,
            executionId: dead.id,
            msg: 'the dead letter whose retry could not start is not listed again: its record is gone',
          }),
        ]);
      } finally {
        await app.close();
      }
    });
  });
}

/** An engine start that counts its executions (new-1, new-2, ...), each a tick late. */
function counting() {
  const ids: string[] = [];
  const start = async (request: StartRequest): Promise<Execution> => {
    await new Promise((resolve) => setImmediate(resolve));
    const id = request.input.metadata.executionId || `new-${ids.length + 1}`;
    ids.push(id);
    return queuedExecution(request, id);
  };
  return { ids, start };
}

function replaySuite(name: string, make: () => Promise<Stores>) {
  describe(`a replay of a dead-lettered execution over ${name} (it stands for its retry)`, () => {
    async function listed(
      start: (request: StartRequest) => Promise<Execution>,
      wrap: (list: DeadLetterStore) => DeadLetterStore = (list) => list,
      lookup: (store: ExecutionStore, id: string) => Promise<Execution | undefined> = (store, id) =>
        store.get(id),
    ) {
      const stores = await make();
      const dead = deadLetteredExecution('dead-1');
      await stores.store.save({ ...dead, status: 'running' });
      await stores.store.save(dead);
      expect(await stores.deadLetters.add(deadLetterOf(dead))).toBe(true);
      const engine: ExecutionEngine = {
        start,
        get: (id) => lookup(stores.store, id),
        list: (filter) => stores.store.list(filter),
        page: (filter) => stores.store.page(filter),
        subscribe: () => () => undefined,
      };
      const { app } = createHttpApp({});
      const routes = new MemoryRecordStore<RouteRecord>();
      await routes.put(KEY, route(KEY));
      recoveryRoutes(app, {
        engine,
        routes,
        workflow: (id) => (id === target.workflowId ? target : undefined),
        deadLetters: wrap(stores.deadLetters),
      });
      const retry = () => app.inject({ method: 'POST', url: `/api/dead-letters/${dead.id}/retry` });
      const replay = (key?: string) =>
        app.inject({
          method: 'POST',
          url: `/api/executions/${dead.id}/replay`,
          headers: key === undefined ? {} : { 'idempotency-key': key },
        });
      return { ...stores, dead, app, retry, replay };
    }

    it.each([['without'], ['with']])(
      'a replay (%s an Idempotency-Key) takes the entry: a retry after it starts nothing',
      async (keyed) => {
        const { ids, start } = counting();
        const { store, deadLetters, dead, app, retry, replay } = await listed(start);
        try {
          const replayed = await replay(keyed === 'with' ? 'k-1' : undefined);
          expect(replayed.statusCode, replayed.body).toBe(202);
          expect(replayed.json()).toMatchObject({ replayOf: dead.id, deadLetter: 'taken' });
          expect(await deadLetters.get(dead.id)).toBeUndefined();
          expect(await store.heldBytes()).toBe(0);
          const retried = await retry();
          expect(retried.statusCode, retried.body).toBe(404);
          expect(retried.json<{ type: string }>().type).toMatch(/dead-letter-not-found$/);
          expect(ids).toHaveLength(1);
          // Replayed again: a replay of its own (no entry to take, none said).
          const again = await replay();
          expect(again.statusCode, again.body).toBe(202);
          expect(again.json()).not.toHaveProperty('deadLetter');
          expect(ids).toHaveLength(2);
        } finally {
          await app.close();
        }
      },
    );

    it('a replay and a retry at once start one execution', async () => {
      for (const keyed of [false, true]) {
        const { ids, start } = counting();
        const { app, retry, replay } = await listed(start);
        try {
          const answers = await Promise.all([replay(keyed ? 'k-2' : undefined), retry()]);
          expect(ids, answers.map((a) => a.body).join('\n')).toHaveLength(1);
          expect(answers.filter((a) => a.statusCode === 202)).toHaveLength(1);
        } finally {
          await app.close();
        }
      }
    });

    it('a retry between the replay finding the entry and taking it: the replay is refused (409), one execution', async () => {
      const { ids, start } = counting();
      let retryFirst: (() => Promise<unknown>) | undefined;
      const wrap = (list: DeadLetterStore): DeadLetterStore => ({
        add: (entry) => list.add(entry),
        list: (filter) => list.list(filter),
        release: (taken) => list.release(taken),
        count: () => list.count(),
        take: (id) => list.take(id),
        get: async (id) => {
          const entry = await list.get(id);
          const run = retryFirst;
          retryFirst = undefined;
          if (run) expect(await run()).toMatchObject({ statusCode: 202 });
          return entry;
        },
      });
      const { dead, deadLetters, app, retry, replay } = await listed(start, wrap);
      try {
        retryFirst = retry;
        const refused = await replay();
        expect(refused.statusCode, refused.body).toBe(409);
        expect(refused.json()).toMatchObject({
          code: 'HG_ERR_REPLAY_DEAD_LETTER_TAKEN',
          executionId: dead.id,
        });
        expect(ids).toHaveLength(1);
        expect(await deadLetters.get(dead.id)).toBeUndefined();
      } finally {
        await app.close();
      }
    });

    it('an entry listed between the replay looking for it and taking it is taken: a retry after it starts nothing', async () => {
      const { ids, start } = counting();
      let listLate = true;
      // The look finds no entry (its execution is dead-lettered just after): the entry is
      // out of the list when the look runs, and listed again right after it.
      const wrap = (list: DeadLetterStore): DeadLetterStore => ({
        add: (entry) => list.add(entry),
        list: (filter) => list.list(filter),
        release: (taken) => list.release(taken),
        count: () => list.count(),
        take: (id) => list.take(id),
        get: async (id) => {
          if (!listLate) return list.get(id);
          listLate = false;
          const out = await list.take(id);
          const entry = await list.get(id);
          if (out) expect(await list.add(out.entry)).toBe(true);
          return entry;
        },
      });
      const { store, dead, deadLetters, app, retry, replay } = await listed(start, wrap);
      try {
        const replayed = await replay();
        expect(replayed.statusCode, replayed.body).toBe(202);
        expect(replayed.json()).toMatchObject({ replayOf: dead.id, deadLetter: 'taken' });
        expect(await deadLetters.get(dead.id)).toBeUndefined();
        expect(await store.heldBytes()).toBe(0);
        const retried = await retry();
        expect(retried.statusCode, retried.body).toBe(404);
        expect(ids).toHaveLength(1);
      } finally {
        await app.close();
      }
    });

    /**
     * A start whose record is written and whose answer is lost (a queued start's script
     * ran, then Redis timed out): it saves the execution of the id asked for, then throws.
     */
    function answerLost() {
      const ids: string[] = [];
      const state = { store: undefined as ExecutionStore | undefined };
      const start = async (request: StartRequest): Promise<Execution> => {
        const execution = queuedExecution(request, request.input.metadata.executionId || 'lost-1');
        ids.push(execution.id);
        await state.store?.save(execution);
        throw new Error('Command timed out');
      };
      return { ids, state, start };
    }

    it.each([['a retry'], ['a replay'], ['a keyed replay']])(
      '%s whose start wrote its record, then failed: it stands (202), its entry is not listed again, one execution',
      async (how) => {
        const lost = answerLost();
        const { store, deadLetters, dead, app, retry, replay } = await listed(lost.start);
        lost.state.store = store;
        try {
          const res =
            how === 'a retry'
              ? await retry()
              : await replay(how === 'a keyed replay' ? 'k-4' : undefined);
          expect(res.statusCode, res.body).toBe(202);
          expect(lost.ids).toHaveLength(1);
          expect(res.json()).toMatchObject({ executionId: lost.ids[0], replayOf: dead.id });
          expect(await store.get(lost.ids[0] ?? '')).toBeDefined();
          expect(await deadLetters.get(dead.id)).toBeUndefined();
          expect(await store.heldBytes()).toBe(0);
          // A later retry finds nothing to retry: the request ran once.
          const again = await retry();
          expect(again.statusCode, again.body).toBe(404);
          expect(lost.ids).toHaveLength(1);
        } finally {
          await app.close();
        }
      },
    );

    it('a start that failed and whose lookup fails too (the store away) puts the entry back, as before', async () => {
      const lost = answerLost();
      const away = (store: ExecutionStore, id: string) =>
        id === 'dead-1' ? store.get(id) : Promise.reject(new Error('Connection is closed'));
      const { store, deadLetters, dead, app, retry, replay } = await listed(
        lost.start,
        undefined,
        away,
      );
      lost.state.store = store;
      try {
        expect((await retry()).statusCode).toBe(500);
        expect(await deadLetters.get(dead.id)).toBeDefined();
        expect((await replay()).statusCode).toBe(500);
        expect(await deadLetters.get(dead.id)).toBeDefined();
        expect(await store.heldBytes()).toBeGreaterThan(0);
      } finally {
        await app.close();
      }
    });

    it('a replay that cannot start puts the entry back, its record held', async () => {
      const full = (): Promise<Execution> => Promise.reject(new Error('the queue is full'));
      const { store, deadLetters, dead, app, replay } = await listed(full);
      try {
        expect((await replay()).statusCode).toBe(500);
        expect((await replay('k-3')).statusCode).toBe(500);
        expect(await deadLetters.get(dead.id)).toBeDefined();
        expect(await store.heldBytes()).toBeGreaterThan(0);
      } finally {
        await app.close();
      }
    });
  });
}

let clock = Date.now();
const memoryStores = (): Promise<Stores> => {
  clock = Date.now();
  const now = () => clock;
  const store = new MemoryExecutionStore({ now, ttlMs: 60_000 });
  return Promise.resolve({
    store,
    deadLetters: new MemoryDeadLetterStore({ now, ttlMs: 60_000, records: store }),
    lose: () => {
      // Past a lifetime and a minute after its dead-lettering: the store drops it.
      clock += 3 * 60_000;
      return Promise.resolve();
    },
  });
};
suite('memory', memoryStores);
replaySuite('memory', memoryStores);

describe.skipIf(!redisAvailable())('over one Redis', () => {
  let backend: RedisBackend;
  beforeAll(async () => {
    backend = await singleRedis();
  }, 60_000);
  afterAll(async () => {
    await backend?.stop();
  });
  const redisStores = async (): Promise<Stores> => {
    await backend.flushall();
    const store = new RedisExecutionStore({ redis: backend.client });
    return {
      store,
      deadLetters: new RedisDeadLetterStore({ redis: backend.client, records: store }),
      // As its expiry would.
      lose: async (id) => void (await backend.client.del(store.layout.of(id).execution(id))),
    };
  };
  suite('Redis', redisStores);
  replaySuite('Redis', redisStores);
});
