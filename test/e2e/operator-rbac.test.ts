// Least privilege, proven on a server that enforces it: the chart is rendered with the
// real helm, its ServiceAccounts, RBAC and CRDs are applied with the real kubectl (as
// a cluster admin) to the test API server running with RBAC on, and the real
// `hookgate operator` and `hookgate gateway` processes run with their service
// accounts' tokens. With the default chart they reconcile everything to Ready (status,
// finalizers, Events, the Lease, a labelled Secret read) without one 403. With
// rbac.secretNamespaces the operator's Secrets outside the listed namespaces are
// forbidden, and a trigger there says so (SecretForbidden) instead of the operator
// failing; a listed namespace whose RoleBinding is missing does the same until the
// binding is back. Every 403 the server answered is printed.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import {
  FULLNAME,
  NAMESPACE,
  deployment,
  container,
  renderArgs,
  templateArgs,
  tools,
  type K8sObject,
} from '../charts/chart.ts';
import { eventually } from '../support/eventually.ts';
import { kubeToolEnv } from '../support/kube-tools.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';

/** Consecutive ports free at load time for the processes this suite starts. */
const BASE_PORT = await freePortRun(8);

const root = resolve(import.meta.dirname, '..', '..');
const OPERATOR_USER = `system:serviceaccount:${NAMESPACE}:${FULLNAME}`;
const GATEWAY_USER = `system:serviceaccount:${NAMESPACE}:${FULLNAME}-gateway`;
const POD_NAME = `${FULLNAME}-operator-7d9f8-abcde`;
const ADMIN = 'hookgate-test-token';
const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-0123456789';
/** Kinds `helm install` would create that this test applies (the rest needs a kubelet). */
const APPLIED = new Set([
  'Namespace',
  'ServiceAccount',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'CustomResourceDefinition',
]);

type Condition = { type: string; status: string; reason: string; message: string };

