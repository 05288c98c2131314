// The admin routes that take an id in their path (an execution's, a dead letter's) for a
// caller who may read one namespace (test/support/one-namespace-access.ts: alice, `get`
// in team-a): an id of another namespace is answered exactly as an unknown id (status,
// problem type, body shape), so that nobody learns what exists where they cannot read.
// It was 403 (or the execution's state), after a 404 for unknown ids only. While the
// authoriser cannot be asked, both get its 503 (an unknown id got 404 until 2026-11-28
// (night), an id of another namespace 503).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord } from '../../api/records/records.ts';
import {
  AdminAccess,
  type AdminUser,
  type ResourceAttributes,
} from '../../runtime/admin/access.ts';
import { deadLetterOf, MemoryDeadLetterStore } from '../../runtime/engine/dead-letters.ts';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import { MemoryExecutionStore } from '../../runtime/engine/execution-store.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { executionRoutes } from '../../runtime/read-api/execution-routes.ts';
import { recoveryRoutes } from '../../runtime/read-api/recovery-routes.ts';
import { deadLetteredExecution } from '../engine/helpers.ts';
import { OneNamespace } from '../support/one-namespace-access.ts';

const OWN = 'own-1';
const OTHERS = 'others-1';
const UNKNOWN = 'no-such-1';

/** Every route with an id in its path, as method and URL of an id. */
const ROUTES: [string, 'GET' | 'POST', (id: string) => string][] = [
  ['the execution', 'GET', (id) => `/api/executions/${id}`],
  ['its events', 'GET', (id) => `/api/executions/${id}/events`],
  ['its replay', 'POST', (id) => `/api/executions/${id}/replay`],
  ['its replay with an Idempotency-Key', 'POST', (id) => `/api/executions/${id}/replay#key`],
  ['the dead letter', 'GET', (id) => `/api/dead-letters/${id}`],
  ['its retry', 'POST', (id) => `/api/dead-letters/${id}/retry`],
];

/** alice's reviews, or an API server that cannot be reached for them (tokens still known). */
class Reachable extends OneNamespace {
  down = false;
  override authorize(user: AdminUser, attributes: ResourceAttributes): Promise<boolean> {
    if (this.down) return Promise.reject(new Error('connect ECONNREFUSED'));
    return super.authorize(user, attributes);
  }
}

describe('routes with an id, for a caller of one namespace', () => {
  let app: ReturnType<typeof createHttpApp>['app'];
  const authenticator = new Reachable();

  beforeAll(async () => {
    const store = new MemoryExecutionStore();
    const deadLetters = new MemoryDeadLetterStore({ records: store });
    for (const [id, namespace] of [
      [OWN, 'team-a'],
      [OTHERS, 'team-b'],
    ] as const) {
      const dead = deadLetteredExecution(id, {
        triggerKey: `${namespace}/orders`,
        workflowId: `${namespace}_production_orders`,
      });
      await store.save({ ...dead, status: 'running' });
      await store.save(dead);
      expect(await deadLetters.add(deadLetterOf(dead))).toBe(true);
    }
    const access = new AdminAccess(authenticator);
    ({ app } = createHttpApp({}));
    access.install(app);
    const engine = new InProcessEngine({ store });
    executionRoutes(app, { engine, access });
    recoveryRoutes(app, {
      engine,
      routes: new MemoryRecordStore<RouteRecord>(),
      workflow: () => undefined,
      deadLetters,
      access,
    });
    await app.ready();
  });
  afterAll(() => app?.close());

  const call = (method: 'GET' | 'POST', url: string) => {
    const [path, key] = url.split('#');
    return app.inject({
      method,
      url: path as string,
      headers: { authorization: 'Bearer alice', ...(key ? { 'idempotency-key': key } : {}) },
    });
  };

  it.each(ROUTES)(
    "%s of another namespace's id: the answer to an unknown id",
    async (_what, method, url) => {
      const unknown = await call(method, url(UNKNOWN));
      expect(unknown.statusCode, unknown.body).toBe(404);
      const hidden = await call(method, url(OTHERS));
      expect(hidden.statusCode, hidden.body).toBe(unknown.statusCode);
      expect(hidden.headers['content-type']).toBe(unknown.headers['content-type']);
      // The same document, the id aside (detail and instance name the id asked for).
      expect(hidden.body.replaceAll(OTHERS, UNKNOWN)).toBe(unknown.body);
    },
  );

  // While the authoriser cannot be asked, an id of another namespace got 503 (its
  // namespace could not be checked) and an unknown one 404: the outage told which exist.
  it.each(ROUTES)(
    "%s while the authoriser is down: another namespace's id and an unknown one get the same 503",
    async (_what, method, url) => {
      authenticator.down = true;
      try {
        const unknown = await call(method, url(UNKNOWN));
        const hidden = await call(method, url(OTHERS));
        expect(unknown.statusCode, unknown.body).toBe(503);
        expect(hidden.statusCode, hidden.body).toBe(503);
        expect(hidden.headers['retry-after']).toBe(unknown.headers['retry-after']);
        expect(hidden.body.replaceAll(OTHERS, UNKNOWN)).toBe(unknown.body);
        expect(unknown.json<{ type: string }>().type).toMatch(/auth-unavailable$/);
      } finally {
        authenticator.down = false;
      }
    },
  );

  it('her own namespace: read, and refused (403) what she may not do', async () => {
    expect((await call('GET', `/api/executions/${OWN}`)).statusCode).toBe(200);
    expect((await call('GET', `/api/dead-letters/${OWN}`)).statusCode).toBe(200);
    for (const url of [`/api/executions/${OWN}/replay`, `/api/dead-letters/${OWN}/retry`]) {
      const refused = await call('POST', url);
      expect(refused.statusCode, refused.body).toBe(403);
      expect(refused.json<{ type: string }>().type).toMatch(/admin-forbidden$/);
    }
  });
});
