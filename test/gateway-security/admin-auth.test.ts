// The admin listener's authentication and authorisation (docs/security.md, threats
// A1-A6): the read API, test requests, analytics and live streams are absent from the
// webhook listener; on the admin listener a token is checked with TokenReview and each
// request with SubjectAccessReview against the test API server's RBAC, so a user who
// may read namespace A's triggers sees nothing of namespace B. The static token works.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { KubeConfig } from '@kubernetes/client-node';
import { kubePost } from '../../roles/admin-auth.ts';
import { AdminAccess } from '../../runtime/admin/access.ts';
import { KubernetesAuthenticator } from '../../runtime/admin/kubernetes.ts';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import {
  StaticTokenAuthenticator,
  TokenFileAuthenticator,
} from '../../runtime/admin/static-token.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const RBAC_GROUP = 'rbac.authorization.k8s.io';
const TOKENS = {
  alice: 'alice-token-reads-team-a',
  tess: 'tess-token-tests-team-a',
  bob: 'bob-token-no-bindings',
  admin: 'hookgate-test-token',
};

function problem(res: LightMyRequestResponse, status: number, type: string) {
  expect(res.statusCode).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.json<{ type: string }>().type).toBe(`https://hookgate.dev/problems/${type}`);
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function seedRbac(api: KubeApiServer): Promise<void> {
  const post = async (path: string, body: object) => {
    const res = await fetch(`${api.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(TOKENS.admin) },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(201);
  };
  for (const name of ['team-a', 'team-b'])
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  const role = (name: string, resources: string[], verbs: string[]) => ({
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'ClusterRole',
    metadata: { name },
    rules: [{ apiGroups: ['hookgate.dev'], resources, verbs }],
  });
  await post(`${RBAC}/clusterroles`, role('trigger-reader', ['webhooktriggers'], ['get', 'list']));
  await post(`${RBAC}/clusterroles`, role('trigger-tester', ['webhooktriggers/test'], ['create']));
  const bind = (name: string, user: string, clusterRole: string) =>
    post(`${RBAC}/namespaces/team-a/rolebindings`, {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'RoleBinding',
      metadata: { name, namespace: 'team-a' },
      subjects: [{ kind: 'User', name: user, apiGroup: RBAC_GROUP }],
      roleRef: { kind: 'ClusterRole', name: clusterRole, apiGroup: RBAC_GROUP },
    });
  await bind('alice-reads', 'alice', 'trigger-reader');
  await bind('tess-reads', 'tess', 'trigger-reader');
  await bind('tess-tests', 'tess', 'trigger-tester');
}

describe('admin listener with Kubernetes authentication', () => {
  let api: KubeApiServer;
  let rt: TestRuntime;
  let dir: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    api = await startKubeApiServer({
      users: {
        [TOKENS.alice]: { username: 'alice' },
        [TOKENS.tess]: { username: 'tess' },
        [TOKENS.bob]: { username: 'bob' },
      },
    });
    await seedRbac(api);
    dir = mkdtempSync(join(tmpdir(), 'hookgate-admin-'));
    const kc = new KubeConfig();
    kc.loadFromFile(api.writeKubeconfig(dir));
    rt = await startRuntime({
      adminAccess: new AdminAccess(new KubernetesAuthenticator({ post: kubePost(kc) })),
    });
    const docs = ['team-a', 'team-b'].flatMap((namespace) => [
      workflow('orders', {}, { namespace }),
      trigger('ingest', { pathSegment: 'ingest' }, { namespace }),
    ]);
    await rt.files.write('teams.yaml', ...docs);
    await rt.apply('teams.yaml', docs);
    await eventually(() => expect(rt.table.size).toBe(2));
    for (const ns of ['team-a', 'team-b']) {
      const res = await rt.app.inject({
        method: 'POST',
        url: `/webhook/${ns}_production_orders/ingest`,
        payload: { ns },
      });
      expect(res.statusCode).toBe(202);
      ids[ns] = res.json<{ executionId: string }>().executionId;
    }
  });
  afterAll(async () => {
    await rt?.stop();
    await api?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the webhook listener has no admin routes: 404 problems, not 401', async () => {
    for (const [method, url] of [
      ['GET', '/api/executions'],
      ['GET', `/api/executions/${ids['team-a']}`],
      ['GET', '/api/triggers'],
      ['POST', '/api/triggers/team-a/ingest/test'],
      ['GET', '/api/analytics/summary'],
      ['GET', '/dashboard'],
      ['GET', '/webhook-events/team-a_production_orders/ingest'],
    ] as const) {
      const res = await rt.app.inject({ method, url, headers: bearer(TOKENS.admin) });
      problem(res, 404, 'not-found');
    }
  });

  it('no token or an invalid one: 401 with WWW-Authenticate: Bearer', async () => {
    for (const headers of [{}, bearer('not-a-known-token'), { authorization: 'Basic YTpi' }]) {
      const res = await rt.admin.inject({ method: 'GET', url: '/api/executions', headers });
      problem(res, 401, 'admin-unauthenticated');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    }
    // An encoded path the router decodes onto an API route is checked all the same.
    const encoded = await rt.admin.inject({ method: 'GET', url: '/%61pi/executions' });
    problem(encoded, 401, 'admin-unauthenticated');
    const stream = await rt.admin.inject({
      method: 'GET',
      url: '/webhook-events/team-a_production_orders/ingest',
    });
    problem(stream, 401, 'admin-unauthenticated');
  });

  it('a valid token whose user has no RBAC: 404 for an id (as unknown), an empty list', async () => {
    const res = await rt.admin.inject({
      method: 'GET',
      url: `/api/executions/${ids['team-a']}`,
      headers: bearer(TOKENS.bob),
    });
    // An id of what the user may not read is an unknown id (id-routes-hidden.test.ts).
    problem(res, 404, 'execution-not-found');
    const list = await rt.admin.inject({
      method: 'GET',
      url: '/api/executions',
      headers: bearer(TOKENS.bob),
    });
    expect(list.json<{ items: unknown[] }>().items).toEqual([]);
  });

  it("a reader of namespace A reads A's executions and triggers, never B's", async () => {
    const headers = bearer(TOKENS.alice);
    const own = await rt.admin.inject({ url: `/api/executions/${ids['team-a']}`, headers });
    expect(own.statusCode).toBe(200);
    expect(own.json<{ triggerKey: string }>().triggerKey).toBe('team-a/ingest');
    const other = await rt.admin.inject({ url: `/api/executions/${ids['team-b']}`, headers });
    problem(other, 404, 'execution-not-found');
    const events = await rt.admin.inject({
      url: `/api/executions/${ids['team-b']}/events`,
      headers,
    });
    problem(events, 404, 'execution-not-found');
    const listed = await rt.admin.inject({ url: '/api/executions', headers });
    const keys = listed.json<{ items: { triggerKey: string }[] }>().items.map((e) => e.triggerKey);
    expect(keys).toContain('team-a/ingest');
    expect(keys).not.toContain('team-b/ingest');
    const triggers = await rt.admin.inject({ url: '/api/triggers', headers });
    expect(
      triggers.json<{ items: { namespace: string }[] }>().items.map((t) => t.namespace),
    ).toEqual(['team-a']);
    problem(
      await rt.admin.inject({ url: '/api/triggers/team-b/ingest', headers }),
      403,
      'admin-forbidden',
    );
    problem(
      await rt.admin.inject({
        url: '/webhook-events/team-b_production_orders/ingest',
        headers,
      }),
      403,
      'admin-forbidden',
    );
  });

  it('Send Test Request needs create on webhooktriggers/test in the namespace', async () => {
    const send = (ns: string, token: string) =>
      rt.admin.inject({
        method: 'POST',
        url: `/api/triggers/${ns}/ingest/test`,
        headers: bearer(token),
        payload: { body: { test: true } },
      });
    problem(await send('team-a', TOKENS.alice), 403, 'admin-forbidden');
    problem(await send('team-b', TOKENS.tess), 403, 'admin-forbidden');
    const ok = await send('team-a', TOKENS.tess);
    expect(ok.statusCode).toBe(200);
    expect(ok.json<{ response: { statusCode: number } }>().response.statusCode).toBe(202);
  });

  it('a schema proposal is read like the trigger; resetting samples needs the test right', async () => {
    const read = (ns: string, token?: string) =>
      rt.admin.inject({
        url: `/api/triggers/${ns}/ingest/schema-proposal`,
        ...(token ? { headers: bearer(token) } : {}),
      });
    problem(await read('team-a'), 401, 'admin-unauthenticated');
    problem(await read('team-a', TOKENS.bob), 403, 'admin-forbidden');
    problem(await read('team-b', TOKENS.alice), 403, 'admin-forbidden');
    // Allowed, and then refused for what it is: these triggers do not learn.
    problem(await read('team-a', TOKENS.alice), 409, 'schema-not-learning');
    const reset = (ns: string, token: string) =>
      rt.admin.inject({
        method: 'DELETE',
        url: `/api/triggers/${ns}/ingest/schema-proposal/samples`,
        headers: bearer(token),
      });
    problem(await reset('team-a', TOKENS.alice), 403, 'admin-forbidden');
    problem(await reset('team-b', TOKENS.tess), 403, 'admin-forbidden');
    expect((await reset('team-a', TOKENS.tess)).statusCode).toBe(204);
    // Not on the webhook listener.
    const publicSide = await rt.app.inject({ url: '/api/triggers/team-a/ingest/schema-proposal' });
    expect(publicSide.statusCode).toBe(404);
  });

  it('replay and dead-letter retries need the same right as a test request', async () => {
    const replay = (ns: string, token: string) =>
      rt.admin.inject({
        method: 'POST',
        url: `/api/executions/${ids[ns]}/replay`,
        headers: bearer(token),
      });
    // alice reads team-a but may not test there; tess may neither test nor read in
    // team-b: its execution is unknown to her.
    problem(await replay('team-a', TOKENS.alice), 403, 'admin-forbidden');
    problem(await replay('team-b', TOKENS.tess), 404, 'execution-not-found');
    const ok = await replay('team-a', TOKENS.tess);
    expect(ok.statusCode, ok.body).toBe(202);
    expect(ok.json<{ replayOf: string }>().replayOf).toBe(ids['team-a']);
    // Bulk retries are checked for the namespace (or cluster-wide) before anything runs.
    const bulk = (token: string, payload: object) =>
      rt.admin.inject({
        method: 'POST',
        url: '/api/dead-letters/retry',
        headers: bearer(token),
        payload,
      });
    problem(await bulk(TOKENS.alice, { namespace: 'team-a' }), 403, 'admin-forbidden');
    problem(await bulk(TOKENS.tess, {}), 403, 'admin-forbidden');
    expect((await bulk(TOKENS.tess, { namespace: 'team-a' })).json()).toMatchObject({
      matched: 0,
      retried: 0,
    });
    // The list needs a token, and shows only namespaces the user may read.
    problem(await rt.admin.inject({ url: '/api/dead-letters' }), 401, 'admin-unauthenticated');
    const listed = await rt.admin.inject({ url: '/api/dead-letters', headers: bearer(TOKENS.bob) });
    expect(listed.json()).toEqual({ items: [] });
  });

  it('analytics span every namespace: a cluster-wide list is needed', async () => {
    const url = '/api/analytics/summary?window=5m';
    problem(await rt.admin.inject({ url, headers: bearer(TOKENS.alice) }), 403, 'admin-forbidden');
    problem(
      await rt.admin.inject({ url: '/%61pi/analytics/summary', headers: bearer(TOKENS.alice) }),
      403,
      'admin-forbidden',
    );
    expect((await rt.admin.inject({ url, headers: bearer(TOKENS.admin) })).statusCode).toBe(200);
  });

  it('a cookie is no credential: reads, live streams and test requests with one are 401', async () => {
    // The cookie the dashboard set until 2026-11-28 (every port of the host got it).
    const cookie = `hookgate_admin_token=${TOKENS.tess}`;
    for (const url of [
      `/api/executions/${ids['team-a']}`,
      `/api/executions/${ids['team-a']}/events`,
      '/webhook-events/team-a_production_orders/ingest',
    ]) {
      problem(await rt.admin.inject({ url, headers: { cookie } }), 401, 'admin-unauthenticated');
    }
    const send = await rt.admin.inject({
      method: 'POST',
      url: '/api/triggers/team-a/ingest/test',
      headers: { cookie },
      payload: {},
    });
    problem(send, 401, 'admin-unauthenticated');
    // The header still works; the page itself holds no data and needs no token.
    const read = await rt.admin.inject({
      url: `/api/executions/${ids['team-a']}`,
      headers: bearer(TOKENS.tess),
    });
    expect(read.statusCode).toBe(200);
    expect((await rt.admin.inject({ url: '/dashboard' })).statusCode).toBe(200);
  });
});

describe('admin listener with a static token', () => {
  let rt: TestRuntime;
  const token = 'static-admin-token-0123456789';
  beforeAll(async () => {
    rt = await startRuntime({
      adminAccess: new AdminAccess(new StaticTokenAuthenticator(`${token}\n`)),
    });
  });
  afterAll(() => rt?.stop());

  it('the token reads everything; any other gets 401', async () => {
    const ok = await rt.admin.inject({ url: '/api/triggers', headers: bearer(token) });
    expect(ok.statusCode).toBe(200);
    for (const wrong of [`${token}x`, token.slice(0, -1), '']) {
      const res = await rt.admin.inject({ url: '/api/triggers', headers: bearer(wrong) });
      problem(res, 401, 'admin-unauthenticated');
    }
  });

  it('refuses a short token', () => {
    expect(() => new StaticTokenAuthenticator('short')).toThrow(/16 characters/);
  });
});

describe('the static token from a file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hookgate-admin-token-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  /** Swaps the file in place, as the kubelet updates a mounted Secret (rename). */
  const swap = async (path: string, content: string) => {
    await writeFile(`${path}.new`, content);
    await rename(`${path}.new`, path);
  };

  it('is read again when the file changes: a rotated token replaces the old one, no restart', async () => {
    const path = join(dir, 'rotated');
    await writeFile(path, 'first-admin-token-0123456789\n');
    const auth = new TokenFileAuthenticator(path, { recheckMs: 0 });
    expect(await auth.authenticate('first-admin-token-0123456789')).toBeDefined();
    await swap(path, 'second-admin-token-0123456789\n');
    expect(await auth.authenticate('first-admin-token-0123456789')).toBeUndefined();
    expect(await auth.authenticate('second-admin-token-0123456789')).toBeDefined();
  });

  it('refuses every token while the file holds an invalid one or is gone (fails closed), and says so', async () => {
    const path = join(dir, 'blanked');
    await writeFile(path, 'kept-admin-token-0123456789');
    const errors: string[] = [];
    const auth = new TokenFileAuthenticator(path, {
      recheckMs: 0,
      onError: (m) => errors.push(m),
    });
    await swap(path, '');
    expect(await auth.authenticate('kept-admin-token-0123456789')).toBeUndefined();
    expect(errors).toHaveLength(1);
    await rm(path);
    expect(await auth.authenticate('kept-admin-token-0123456789')).toBeUndefined();
    await swap(path, 'fixed-admin-token-0123456789');
    expect(await auth.authenticate('fixed-admin-token-0123456789')).toBeDefined();
  });

  it('looks at the file at most once per recheck period', async () => {
    const path = join(dir, 'cached');
    await writeFile(path, 'cached-admin-token-0123456789');
    let now = 0;
    const auth = new TokenFileAuthenticator(path, { recheckMs: 1_000, now: () => now });
    await swap(path, 'next-admin-token-0123456789');
    now = 999;
    expect(await auth.authenticate('cached-admin-token-0123456789')).toBeDefined();
    now = 1_000;
    expect(await auth.authenticate('cached-admin-token-0123456789')).toBeUndefined();
    expect(await auth.authenticate('next-admin-token-0123456789')).toBeDefined();
  });
});