describe.skipIf(!tools || !redisAvailable())('the chart RBAC, enforced', () => {
  let api: KubeApiServer;
  let redis: RedisServer;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let operatorKubeconfig = '';
  const children: ChildProcess[] = [];
  const port = BASE_PORT;
  let operator: ChildProcess | undefined;

  const kubectl = (...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
      execFile(tools?.kubectl ?? 'kubectl-missing', args, { env, timeout: 60_000 }, (err, o, e) =>
        done({
          code: err ? (typeof err.code === 'number' ? err.code : 1) : 0,
          stdout: o,
          stderr: e,
        }),
      );
    });
  let trusting: Agent;
  const call = async (method: string, path: string, body?: object, token = ADMIN) => {
    const res = await undiciFetch(`${api.url}${path}`, {
      dispatcher: trusting,
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const create = async (path: string, body: object) => {
    const r = await call('POST', path, body);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  };
  const hooks = (ns: string, plural: string) =>
    `/apis/hookgate.dev/v1alpha1/namespaces/${ns}/${plural}`;
  const conditions = async (ns: string, plural: string, name: string) =>
    (
      ((await call('GET', `${hooks(ns, plural)}/${name}`)).body.status ?? {}) as {
        conditions?: Condition[];
      }
    ).conditions ?? [];
  const ready = async (ns: string, plural: string, name: string) =>
    (await conditions(ns, plural, name)).find((c) => c.type === 'Ready');

  /** Renders the chart, applies what RBAC needs with kubectl as an admin; the objects. */
  async function applyChart(...sets: string[]): Promise<K8sObject[]> {
    const objects = await renderArgs(templateArgs(sets));
    const file = join(dir, `chart-${sets.length}.yaml`);
    writeFileSync(
      file,
      objects
        .filter((o) => APPLIED.has(o.kind))
        .map((o) => stringify(o))
        .join('---\n'),
    );
    const applied = await kubectl('apply', '-f', file);
    expect(applied.code, applied.stderr).toBe(0);
    return objects;
  }

  /** The operator Deployment's environment, as the kubelet would give it (Redis aside). */
  function operatorEnv(objects: K8sObject[]): Record<string, string> {
    const out: Record<string, string> = {};
    for (const e of container(deployment(objects, 'operator')).env) {
      if (e.value !== undefined) out[e.name] = e.value;
      const field = e.valueFrom?.fieldRef?.fieldPath;
      if (field === 'metadata.namespace') out[e.name] = NAMESPACE;
      if (field === 'metadata.name') out[e.name] = POD_NAME;
    }
    return out;
  }

  function startOperator(objects: K8sObject[]): ChildProcess {
    const child = spawn(
      process.execPath,
      [join(root, 'roles/cli.ts'), 'operator', '--port', String(port)],
      {
        env: {
          ...process.env,
          ...operatorEnv(objects),
          HOST: '127.0.0.1',
          METRICS_PORT: String(port),
          NODE_OPTIONS: '',
          REDIS_URL: redis.url,
          KUBECONFIG: operatorKubeconfig,
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    children.push(child);
    return child;
  }

  async function stopOperator(): Promise<void> {
    const child = operator;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }

  const leading = () =>
    eventually(
      async () => {
        const r = await fetch(`http://127.0.0.1:${port}/readyz`);
        expect(((await r.json()) as { status: string }).status).toBe('leading');
      },
      45_000,
      200,
    );

  /** Every 403 of `user` since the last clearRequests(), printed for whoever fixes the chart. */
  function forbidden(user: string): string[] {
    const denied = api.requests
      .filter((r) => r.user === user && r.status === 403)
      .map((r) => `${r.method} ${r.path}${r.query.watch ? ' (watch)' : ''}: ${r.denied ?? ''}`);
    if (denied.length > 0) console.log(`403s answered to ${user}:\n  ${denied.join('\n  ')}`);
    return denied;
  }

  beforeAll(async () => {
    // https: kubectl sends no bearer token over plain http.
    api = await startKubeApiServer({
      authorization: true,
      tls: true,
      users: {
        [ALICE]: { username: 'alice', groups: ['devs'] },
        [BOB]: { username: 'bob', groups: ['devs'] },
      },
    });
    trusting = new Agent({ connect: { ca: api.ca ?? '' } });
    dir = mkdtempSync(join(tmpdir(), 'hookgate-rbac-'));
    env = kubeToolEnv(dir, api.writeKubeconfig(dir));
    const namespaces = join(dir, 'namespaces.yaml');
    writeFileSync(
      namespaces,
      [NAMESPACE, 'team-a', 'team-b', 'team-c']
        .map((name) => stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }))
        .join('---\n'),
    );
    const created = await kubectl('apply', '-f', namespaces);
    expect(created.code, created.stderr).toBe(0);
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await api?.close();
    await trusting?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('default chart: the operator and the gateway, as their service accounts, get everything Ready without a 403', async () => {
    const objects = await applyChart();
    // Tokens as the kubelet mounts them: TokenRequest for each ServiceAccount.
    const token = async (sa: string) => {
      const r = await call('POST', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${sa}/token`, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {},
      });
      expect(r.status).toBe(201);
      return (r.body.status as { token: string }).token;
    };
    operatorKubeconfig = api.writeKubeconfig(dir, {
      token: await token(FULLNAME),
      user: FULLNAME,
      namespace: NAMESPACE,
      file: 'operator.kubeconfig',
    });
    const gatewayKubeconfig = api.writeKubeconfig(dir, {
      token: await token(`${FULLNAME}-gateway`),
      user: `${FULLNAME}-gateway`,
      namespace: NAMESPACE,
      file: 'gateway.kubeconfig',
    });
    api.clearRequests();

    operator = startOperator(objects);
    const gateway = spawn(
      process.execPath,
      [join(root, 'roles/cli.ts'), 'gateway', '--port', String(port + 1)],
      {
        env: {
          ...process.env,
          HOST: '127.0.0.1',
          ADMIN_PORT: String(port + 2),
          HOOKGATE_ADMIN_AUTH: 'kubernetes',
          REDIS_URL: redis.url,
          KUBECONFIG: gatewayKubeconfig,
          HOOKGATE_BASE_URL: 'https://hooks.test',
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    children.push(gateway);
    await leading();

    await create(hooks('team-a', 'workflows'), workflow('orders'));
    await create('/api/v1/namespaces/team-a/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'keys', labels: { 'hookgate.dev/credentials': 'true' } },
      stringData: { acme: 'key-acme-0001' },
    });
    await create(
      hooks('team-a', 'webhooktriggers'),
      trigger('ingest', {
        pathSegment: 'ingest',
        auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
      }),
    );
    await eventually(
      async () => {
        expect(await ready('team-a', 'workflows', 'orders')).toMatchObject({ status: 'True' });
        expect(await ready('team-a', 'webhooktriggers', 'ingest')).toMatchObject({
          status: 'True',
        });
      },
      45_000,
      200,
    );
    // The Secret was read: the gateway takes its key and refuses another.
    const url = `http://127.0.0.1:${port + 1}/webhook/team-a_production_orders/ingest`;
    const send = (key: string) =>
      fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: '{}' });
    expect((await send('key-acme-0001')).status).toBe(202);
    expect((await send('wrong-key-0000')).status).toBe(401);

    // Finalizers (patch), the Lease (a Role in the release namespace), Events.
    const wt = await call('GET', `${hooks('team-a', 'webhooktriggers')}/ingest`);
    expect((wt.body.metadata as { finalizers?: string[] }).finalizers).toContain(
      'hookgate.dev/cleanup',
    );
    const lease = await call(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/${FULLNAME}-operator`,
    );
    expect(lease.status).toBe(200);
    // client-go's identity: the host name (the pod's name in a pod) and a UUID.
    expect((lease.body.spec as { holderIdentity: string }).holderIdentity).toMatch(
      new RegExp(`^${hostname()}_[0-9a-f-]{36}$`),
    );
    await eventually(async () => {
      const events = (await call('GET', '/api/v1/namespaces/team-a/events')).body.items as {
        reason: string;
        involvedObject: { name: string };
      }[];
      expect(events).toContainEqual(
        expect.objectContaining({
          reason: 'Ready',
          involvedObject: expect.objectContaining({ name: 'ingest' }),
        }),
      );
    }, 20_000);

    // The gateway's own account: TokenReview and SubjectAccessReview (system:auth-delegator)
    // for an admin request of a user the cluster's RBAC lets read triggers in team-a.
    await create('/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles', {
      metadata: { name: 'trigger-reader' },
      rules: [{ apiGroups: ['hookgate.dev'], resources: ['webhooktriggers'], verbs: ['get'] }],
    });
    await create('/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings', {
      metadata: { name: 'alice-reads' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'trigger-reader' },
      subjects: [{ kind: 'User', name: 'alice' }],
    });
    // Alice sees the execution of team-a's trigger (TokenReview, then a
    // SubjectAccessReview per namespace), Bob, who may read nothing, sees none, and a
    // token nobody issued is unauthenticated.
    const executions = async (token: string) => {
      const res = await fetch(`http://127.0.0.1:${port + 2}/api/executions`, {
        headers: { authorization: `Bearer ${token}` },
      });
      return { status: res.status, items: ((await res.json()) as { items?: unknown[] }).items };
    };
    const seen = await executions(ALICE);
    expect(seen.status).toBe(200);
    expect(seen.items?.length).toBeGreaterThan(0);
    expect(await executions(BOB)).toEqual({ status: 200, items: [] });
    expect((await executions('not-a-token-of-anyone')).status).toBe(401);
    const reviews = api.requests
      .filter((r) => r.user === GATEWAY_USER && r.status === 201)
      .map((r) => r.path);
    expect(reviews).toContain('/apis/authentication.k8s.io/v1/tokenreviews');
    expect(reviews).toContain('/apis/authorization.k8s.io/v1/subjectaccessreviews');

    // What the operator asked for, one line per method and path shape (the chart's
    // rules are these and nothing more: docs/operator.md, "RBAC").
    const shapes = new Set(
      api.requests
        .filter((r) => r.user === OPERATOR_USER)
        .map(
          (r) =>
            `${r.method} ${r.path.replace(/\/namespaces\/[^/]+/, '/namespaces/<ns>')}${r.query.watch ? '?watch' : ''}`,
        ),
    );
    console.log(`the operator's requests:\n  ${[...shapes].sort().join('\n  ')}`);
    expect(forbidden(OPERATOR_USER)).toEqual([]);
    expect(forbidden(GATEWAY_USER)).toEqual([]);
  }, 120_000);

  it('rbac.secretNamespaces: Secrets elsewhere are forbidden, and the trigger says so instead of the operator failing', async () => {
    await stopOperator();
    // A Secret and trigger in a namespace that is not listed, and one in a listed
    // namespace whose RoleBinding is gone (deleted by hand, or the namespace recreated).
    for (const ns of ['team-b', 'team-c']) {
      await create(hooks(ns, 'workflows'), workflow('orders'));
      await create(`/api/v1/namespaces/${ns}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'keys', labels: { 'hookgate.dev/credentials': 'true' } },
        stringData: { acme: `key-${ns}-0001` },
      });
      await create(
        hooks(ns, 'webhooktriggers'),
        trigger('ingest', {
          pathSegment: 'ingest',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
        }),
      );
    }
    const sets = ['rbac.secretNamespaces={team-a,team-b}'];
    const objects = await applyChart(...sets);
    expect(operatorEnv(objects)['HOOKGATE_SECRET_NAMESPACES']).toBe('team-a,team-b');
    const removed = await call(
      'DELETE',
      `/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings/${FULLNAME}-operator-secrets`,
    );
    expect(removed.status).toBe(200);

    // The ClusterRole lost its Secrets rule: outside the listed namespaces, nothing.
    const saToken = /token: (\S+)/.exec(readFileSync(operatorKubeconfig, 'utf8'))?.[1];
    const asOperator = (path: string) => call('GET', path, undefined, saToken);
    const teamC = await asOperator('/api/v1/namespaces/team-c/secrets');
    expect(teamC).toEqual({
      status: 403,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `secrets is forbidden: User "${OPERATOR_USER}" cannot list resource "secrets" in API group "" in the namespace "team-c"`,
        reason: 'Forbidden',
        details: { kind: 'secrets' },
        code: 403,
      },
    });
    expect((await asOperator('/api/v1/secrets')).status).toBe(403);
    expect((await asOperator('/api/v1/namespaces/team-a/secrets')).status).toBe(200);
    // kubectl, as the operator, says the same.
    const denied = await kubectl(
      '--kubeconfig',
      operatorKubeconfig,
      'get',
      'secrets',
      '-n',
      'team-c',
    );
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain(
      `Error from server (Forbidden): secrets is forbidden: User "${OPERATOR_USER}" cannot list resource "secrets" in API group "" in the namespace "team-c"`,
    );

    api.clearRequests();
    operator = startOperator(objects);
    await leading();
    await eventually(
      async () => {
        expect(await ready('team-a', 'webhooktriggers', 'ingest')).toMatchObject({
          status: 'True',
        });
        const c = await ready('team-c', 'webhooktriggers', 'ingest');
        expect(c).toMatchObject({ status: 'False', reason: 'SecretForbidden' });
        expect(c?.message).toContain('the operator watches no Secrets in namespace team-c');
        const b = await ready('team-b', 'webhooktriggers', 'ingest');
        expect(b).toMatchObject({ status: 'False', reason: 'SecretForbidden' });
        expect(b?.message).toContain(
          `the API server refuses the operator the Secrets of namespace team-b: secrets is forbidden: User "${OPERATOR_USER}" cannot list resource "secrets"`,
        );
      },
      45_000,
      200,
    );
    expect(operator.exitCode).toBeNull();
    // The only 403s: listing team-b's Secrets while its RoleBinding was gone.
    const denials = forbidden(OPERATOR_USER);
    expect(denials.length).toBeGreaterThan(0);
    for (const d of denials) expect(d).toMatch(/^GET \/api\/v1\/namespaces\/team-b\/secrets/);

    // The binding back (helm upgrade, here kubectl apply): the informer's next retry
    // lists team-b and the trigger turns Ready, with no restart.
    await applyChart(...sets);
    const healing = Date.now();
    await eventually(
      async () =>
        expect(await ready('team-b', 'webhooktriggers', 'ingest')).toMatchObject({
          status: 'True',
        }),
      60_000,
      500,
    ).catch((err: unknown) => {
      console.log(
        api.requests
          .filter((r) => r.path.includes('team-b'))
          .map(
            (r) => `${r.method} ${r.path} ${r.status} ${r.user ?? ''} ${JSON.stringify(r.query)}`,
          )
          .join('\n'),
      );
      throw err;
    });
    console.log(`team-b healed ${Date.now() - healing} ms after its RoleBinding was back`);
    expect(operator.exitCode).toBeNull();
  }, 180_000);
});
