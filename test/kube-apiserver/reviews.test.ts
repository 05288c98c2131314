// TokenReview and SubjectAccessReview on the test API server, as a real one answers
// them: tokens from the server's users table, RBAC from the Roles and bindings stored
// through the ordinary API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';

const RBAC = '/apis/rbac.authorization.k8s.io/v1';

describe('TokenReview and SubjectAccessReview', () => {
  let api: KubeApiServer;
  const post = async (path: string, body: object) => {
    const res = await fetch(`${api.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer hookgate-test-token' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const review = async (user: string, attrs: Record<string, string>, groups: string[] = []) => {
    const res = await post('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user, groups, resourceAttributes: { group: 'hookgate.dev', ...attrs } },
    });
    expect(res.status).toBe(201);
    return (res.body.status as { allowed: boolean }).allowed;
  };

  beforeAll(async () => {
    api = await startKubeApiServer({
      users: { 'alice-token': { username: 'alice', groups: ['team-a'] } },
    });
    for (const ns of ['team-a', 'team-b']) {
      await post('/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: ns },
      });
    }
    const created = await post(`${RBAC}/namespaces/team-a/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'trigger-reader', namespace: 'team-a' },
      rules: [
        { apiGroups: ['hookgate.dev'], resources: ['webhooktriggers'], verbs: ['get', 'list'] },
      ],
    });
    expect(created.status).toBe(201);
    await post(`${RBAC}/namespaces/team-a/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'alice-reads', namespace: 'team-a' },
      subjects: [{ kind: 'User', name: 'alice', apiGroup: 'rbac.authorization.k8s.io' }],
      roleRef: { kind: 'Role', name: 'trigger-reader', apiGroup: 'rbac.authorization.k8s.io' },
    });
    await post(`${RBAC}/clusterroles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'trigger-tester' },
      rules: [
        { apiGroups: ['hookgate.dev'], resources: ['webhooktriggers/test'], verbs: ['create'] },
      ],
    });
    await post(`${RBAC}/namespaces/team-b/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'team-a-tests-b', namespace: 'team-b' },
      subjects: [{ kind: 'Group', name: 'team-a', apiGroup: 'rbac.authorization.k8s.io' }],
      roleRef: {
        kind: 'ClusterRole',
        name: 'trigger-tester',
        apiGroup: 'rbac.authorization.k8s.io',
      },
    });
  });
  afterAll(() => api.close());

  it('a known token is authenticated with its user and system:authenticated; others are not', async () => {
    const known = await post('/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: 'alice-token' },
    });
    expect(known.status).toBe(201);
    expect(known.body.status).toEqual({
      authenticated: true,
      user: { username: 'alice', groups: ['team-a', 'system:authenticated'] },
    });
    const unknown = await post('/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: 'nope' },
    });
    expect((unknown.body.status as { authenticated: boolean }).authenticated).toBe(false);
  });

  it('a RoleBinding grants its Role in its own namespace only', async () => {
    const get = { verb: 'get', resource: 'webhooktriggers', name: 'ingest' };
    expect(await review('alice', { ...get, namespace: 'team-a' })).toBe(true);
    expect(await review('alice', { ...get, namespace: 'team-b' })).toBe(false);
    expect(await review('alice', { verb: 'list', resource: 'webhooktriggers' })).toBe(false);
    expect(await review('alice', { ...get, verb: 'delete', namespace: 'team-a' })).toBe(false);
    expect(await review('bob', { ...get, namespace: 'team-a' })).toBe(false);
  });

  it('a subresource is granted only by name; a Group subject and a ClusterRole in a RoleBinding work', async () => {
    const test = { verb: 'create', resource: 'webhooktriggers', subresource: 'test' };
    expect(await review('alice', { ...test, namespace: 'team-b' }, ['team-a'])).toBe(true);
    expect(await review('alice', { ...test, namespace: 'team-a' }, ['team-a'])).toBe(false);
    expect(
      await review('alice', { verb: 'create', resource: 'webhooktriggers', namespace: 'team-b' }, [
        'team-a',
      ]),
    ).toBe(false);
  });

  it('system:masters may do everything', async () => {
    expect(
      await review('root', { verb: 'delete', resource: 'webhooktriggers' }, ['system:masters']),
    ).toBe(true);
  });
});
