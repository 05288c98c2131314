// GET /api/dead-letters for a caller who may read one namespace among many: the caller's
// access is applied while the list is walked, before `limit` counts the entries, so a
// page is full while more of the caller's entries exist (it was applied after the list
// cut its page: short or empty pages). Over the memory list and the Redis one (a real
// redis-server).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import { AdminAccess } from '../../runtime/admin/access.ts';
import {
  MemoryDeadLetterStore,
  type DeadLetter,
  type DeadLetterStore,
} from '../../runtime/engine/dead-letters.ts';
import { RedisDeadLetterStore } from '../../runtime/engine/dead-letters-redis.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { OneNamespace } from '../support/one-namespace-access.ts';
import { redisAvailable } from '../support/redis.ts';

const NOW = Date.parse('2026-11-28T12:00:00Z');

function entry(id: string, ms: number, namespace: string): DeadLetter {
  return {
    executionId: id,
    triggerKey: `${namespace}/ingest`,
    namespace,
    workflowId: `${namespace}_production_orders`,
    createdAt: new Date(ms - 60_000).toISOString(),
    deadLetteredAt: new Date(ms).toISOString(),
    attempts: 3,
    error: { message: 'down' },
  };
}

function suite(name: string, makeList: () => Promise<DeadLetterStore>) {
  describe(name, () => {
    const authenticator = new OneNamespace();
    let app: ReturnType<typeof createHttpApp>['app'];
    /** team-a's ids, newest first. */
    const own: string[] = [];

    beforeAll(async () => {
      const list = await makeList();
      // 12 of team-a, each behind 15 of team-b: a page of 10 cut before the filter held
      // one of team-a's at most.
      for (let i = 0; i < 12 * 16; i++) {
        const namespace = i % 16 === 0 ? 'team-a' : 'team-b';
        const id = `${namespace}-${i}`;
        expect(await list.add(entry(id, NOW - 3_600_000 + i * 1000, namespace))).toBe(true);
        if (namespace === 'team-a') own.unshift(id);
      }
      const access = new AdminAccess(authenticator);
      ({ app } = createHttpApp({}));
      access.install(app);
      recoveryRoutes(app, {
        engine: new InProcessEngine({ store: new MemoryExecutionStore() }),
        routes: new MemoryRecordStore<RouteRecord>(),
        workflow: () => undefined,
        deadLetters: list,
        access,
      });
      await app.ready();
    });
    afterAll(() => app?.close());

    const get = async (url: string) => {
      const res = await app.inject({ url, headers: { authorization: 'Bearer alice' } });
      expect(res.statusCode).toBe(200);
      return res.json<{ items: DeadLetter[] }>().items.map((e) => e.executionId);
    };

    it("a page holds `limit` of the caller's entries while more exist, newest first", async () => {
      expect(await get('/api/dead-letters?limit=10')).toEqual(own.slice(0, 10));
      expect(await get('/api/dead-letters?limit=100')).toEqual(own);
    });

    it('asks about each namespace once per request', async () => {
      authenticator.reviews = [];
      await get('/api/dead-letters?limit=10');
      expect(authenticator.reviews.length).toBeLessThanOrEqual(3);
    });

    it("the filters still apply, and another namespace's filter lists nothing", async () => {
      expect(await get('/api/dead-letters?namespace=team-a&limit=3')).toEqual(own.slice(0, 3));
      expect(await get('/api/dead-letters?namespace=team-b')).toEqual([]);
    });
  });
}

suite('dead-letter listing, memory list', () =>
  Promise.resolve(new MemoryDeadLetterStore({ now: () => NOW })),
);

describe.skipIf(!redisAvailable())('with Redis', () => {
  let backend: RedisBackend;
  beforeAll(async () => {
    backend = await singleRedis();
  });
  afterAll(() => backend?.stop());
  suite('dead-letter listing, Redis list', () =>
    Promise.resolve(new RedisDeadLetterStore({ redis: backend.connect(), now: () => NOW })),
  );
});
