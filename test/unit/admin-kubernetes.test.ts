// The Kubernetes admin authenticator: what it sends (TokenReview, SubjectAccessReview
// on hookgate.dev), and its brief, bounded cache of both answers.
import { describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { AdminAccess } from '../../runtime/admin/access.ts';
import { KubernetesAuthenticator } from '../../runtime/admin/kubernetes.ts';
import { installProblemHandlers } from '../../runtime/gateway/problem-handler.ts';

function fakeApi(allowed: (attrs: Record<string, string>) => boolean) {
  const calls: { path: string; body: Record<string, unknown> }[] = [];
  const post = (path: string, body: object) => {
    const b = body as Record<string, unknown>;
    calls.push({ path, body: b });
    if (path.endsWith('/tokenreviews')) {
      const token = (b.spec as { token: string }).token;
      return Promise.resolve({
        status:
          token === 'good'
            ? { authenticated: true, user: { username: 'alice', groups: ['devs'] } }
            : { authenticated: false },
      });
    }
    const attrs = (b.spec as { resourceAttributes: Record<string, string> }).resourceAttributes;
    return Promise.resolve({ status: { allowed: allowed(attrs) } });
  };
  return { calls, post };
}

describe('KubernetesAuthenticator', () => {
  it('reviews a token once per TTL and never keeps the token itself', async () => {
    let now = 0;
    const api = fakeApi(() => true);
    const auth = new KubernetesAuthenticator({ post: api.post, ttlMs: 10_000, now: () => now });
    expect(await auth.authenticate('good')).toEqual({ username: 'alice', groups: ['devs'] });
    expect(await auth.authenticate('good')).toEqual({ username: 'alice', groups: ['devs'] });
    expect(await auth.authenticate('bad')).toBeUndefined();
    expect(await auth.authenticate('bad')).toBeUndefined();
    expect(api.calls.length).toBe(2);
    now = 10_001;
    await auth.authenticate('good');
    expect(api.calls.length).toBe(3);
    expect(api.calls[0]?.path).toBe('/apis/authentication.k8s.io/v1/tokenreviews');
  });

  it('asks a SubjectAccessReview on hookgate.dev with the user, and caches the decision', async () => {
    let now = 0;
    const api = fakeApi((a) => a.namespace === 'team-a');
    const auth = new KubernetesAuthenticator({ post: api.post, now: () => now });
    const user = { username: 'alice', groups: ['devs'] };
    const get = { verb: 'get', resource: 'webhooktriggers', name: 'ingest' } as const;
    expect(await auth.authorize(user, { ...get, namespace: 'team-a' })).toBe(true);
    expect(await auth.authorize(user, { ...get, namespace: 'team-b' })).toBe(false);
    expect(await auth.authorize(user, { ...get, namespace: 'team-a' })).toBe(true);
    expect(api.calls.length).toBe(2);
    expect(api.calls[0]).toEqual({
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: 'alice',
          groups: ['devs'],
          resourceAttributes: {
            group: 'hookgate.dev',
            verb: 'get',
            resource: 'webhooktriggers',
            namespace: 'team-a',
            name: 'ingest',
          },
        },
      },
    });
    now = 20_000;
    await auth.authorize(user, { ...get, namespace: 'team-a' });
    expect(api.calls.length).toBe(3);
  });

  it('keeps at most maxEntries answers, evicting the oldest', async () => {
    const api = fakeApi(() => true);
    const auth = new KubernetesAuthenticator({ post: api.post, maxEntries: 2 });
    const user = { username: 'alice', groups: [] };
    for (const namespace of ['a', 'b', 'c'])
      await auth.authorize(user, { verb: 'get', resource: 'webhooktriggers', namespace });
    await auth.authorize(user, { verb: 'get', resource: 'webhooktriggers', namespace: 'c' });
    expect(api.calls.length).toBe(3);
    await auth.authorize(user, { verb: 'get', resource: 'webhooktriggers', namespace: 'a' });
    expect(api.calls.length).toBe(4);
  });

  it('an API server that cannot be reached answers 503 auth-unavailable, never a pass', async () => {
    const auth = new KubernetesAuthenticator({
      post: () => Promise.reject(new Error('connect ECONNREFUSED')),
    });
    const app = Fastify();
    installProblemHandlers(app);
    new AdminAccess(auth).install(app);
    app.get('/api/executions', () => ({ items: [] }));
    const res = await app.inject({
      url: '/api/executions',
      headers: { authorization: 'Bearer x' },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json<{ type: string }>().type).toBe(
      'https://hookgate.dev/problems/auth-unavailable',
    );
    expect(res.headers['retry-after']).toBe('5');
  });
});
