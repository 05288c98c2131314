// Live streams on the admin listener (an endpoint's live events, an execution's
// events) are checked again while they are open: a rotated static token, or a
// RoleBinding taken away, ends them with a last `revoked` event carrying the problem;
// an authenticator that cannot be reached ends nothing. Over real HTTP, with the
// token file swapped in place and the test API server's RBAC.
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubePost } from '../../roles/admin-auth.ts';
import {
  AdminAccess,
  type AdminAuthenticator,
  type AdminUser,
} from '../../runtime/admin/access.ts';
import { KubernetesAuthenticator } from '../../runtime/admin/kubernetes.ts';
import { TokenFileAuthenticator } from '../../runtime/admin/static-token.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { sseFrames, type SseFrame } from '../support/sse.ts';
import { eventually, sleep } from '../support/eventually.ts';

const RECHECK_MS = 100;
const LIVE = '/webhook-events/default_production_orders/ingest';

/** A workflow that runs long enough for its event stream to stay open. */
const docs = [
  workflow('orders', { nodes: [{ id: 'pause', type: 'delay', duration: '20s' }] }),
  trigger('ingest', { pathSegment: 'ingest' }),
];

async function start(
  authenticator: AdminAuthenticator,
  namespaceDocs = docs,
): Promise<{ rt: TestRuntime; admin: string }> {
  const rt = await startRuntime({
    adminAccess: new AdminAccess(authenticator, { streamRecheckMs: RECHECK_MS }),
  });
  await rt.apply('orders.yaml', namespaceDocs, ['ingest']);
  await rt.app.listen({ port: 0, host: '127.0.0.1' });
  const admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
  return { rt, admin };
}

/** Opens a stream and reads its frames in the background. */
function open(url: string, token: string) {
  const frames: SseFrame[] = [];
  const abort = new AbortController();
  const ended = (async () => {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${token}` },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    for await (const frame of sseFrames(res)) frames.push(frame);
  })().catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  return { frames, ended, close: () => abort.abort() };
}

const connected = (stream: { frames: SseFrame[] }) =>
  eventually(() => expect(stream.frames[0]?.event).toBe('connected'));

const revokedType = (frames: SseFrame[]) => {
  const last = frames.at(-1);
  expect(last?.event).toBe('revoked');
  return (JSON.parse(last?.data ?? '{}') as { type: string; status: number }).type;
};

describe('admin live streams with a static token file', () => {
  let dir: string;
  let path: string;
  let rt: TestRuntime;
  let admin: string;
  const token = 'first-admin-token-0123456789';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hookgate-stream-token-'));
    path = join(dir, 'token');
    await writeFile(path, `${token}\n`);
    ({ rt, admin } = await start(new TokenFileAuthenticator(path, { recheckMs: 0 })));
  });
  afterAll(async () => {
    await rt?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('a rotated token ends the open streams with a revoked event (admin-unauthenticated)', async () => {
    const started = await rt.app.inject({
      method: 'POST',
      url: '/webhook/default_production_orders/ingest',
      payload: {},
    });
    expect(started.statusCode).toBe(202);
    const id = started.json<{ executionId: string }>().executionId;
    const live = open(`${admin}${LIVE}`, token);
    const execution = open(`${admin}/api/executions/${id}/events`, token);
    // Open, and still open after several checks with the token unchanged.
    await connected(live);
    await eventually(() => expect(execution.frames.length).toBeGreaterThan(0));
    await sleep(RECHECK_MS * 5);
    expect(live.frames.map((f) => f.event)).toEqual(['connected']);
    expect(execution.frames.some((f) => f.event === 'revoked')).toBe(false);

    await writeFile(`${path}.new`, 'second-admin-token-0123456789\n');
    await rename(`${path}.new`, path);
    await Promise.all([live.ended, execution.ended]);
    expect(revokedType(live.frames)).toBe('https://hookgate.dev/problems/admin-unauthenticated');
    expect(revokedType(execution.frames)).toBe(
      'https://hookgate.dev/problems/admin-unauthenticated',
    );
    // The reconnection is refused like any request.
    const again = await fetch(`${admin}${LIVE}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(again.status).toBe(401);
  });
});

