// The test API server with `authorization: true`: every request authenticated (static
// tokens, service account tokens from TokenRequest, anonymous) and authorised by RBAC
// over the stored Roles and bindings, with a real API server's 401 and 403 bodies,
// the bootstrap discovery roles, and RBAC's escalation prevention.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';

const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const ADMIN = 'hookgate-test-token';
const SA_USER = 'system:serviceaccount:team-a:robot';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

describe('authorization mode', () => {
  let api: KubeApiServer;
  let robot = '';

  const call = async (
    method: string,
    path: string,
    token: string | undefined,
    body?: object,
    contentType = 'application/json',
  ): Promise<Answer> => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body ? { 'content-type': contentType } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
    } catch {
      return { status: res.status, body: { text } };
    }
  };
  const admin = async (method: string, path: string, body?: object) => {
    const r = await call(method, path, ADMIN, body);
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    return r;
  };
  const role = (ns: string, name: string, rules: object[]) =>
    admin('POST', `${RBAC}/namespaces/${ns}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name },
      rules,
    });
  const bind = (ns: string, name: string, roleRef: object, subjects: object[]) =>
    admin('POST', `${RBAC}/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', ...roleRef },
      subjects,
    });
  const robotSubject = { kind: 'ServiceAccount', name: 'robot', namespace: 'team-a' };

  beforeAll(async () => {
    api = await startKubeApiServer({
      authorization: true,
      users: { 'alice-token': { username: 'alice', groups: ['devs'] } },
    });
    for (const ns of ['team-a', 'team-b'])
      await admin('POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await admin('POST', '/api/v1/namespaces/team-a/serviceaccounts', {
      metadata: { name: 'robot' },
    });
    const issued = await admin('POST', '/api/v1/namespaces/team-a/serviceaccounts/robot/token', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    });
    expect(issued.status).toBe(201);
    robot = (issued.body.status as { token: string }).token;
    expect(robot.split('.')).toHaveLength(3);
  });
  afterAll(() => api.close());

  it('is off by default: any token, or none, may do anything', async () => {
    const open = await startKubeApiServer();
    try {
      const res = await fetch(`${open.url}/api/v1/namespaces/default/secrets`);
      expect(res.status).toBe(200);
      const clusterRoles = (await (await fetch(`${open.url}${RBAC}/clusterroles`)).json()) as {
        items: unknown[];
      };
      expect(clusterRoles.items).toEqual([]);
    } finally {
      await open.close();
    }
  });

  it('a token nobody issued gets 401 Unauthorized, as the authentication filter answers', async () => {
    const r = await call('GET', '/api', 'made-up');
    expect(r).toEqual({
      status: 401,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Unauthorized',
        reason: 'Unauthorized',
        code: 401,
      },
    });
  });

  it('anonymous requests see only version and health (system:public-info-viewer)', async () => {
    expect((await call('GET', '/version', undefined)).status).toBe(200);
    expect((await call('GET', '/healthz', undefined)).status).toBe(200);
    const r = await call('GET', '/api', undefined);
    expect(r.status).toBe(403);
    expect(r.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'forbidden: User "system:anonymous" cannot get path "/api"',
      reason: 'Forbidden',
      details: {},
      code: 403,
    });
  });

  it('any authenticated user may read discovery and OpenAPI (system:discovery)', async () => {
    for (const path of [
      '/api',
      '/api/v1',
      '/apis',
      '/apis/hookgate.dev',
      '/openapi/v3',
      '/version',
    ])
      expect((await call('GET', path, robot)).status, path).not.toBe(403);
    // The bootstrap roles are stored objects, labelled as a real server labels them.
    const discovery = await admin('GET', `${RBAC}/clusterroles/system:discovery`);
    expect(discovery.body.metadata).toMatchObject({
      labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
    });
  });

  it('a service account token is its account: 403 with the exact message, in a namespace and at cluster scope', async () => {
    const list = await call('GET', '/api/v1/namespaces/team-a/secrets', robot);
    expect(list).toEqual({
      status: 403,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `secrets is forbidden: User "${SA_USER}" cannot list resource "secrets" in API group "" in the namespace "team-a"`,
        reason: 'Forbidden',
        details: { kind: 'secrets' },
        code: 403,
      },
    });
    const get = await call(
      'GET',
      '/apis/hookgate.dev/v1alpha1/namespaces/team-a/webhooktriggers/orders',
      robot,
    );
    expect(get.body.message).toBe(
      `webhooktriggers.hookgate.dev "orders" is forbidden: User "${SA_USER}" cannot get resource "webhooktriggers" in API group "hookgate.dev" in the namespace "team-a"`,
    );
    expect(get.body.details).toEqual({
      name: 'orders',
      group: 'hookgate.dev',
      kind: 'webhooktriggers',
    });
    const all = await call('GET', '/api/v1/secrets', robot);
    expect(all.body.message).toBe(
      `secrets is forbidden: User "${SA_USER}" cannot list resource "secrets" in API group "" at the cluster scope`,
    );
    // The request log names the user and what was refused.
    const logged = api.requests.filter((r) => r.user === SA_USER && r.status === 403);
    expect(logged.map((r) => r.denied)).toContain(all.body.message);
  });

  it('a TokenReview knows service account tokens, with their groups', async () => {
    const r = await admin('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: robot },
    });
    expect(r.body.status).toMatchObject({
      authenticated: true,
      user: {
        username: SA_USER,
        groups: ['system:serviceaccounts', 'system:serviceaccounts:team-a', 'system:authenticated'],
      },
    });
  });

  it('list, watch and get are separate verbs; a RoleBinding grants only in its namespace', async () => {
    await role('team-a', 'secret-lister', [
      { apiGroups: [''], resources: ['secrets'], verbs: ['list'] },
    ]);
    await bind('team-a', 'robot-lists', { kind: 'Role', name: 'secret-lister' }, [robotSubject]);
    expect((await call('GET', '/api/v1/namespaces/team-a/secrets', robot)).status).toBe(200);
    expect((await call('GET', '/api/v1/namespaces/team-b/secrets', robot)).status).toBe(403);
    const watch = await call('GET', '/api/v1/namespaces/team-a/secrets?watch=1', robot);
    expect(watch.body.message).toContain(`cannot watch resource "secrets"`);
    const get = await call('GET', '/api/v1/namespaces/team-a/secrets/x', robot);
    expect(get.body.message).toContain(`cannot get resource "secrets"`);
  });

  it('a subresource is its own resource: status writes without main writes, and */status', async () => {
    await role('team-a', 'status-writer', [
      { apiGroups: ['hookgate.dev'], resources: ['workflows/status'], verbs: ['update'] },
      { apiGroups: ['hookgate.dev'], resources: ['*/finalizers'], verbs: ['update'] },
    ]);
    await bind('team-a', 'robot-status', { kind: 'Role', name: 'status-writer' }, [robotSubject]);
    const base = '/apis/hookgate.dev/v1alpha1/namespaces/team-a';
    // Authorised (the object does not exist: 404 from the handler, not 403).
    const named = { metadata: { name: 'w' } };
    expect((await call('PUT', `${base}/workflows/w/status`, robot, named)).status).toBe(404);
    const main = await call('PUT', `${base}/workflows/w`, robot, { metadata: {} });
    expect(main.body.message).toBe(
      `workflows.hookgate.dev "w" is forbidden: User "${SA_USER}" cannot update resource "workflows" in API group "hookgate.dev" in the namespace "team-a"`,
    );
    const sub = await call('PUT', `${base}/webhooktriggers/t/status`, robot, { metadata: {} });
    expect(sub.body.message).toContain('cannot update resource "webhooktriggers/status"');
  });

  it('resourceNames allow only the named object; a watch by metadata.name counts as named', async () => {
    await role('team-a', 'one-lease', [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['mine'],
        verbs: ['get', 'list', 'watch', 'create'],
      },
    ]);
    await bind('team-a', 'robot-lease', { kind: 'Role', name: 'one-lease' }, [robotSubject]);
    const leases = '/apis/coordination.k8s.io/v1/namespaces/team-a/leases';
    expect((await call('GET', `${leases}/mine`, robot)).status).toBe(404);
    expect((await call('GET', `${leases}/other`, robot)).status).toBe(403);
    expect((await call('GET', leases, robot)).status).toBe(403);
    expect((await call('GET', `${leases}?fieldSelector=metadata.name%3Dmine`, robot)).status).toBe(
      200,
    );
    // A create has no name in the URL: resourceNames cannot grant it.
    const create = await call('POST', leases, robot, { metadata: { name: 'mine' } });
    expect(create.body.message).toContain('cannot create resource "leases"');
  });

  it('a server-side apply that creates the object needs create as well as patch (handlers/patch.go)', async () => {
    await role('team-a', 'configmap-patcher', [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['patch'] },
    ]);
    await bind('team-a', 'robot-patches', { kind: 'Role', name: 'configmap-patcher' }, [
      robotSubject,
    ]);
    const cms = '/api/v1/namespaces/team-a/configmaps';
    const apply = (name: string) =>
      call(
        'PATCH',
        `${cms}/${name}?fieldManager=robot`,
        robot,
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { a: '1' } },
        'application/apply-patch+yaml',
      );
    const denied = await apply('new');
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({
      reason: 'Forbidden',
      message: `configmaps "new" is forbidden: User "${SA_USER}" cannot create resource "configmaps" in API group "" in the namespace "team-a"`,
      details: { name: 'new', kind: 'configmaps' },
    });
    expect((await call('GET', `${cms}/new`, ADMIN)).status).toBe(404);
    // Patching an existing object needs patch only.
    await admin('POST', cms, { metadata: { name: 'old' } });
    expect((await apply('old')).status).toBe(200);
    // The create is authorised with the URL's name, so resourceNames can grant it.
    await role('team-a', 'configmap-creator', [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['create'], resourceNames: ['new'] },
    ]);
    await bind('team-a', 'robot-creates', { kind: 'Role', name: 'configmap-creator' }, [
      robotSubject,
    ]);
    expect((await apply('new')).status).toBe(201);
  });

  it('Group subjects (system:serviceaccounts:<ns>) and a binding to a missing role, with its reason', async () => {
    await admin('POST', `${RBAC}/clusterroles`, {
      metadata: { name: 'configmap-reader' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
    });
    await bind('team-b', 'team-a-accounts', { kind: 'ClusterRole', name: 'configmap-reader' }, [
      { kind: 'Group', name: 'system:serviceaccounts:team-a' },
    ]);
    expect((await call('GET', '/api/v1/namespaces/team-b/configmaps', robot)).status).toBe(200);
    await bind('team-b', 'dangling', { kind: 'ClusterRole', name: 'missing' }, [robotSubject]);
    const r = await call('GET', '/api/v1/namespaces/team-b/secrets', robot);
    expect(r.body.message).toBe(
      `secrets is forbidden: User "${SA_USER}" cannot list resource "secrets" in API group "" in the namespace "team-b": RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found`,
    );
  });

  it('escalation: a Role granting what the user lacks is refused; escalate and bind lift it', async () => {
    await role('team-a', 'rbac-editor', [
      {
        apiGroups: ['rbac.authorization.k8s.io'],
        resources: ['roles', 'rolebindings'],
        verbs: ['create', 'update', 'patch'],
      },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get'] },
    ]);
    await bind('team-a', 'alice-rbac', { kind: 'Role', name: 'rbac-editor' }, [
      { kind: 'User', name: 'alice' },
    ]);
    const asAlice = (path: string, body: object) => call('POST', path, 'alice-token', body);
    const grab = await asAlice(`${RBAC}/namespaces/team-a/roles`, {
      metadata: { name: 'grab' },
      rules: [
        { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list'] },
        { apiGroups: [''], resources: ['configmaps'], verbs: ['get'] },
      ],
    });
    expect(grab.status).toBe(403);
    expect(grab.body).toMatchObject({
      reason: 'Forbidden',
      details: { name: 'grab', group: 'rbac.authorization.k8s.io', kind: 'roles' },
      message:
        'roles.rbac.authorization.k8s.io "grab" is forbidden: user "alice" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}',
    });
    expect(api.requests.find((r) => r.user === 'alice' && r.status === 403)?.denied).toBe(
      grab.body.message,
    );
    // What she holds, she may grant.
    expect(
      (
        await asAlice(`${RBAC}/namespaces/team-a/roles`, {
          metadata: { name: 'cm' },
          rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }],
        })
      ).status,
    ).toBe(201);
    // Binding herself to cluster-admin: refused, naming the binding.
    const toAdmin = await asAlice(`${RBAC}/namespaces/team-a/rolebindings`, {
      metadata: { name: 'alice-admin' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'cluster-admin',
      },
      subjects: [{ kind: 'User', name: 'alice' }],
    });
    expect(toAdmin.status).toBe(403);
    expect(toAdmin.body.message).toMatch(
      /^rolebindings\.rbac\.authorization\.k8s\.io "alice-admin" is forbidden: user "alice" .* is attempting to grant RBAC permissions not currently held:\n/,
    );
    // `bind` on that one ClusterRole lets her bind it; `escalate` lets her write any Role.
    await role('team-a', 'binder', [
      {
        apiGroups: ['rbac.authorization.k8s.io'],
        resources: ['clusterroles'],
        resourceNames: ['configmap-reader'],
        verbs: ['bind'],
      },
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles'], verbs: ['escalate'] },
    ]);
    await bind('team-a', 'alice-binder', { kind: 'Role', name: 'binder' }, [
      { kind: 'User', name: 'alice' },
    ]);
    const bound = await asAlice(`${RBAC}/namespaces/team-a/rolebindings`, {
      metadata: { name: 'alice-cm' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'configmap-reader',
      },
      subjects: [{ kind: 'User', name: 'alice' }],
    });
    expect(bound.status).toBe(201);
    expect(
      (
        await asAlice(`${RBAC}/namespaces/team-a/roles`, {
          metadata: { name: 'grab' },
          rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }],
        })
      ).status,
    ).toBe(201);
    // A binding to a role that does not exist is 404, as the registry answers it.
    const dangling = await asAlice(`${RBAC}/namespaces/team-a/rolebindings`, {
      metadata: { name: 'to-nothing' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'nothing' },
      subjects: [{ kind: 'User', name: 'alice' }],
    });
    expect(dangling.status).toBe(404);
    expect(dangling.body.message).toBe('roles.rbac.authorization.k8s.io "nothing" not found');
  });

  it('a SubjectAccessReview evaluates non-resource URLs and the bootstrap bindings too', async () => {
    const sar = (spec: object) =>
      admin('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec,
      });
    const discovery = await sar({
      user: 'bob',
      groups: ['system:authenticated'],
      nonResourceAttributes: { path: '/apis/hookgate.dev/v1alpha1', verb: 'get' },
    });
    expect(discovery.body.status).toMatchObject({
      allowed: true,
      reason:
        'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"',
    });
    const metrics = await sar({
      user: 'bob',
      groups: ['system:authenticated'],
      nonResourceAttributes: { path: '/metrics', verb: 'get' },
    });
    expect((metrics.body.status as { allowed: boolean }).allowed).toBe(false);
  });

  it('deleting the ServiceAccount revokes its tokens (401)', async () => {
    await admin('POST', '/api/v1/namespaces/team-b/serviceaccounts', {
      metadata: { name: 'temp' },
    });
    const token = api.serviceAccountToken('team-b', 'temp');
    expect((await call('GET', '/api', token)).status).toBe(200);
    await admin('DELETE', '/api/v1/namespaces/team-b/serviceaccounts/temp');
    expect((await call('GET', '/api', token)).status).toBe(401);
    // A tampered token is no token.
    expect((await call('GET', '/api', `${robot.slice(0, -2)}xx`)).status).toBe(401);
  });

  it('system:masters (the kubeconfig token) may do everything', async () => {
    expect((await call('DELETE', '/api/v1/namespaces/team-b/configmaps/none', ADMIN)).status).toBe(
      404,
    );
    expect((await call('GET', '/api/v1/secrets', ADMIN)).status).toBe(200);
  });
});
