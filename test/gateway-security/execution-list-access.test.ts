// GET /api/executions for a caller who may read one namespace among many (docs/security.md,
// threat A4): the caller's access is applied before the page is cut, so pages are full
// while more of the caller's executions exist, following `next` to the end lists exactly
// theirs, and no cursor names an execution of a namespace they may not read. Over the
// memory store and the Redis one (a real redis-server).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminAccess } from '../../runtime/admin/access.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import {
  decodeCursor,
  MemoryExecutionStore,
  type ExecutionStore,
} from '../../runtime/engine/execution-store.ts';
import { RedisExecutionStore } from '../../runtime/engine/execution-store-redis.ts';
import type { Execution } from '../../runtime/engine/ports.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { executionRoutes } from '../../runtime/read-api/execution-routes.ts';
import { singleRedis, type RedisBackend } from '../support/redis-backends.ts';
import { OneNamespace } from '../support/one-namespace-access.ts';
import { redisAvailable } from '../support/redis.ts';
import { trigger } from '../engine/helpers.ts';

const NOW = Date.parse('2026-11-28T12:00:00Z');

function execution(id: string, ms: number, namespace: string): Execution {
  return {
    id,
    workflowId: `${namespace}_production_orders`,
    triggerKey: `${namespace}/ingest`,
    status: 'succeeded',
    createdAt: new Date(ms).toISOString(),
    finishedAt: new Date(ms + 5).toISOString(),
    input: trigger({ id }),
    log: [],
  };
}

type Page = { items: Execution[]; next?: string; links?: { next: string } };

function suite(name: string, makeStore: () => Promise<ExecutionStore>) {
  describe(name, () => {
    const authenticator = new OneNamespace();
    let app: ReturnType<typeof createHttpApp>['app'];
    let engine: InProcessEngine;
    /** team-a's ids, newest first; team-b's and team-c's. */
    const own: string[] = [];
    const others = new Set<string>();

    beforeAll(async () => {
      const store = await makeStore();
      // 25 of team-a, each behind 12 of team-b and team-c: a page cut before the filter
      // held one of team-a's at most.
      for (let i = 0; i < 25 * 13; i++) {
        const namespace = i % 13 === 0 ? 'team-a' : i % 2 === 0 ? 'team-b' : 'team-c';
        const id = `${namespace}-${i}`;
        await store.save(execution(id, NOW - 3_600_000 + i * 1000, namespace));
        if (namespace === 'team-a') own.unshift(id);
        else others.add(id);
      }
      engine = new InProcessEngine({ store });
      const access = new AdminAccess(authenticator);
      ({ app } = createHttpApp({}));
      access.install(app);
      executionRoutes(app, { engine, access });
      await app.ready();
    });
    afterAll(async () => {
      await app?.close();
      await engine?.close(100);
    });

    const get = async (url: string): Promise<Page> => {
      const res = await app.inject({ url, headers: { authorization: 'Bearer alice' } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<Page>();
    };

    it('pages are full, `next` leads to exactly their executions, no cursor names another', async () => {
      const pages: Page[] = [];
      let url: string | undefined = '/api/executions?limit=10&status=succeeded';
      while (url && pages.length < 20) {
        authenticator.reviews = [];
        const page = await get(url);
        pages.push(page);
        // One review per namespace met (and the cluster-wide `list`), not one per item.
        expect(authenticator.reviews.length).toBeLessThanOrEqual(4);
        if (page.next) {
          const at = decodeCursor(page.next);
          const last = page.items.at(-1);
          expect(at?.ms).toBe(Date.parse(last?.createdAt ?? ''));
          expect(others.has(at?.key ?? '')).toBe(false);
          expect(page.links?.next).toContain('status=succeeded');
        }
        url = page.links?.next;
      }
      expect(pages.map((p) => p.items.length)).toEqual([10, 10, 5]);
      expect(pages.flatMap((p) => p.items.map((e) => e.id))).toEqual(own);
      expect(pages.flatMap((p) => p.items.map((e) => e.triggerKey))).not.toContain('team-b/ingest');
    });

    it('the other filters and their 400s stay as they were', async () => {
      const byTrigger = await get('/api/executions?trigger=team-b/ingest');
      expect(byTrigger).toEqual({ items: [] });
      const since = new Date(NOW - 3_600_000 + 290 * 1000).toISOString();
      const recent = await get(`/api/executions?since=${encodeURIComponent(since)}`);
      expect(recent.items.map((e) => e.id)).toEqual(own.slice(0, 2));
      const bad = await app.inject({
        url: '/api/executions?cursor=not-ours!',
        headers: { authorization: 'Bearer alice' },
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.json()).toMatchObject({ errors: [{ pointer: '#/query/cursor' }] });
    });
  });
}

suite('over the memory store', () => Promise.resolve(new MemoryExecutionStore({ now: () => NOW })));

describe.skipIf(!redisAvailable())('over the Redis store', () => {
  let backend: RedisBackend;
  beforeAll(async () => {
    backend = await singleRedis();
  });
  afterAll(async () => {
    await backend?.stop();
  });
  suite('one redis-server', () =>
    Promise.resolve(new RedisExecutionStore({ redis: backend.client, now: () => NOW })),
  );
});