describe('admin live streams when access is withdrawn in Kubernetes', () => {
  let api: KubeApiServer;
  let dir: string;
  let rt: TestRuntime;
  let admin: string;
  const ALICE = 'alice-token-watches-team-a';
  const RBAC = '/apis/rbac.authorization.k8s.io/v1';
  const group = 'rbac.authorization.k8s.io';

  const kube = async (method: string, path: string, body?: object) => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', authorization: 'Bearer hookgate-test-token' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    expect(res.ok).toBe(true);
  };

  beforeAll(async () => {
    api = await startKubeApiServer({ users: { [ALICE]: { username: 'alice' } } });
    await kube('POST', `${RBAC}/clusterroles`, {
      apiVersion: `${group}/v1`,
      kind: 'ClusterRole',
      metadata: { name: 'trigger-reader' },
      rules: [{ apiGroups: ['hookgate.dev'], resources: ['webhooktriggers'], verbs: ['get'] }],
    });
    await kube('POST', `${RBAC}/namespaces/default/rolebindings`, {
      apiVersion: `${group}/v1`,
      kind: 'RoleBinding',
      metadata: { name: 'alice-reads', namespace: 'default' },
      subjects: [{ kind: 'User', name: 'alice', apiGroup: group }],
      roleRef: { kind: 'ClusterRole', name: 'trigger-reader', apiGroup: group },
    });
    dir = await mkdtemp(join(tmpdir(), 'hookgate-stream-kube-'));
    const kc = new KubeConfig();
    kc.loadFromFile(api.writeKubeconfig(dir));
    ({ rt, admin } = await start(
      new KubernetesAuthenticator({ post: kubePost(kc), ttlMs: RECHECK_MS / 2 }),
    ));
  });
  afterAll(async () => {
    await rt?.stop();
    await api?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a RoleBinding taken away ends the stream with a revoked event (admin-forbidden)', async () => {
    const live = open(`${admin}${LIVE}`, ALICE);
    await connected(live);
    await sleep(RECHECK_MS * 5);
    expect(live.frames.map((f) => f.event)).toEqual(['connected']);
    await kube('DELETE', `${RBAC}/namespaces/default/rolebindings/alice-reads`);
    await live.ended;
    expect(revokedType(live.frames)).toBe('https://hookgate.dev/problems/admin-forbidden');
    expect(JSON.parse(live.frames.at(-1)?.data ?? '{}')).toMatchObject({
      status: 403,
      detail: expect.stringContaining('alice may no longer get webhooktriggers'),
    });
  });
});

describe('admin live streams while the authenticator cannot be reached', () => {
  let rt: TestRuntime;
  let admin: string;
  /** What the next re-checks answer, in order; then yes for good. */
  let script: ('down' | 'yes' | 'no')[] = [];
  let asked = 0;
  const recheckErrors: unknown[] = [];
  const user: AdminUser = { username: 'ops', groups: [] };
  const authenticator: AdminAuthenticator = {
    authenticate: () => {
      asked++;
      const next = script.shift() ?? 'yes';
      if (next === 'down') return Promise.reject(new Error('connection refused'));
      return Promise.resolve(next === 'yes' ? user : undefined);
    },
    authorize: () => Promise.resolve(true),
  };

  beforeAll(async () => {
    rt = await startRuntime({
      adminAccess: new AdminAccess(authenticator, {
        streamRecheckMs: RECHECK_MS,
        onRecheckError: (error) => recheckErrors.push(error),
      }),
    });
    await rt.apply('orders.yaml', docs, ['ingest']);
    admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => rt?.stop());

  /** Opens a stream (its opening request answered yes). */
  async function opened() {
    script = [];
    const live = open(`${admin}${LIVE}`, 'any-token');
    await connected(live);
    return live;
  }

  it('keeps the stream through failed checks that an answer interrupts; the first no ends it', async () => {
    const live = await opened();
    recheckErrors.length = 0;
    // Two failures, a yes (the count starts again), two failures, then a no.
    script = ['down', 'down', 'yes', 'down', 'down', 'no'];
    asked = 0;
    await live.ended;
    expect(asked).toBe(6);
    expect(live.frames.map((f) => f.event)).toEqual(['connected', 'revoked']);
    expect(revokedType(live.frames)).toBe('https://hookgate.dev/problems/admin-unauthenticated');
    expect(recheckErrors.length).toBeGreaterThan(0); // reported, once per period at most
  });

  it('ends the stream with auth-unavailable after three failed checks in a row', async () => {
    const live = await opened();
    script = ['down', 'down', 'down'];
    asked = 0;
    await live.ended;
    expect(asked).toBe(3);
    expect(revokedType(live.frames)).toBe('https://hookgate.dev/problems/auth-unavailable');
  });

  it('lets go of a stream whose client left during the access check: no stream, no re-checks', async () => {
    let checks = 0;
    let slow = true;
    const slowAccess = new AdminAccess(
      {
        authenticate: () => (checks++, Promise.resolve(user)),
        authorize: async () => {
          if (slow) await sleep(300);
          return true;
        },
      },
      { streamRecheckMs: 50 },
    );
    const other = await startRuntime({ adminAccess: slowAccess });
    try {
      await other.apply('orders.yaml', docs, ['ingest']);
      const url = await other.admin.listen({ port: 0, host: '127.0.0.1' });
      const abort = new AbortController();
      const res = fetch(`${url}${LIVE}`, {
        headers: { authorization: 'Bearer t' },
        signal: abort.signal,
      }).catch(() => undefined);
      await sleep(100);
      abort.abort();
      await res;
      await sleep(400); // the access check done, the stream opened on a closed answer
      slow = false;
      const before = checks;
      await sleep(300);
      expect(other.admin.sseStreams.size).toBe(0);
      expect(checks - before).toBe(0);
    } finally {
      await other.stop();
    }
  });
});
