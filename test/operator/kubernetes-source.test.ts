// KubernetesSource against the in-memory API server (test/kube-apiserver): initial
// sync (O8), informer convergence after a closed watch, a 410 and a 500 (O7),
// conflict-safe status and finalizer writes (O4, O6), Secrets decoding. Assertions
// are on the state of the world (the cache and the server's objects), not on call
// sequences (O11).
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import { Controller } from '../../operator/controller/controller.ts';
import {
  KubeApiError,
  KubeClient,
  type RequestOptions,
  type Verb,
} from '../../operator/controller/kube-client.ts';
import {
  CREDENTIALS_LABEL,
  KubernetesSource,
  resourcePath,
} from '../../operator/sources/kubernetes.ts';
import { StatusChangedError } from '../../operator/sources/kube-writes.ts';
import type { ObjectRef } from '../../operator/sources/ports.ts';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually } from '../support/eventually.ts';

let cluster: TestCluster;
let server: KubeApiServer;
let kc: KubeConfig;
let client: KubeClient;
let nsCounter = 0;
const sources: KubernetesSource[] = [];

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  ({ server, client, kc } = cluster);
});

afterEach(async () => {
  server.faults.clear();
  await Promise.all(sources.splice(0).map((s) => s.stop()));
});

afterAll(() => cluster.close());

async function newNamespace(): Promise<string> {
  const name = `ns${++nsCounter}`;
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name } } });
  return name;
}

function workflow(namespace: string, name: string) {
  return {
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'Workflow',
    metadata: { name, namespace },
    spec: {
      application: 'demo',
      environment: 'development',
      nodes: [{ id: 'greet', type: 'transform', expression: '{ "ok": true }' }],
    },
  };
}

function trigger(namespace: string, name: string) {
  return {
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'WebhookTrigger',
    metadata: { name, namespace },
    spec: {
      workflowRef: { name: 'hello' },
      pathSegment: 'default',
      response: { mode: 'immediateAck' },
    },
  };
}

interface Obj {
  metadata: {
    name: string;
    namespace: string;
    resourceVersion: string;
    generation?: number;
    finalizers?: string[];
    labels?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  status?: { conditions?: { type: string; status: string; lastTransitionTime?: string }[] };
}

const createWorkflow = (ns: string, name: string) =>
  client.request<Obj>('POST', resourcePath('Workflow', ns), { body: workflow(ns, name) });
const getWorkflow = (ns: string, name: string) =>
  client.request<Obj>('GET', resourcePath('Workflow', ns, name));

function newSource(namespace?: string, extra: { client?: KubeClient } = {}) {
  const changes: ObjectRef[] = [];
  const source = new KubernetesSource({
    kubeConfig: kc,
    ...(namespace ? { namespace } : {}),
    restartBackoff: { initialMs: 50, maxMs: 200 },
    maxReconnectDelayMs: 50,
    syncTimeoutMs: 10_000,
    ...extra,
  });
  sources.push(source);
  return { source, changes, onChange: (ref: ObjectRef) => void changes.push(ref) };
}

const seen = (changes: ObjectRef[], kind: string, name: string) =>
  changes.some((c) => c.kind === kind && c.name === name);

const isWatchOf = (plural: string) => (r: { watch: boolean; path: string }) =>
  r.watch && r.path.endsWith(`/${plural}`);
const isListOf = (plural: string) => (r: { watch: boolean; path: string; method: string }) =>
  !r.watch && r.method === 'GET' && r.path.endsWith(`/${plural}`);

describe('KubernetesSource: initial sync (O8)', () => {
  it('resolves start() only after every informer listed, with onChange called for every object', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns, 'a');
    await createWorkflow(ns, 'b');
    await client.request('POST', resourcePath('WebhookTrigger', ns), { body: trigger(ns, 't') });
    await client.request('POST', resourcePath('Secret', ns), {
      body: {
        metadata: { name: 's', namespace: ns, labels: { [CREDENTIALS_LABEL]: 'true' } },
        data: { key: Buffer.from('sekret ✓').toString('base64') },
      },
    });
    // Slow down the trigger list: start() must wait for it.
    server.faults.delayNext(1, 300, isListOf('webhooktriggers'));
    const { source, changes, onChange } = newSource(ns);
    const started = Date.now();
    await source.start(onChange);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(seen(changes, 'Workflow', 'a')).toBe(true);
    expect(seen(changes, 'Workflow', 'b')).toBe(true);
    expect(seen(changes, 'WebhookTrigger', 't')).toBe(true);
    expect(seen(changes, 'Secret', 's')).toBe(true);
    expect(
      source
        .list('Workflow')
        .map((w) => w.metadata.name)
        .sort(),
    ).toEqual(['a', 'b']);
    expect(source.get({ kind: 'WebhookTrigger', namespace: ns, name: 't' })?.kind).toBe(
      'WebhookTrigger',
    );
    expect(source.getSecret(ns, 's')?.data).toEqual({ key: 'sekret ✓' });
    expect(source.getSecret(ns, 'missing')).toBeUndefined();
  });

  it('keeps waiting through failed initial lists (restarting the informer) and then syncs', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns, 'a');
    server.faults.failNext(2, 500, isListOf('workflows'));
    const { source, changes, onChange } = newSource(ns);
    await source.start(onChange);
    expect(seen(changes, 'Workflow', 'a')).toBe(true);
    expect(source.restarts().Workflow).toBeGreaterThanOrEqual(2);
  });

  it('rejects start() when the initial list never succeeds within syncTimeoutMs', async () => {
    const ns = await newNamespace();
    server.faults.failNext(1000, 500, isListOf('webhooktriggers'));
    const source = new KubernetesSource({
      kubeConfig: kc,
      namespace: ns,
      restartBackoff: { initialMs: 20, maxMs: 50 },
      syncTimeoutMs: 400,
    });
    sources.push(source);
    await expect(source.start(() => {})).rejects.toThrow(/WebhookTrigger/);
  });

  it('no reconcile happens before the initial sync (controller-runtime controller_test)', async () => {
    const ns = await newNamespace();
    for (const n of ['a', 'b', 'c']) await createWorkflow(ns, n);
    server.faults.delayNext(1, 300, isListOf('secrets'));
    const { source } = newSource(ns);
    const listedAtReconcile: number[] = [];
    const controller = new Controller({
      name: 'o8',
      reconcile: async () => {
        listedAtReconcile.push(source.list('Workflow').length);
        await Promise.resolve();
      },
    });
    await source.start((ref) => controller.enqueue(`${ref.kind}/${ref.namespace}/${ref.name}`));
    controller.start();
    await eventually(() => expect(listedAtReconcile.length).toBeGreaterThanOrEqual(3));
    await controller.stop();
    expect(listedAtReconcile.every((n) => n === 3)).toBe(true);
  });

  it('watches all namespaces when no namespace is given', async () => {
    const ns1 = await newNamespace();
    const ns2 = await newNamespace();
    await createWorkflow(ns1, 'x');
    await createWorkflow(ns2, 'y');
    const { source, onChange } = newSource();
    await source.start(onChange);
    const names = source.list('Workflow').map((w) => `${w.metadata.namespace}/${w.metadata.name}`);
    expect(names).toEqual(expect.arrayContaining([`${ns1}/x`, `${ns2}/y`]));
  });
});

describe('KubernetesSource: informers converge after watch failures (O7)', () => {
  async function started() {
    const ns = await newNamespace();
    await createWorkflow(ns, 'before');
    const s = newSource(ns);
    await s.source.start(s.onChange);
    await eventually(() => expect(server.faults.openWatches()).toBeGreaterThanOrEqual(3));
    return { ns, ...s };
  }

  it('a closed watch stream resumes and delivers what changed meanwhile', async () => {
    const { ns, source, changes } = await started();
    server.faults.delayNext(1, 300, isWatchOf('workflows'));
    expect(server.closeWatches()).toBeGreaterThanOrEqual(3);
    await createWorkflow(ns, 'during');
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'during' })).toBeDefined(),
    );
    expect(seen(changes, 'Workflow', 'during')).toBe(true);
    // And it keeps watching afterwards.
    await createWorkflow(ns, 'after');
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'after' })).toBeDefined(),
    );
  });

  it('a 410 on re-watch relists and reports objects deleted meanwhile', async () => {
    const { ns, source, changes } = await started();
    server.faults.delayNext(1, 300, isWatchOf('workflows'));
    server.faults.failNext(1, 410, isWatchOf('workflows'));
    server.closeWatches();
    await client.request('DELETE', resourcePath('Workflow', ns, 'before'));
    await createWorkflow(ns, 'during');
    changes.length = 0;
    await eventually(() => {
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'before' })).toBeUndefined();
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'during' })).toBeDefined();
    });
    expect(seen(changes, 'Workflow', 'before')).toBe(true);
    expect(seen(changes, 'Workflow', 'during')).toBe(true);
    expect(source.restarts().Workflow).toBe(0); // client-node handles 410 itself
  });

  it('a 410 ERROR event inside the stream relists too', async () => {
    const { ns, source } = await started();
    server.faults.delayNext(1, 300, isWatchOf('workflows'));
    server.faults.failNext(1, 410, isWatchOf('workflows'), { asWatchEvent: true });
    server.closeWatches();
    await client.request('DELETE', resourcePath('Workflow', ns, 'before'));
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'before' })).toBeUndefined(),
    );
    await createWorkflow(ns, 'after');
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'after' })).toBeDefined(),
    );
  });

  it('a 500 stops the client-node informer; ours restarts it with backoff and converges', async () => {
    const { ns, source, changes } = await started();
    server.faults.delayNext(1, 200, isWatchOf('workflows'));
    server.faults.failNext(1, 500, isWatchOf('workflows'));
    server.closeWatches();
    await createWorkflow(ns, 'during');
    await eventually(() => expect(source.restarts().Workflow).toBeGreaterThanOrEqual(1));
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'during' })).toBeDefined(),
    );
    expect(seen(changes, 'Workflow', 'during')).toBe(true);
    await createWorkflow(ns, 'after');
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'after' })).toBeDefined(),
    );
  });

  it('a re-watch whose credentials cannot be had (an exec plugin failing) restarts the informer', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns, 'before');
    // The same cluster, through a kubeconfig whose credentials fail once for a watch.
    const flaky = new KubeConfig();
    flaky.loadFromString(kc.exportConfig());
    let failWatchAuth = 0;
    const authenticate = flaky.applySecurityAuthentication.bind(flaky);
    flaky.applySecurityAuthentication = async (ctx) => {
      const url = ctx.getUrl();
      if (failWatchAuth > 0 && url.includes('watch=true') && url.includes('/workflows')) {
        failWatchAuth--;
        throw new Error('exec plugin: credentials unavailable');
      }
      return authenticate(ctx);
    };
    const source = new KubernetesSource({
      kubeConfig: flaky,
      namespace: ns,
      restartBackoff: { initialMs: 50, maxMs: 200 },
      maxReconnectDelayMs: 50,
      syncTimeoutMs: 10_000,
    });
    sources.push(source);
    await source.start(() => {});
    await eventually(() => expect(server.faults.openWatches()).toBeGreaterThanOrEqual(3));
    failWatchAuth = 1;
    server.closeWatches();
    await eventually(() => expect(failWatchAuth).toBe(0));
    await createWorkflow(ns, 'after');
    await eventually(() =>
      expect(source.get({ kind: 'Workflow', namespace: ns, name: 'after' })).toBeDefined(),
    );
    expect(source.restarts().Workflow).toBeGreaterThanOrEqual(1);
  });

  it('stop() leaves no watch open', async () => {
    const { source } = await started();
    const before = server.faults.openWatches();
    await source.stop();
    await eventually(() => expect(server.faults.openWatches()).toBe(before - 3));
  });
});

describe('KubernetesSource: what the cache keeps', () => {
  const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

  async function annotatedWorkflow(ns: string) {
    const body = workflow(ns, 'w');
    await client.request('POST', resourcePath('Workflow', ns), {
      body: {
        ...body,
        metadata: {
          ...body.metadata,
          labels: { team: 'a' },
          annotations: { [LAST_APPLIED]: JSON.stringify(body), note: 'kept on the server' },
        },
      },
    });
  }

  it('keeps only what reconcile reads: no labels, no annotations (last-applied), no managedFields', async () => {
    const ns = await newNamespace();
    await annotatedWorkflow(ns);
    const { source, onChange } = newSource(ns);
    await source.start(onChange);
    const ref = { kind: 'Workflow' as const, namespace: ns, name: 'w' };
    const cached = source.get(ref);
    expect(Object.keys(cached?.metadata ?? {}).sort()).toEqual([
      'creationTimestamp',
      'generation',
      'name',
      'namespace',
      'resourceVersion',
      'uid',
    ]);
    expect(cached).toMatchObject({
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      spec: { application: 'demo', environment: 'development' },
    });
    // Watched changes are slimmed too.
    await client.request('PATCH', resourcePath('Workflow', ns, 'w'), {
      contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: { more: 'x' } }, spec: { description: 'changed' } },
    });
    await eventually(() =>
      expect((source.get(ref)?.spec as { description?: string }).description).toBe('changed'),
    );
    expect(source.get(ref)?.metadata).not.toHaveProperty('annotations');
  });

  it('a finalizer write keeps what the cache leaves out (labels, annotations)', async () => {
    const ns = await newNamespace();
    await annotatedWorkflow(ns);
    const { source, onChange } = newSource(ns);
    await source.start(onChange);
    const ref = { kind: 'Workflow' as const, namespace: ns, name: 'w' };
    await source.addFinalizer(ref);
    const obj = await client.request<{
      metadata: { labels?: object; annotations?: Record<string, string>; finalizers?: string[] };
    }>('GET', resourcePath('Workflow', ns, 'w'));
    expect(obj.metadata.finalizers).toEqual([FINALIZER]);
    expect(obj.metadata.labels).toEqual({ team: 'a' });
    expect(obj.metadata.annotations?.note).toBe('kept on the server');
    expect(obj.metadata.annotations?.[LAST_APPLIED]).toBeDefined();
  });
});

/** A client that runs `interject` once, right before the first request matching `when`. */
class InterjectingClient extends KubeClient {
  interject: (() => Promise<void>) | undefined;
  when: (verb: Verb, path: string) => boolean = () => false;
  conflicts = 0;

  override async request<T>(verb: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    if (this.interject && this.when(verb, path)) {
      const run = this.interject;
      this.interject = undefined;
      await run();
    }
    try {
      return await super.request<T>(verb, path, opts);
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 409) this.conflicts++;
      throw err;
    }
  }
}

describe('KubernetesSource: conflict-safe writes (O4, O6)', () => {
  const condition = (type: string, status: string, reason = 'Test') => ({
    type,
    status,
    reason,
    message: `${type} is ${status}`,
    lastTransitionTime: '2026-01-01T00:00:00Z',
    observedGeneration: 1,
  });

  async function setup() {
    const ns = await newNamespace();
    await createWorkflow(ns, 'w');
    const ic = new InterjectingClient(kc);
    const s = newSource(ns, { client: ic });
    await s.source.start(s.onChange);
    return { ns, ic, ...s, ref: { kind: 'Workflow' as const, namespace: ns, name: 'w' } };
  }

  it('writes status through /status and skips a write that changes nothing', async () => {
    const { ns, source, ref } = await setup();
    await source.writeStatus(ref, { conditions: [condition('Ready', 'True')] });
    const obj = await getWorkflow(ns, 'w');
    expect(obj.status?.conditions?.map((c) => c.type)).toEqual(['Ready']);
    await eventually(() =>
      expect(source.get(ref)?.metadata.resourceVersion).toBe(obj.metadata.resourceVersion),
    );
    const rv = obj.metadata.resourceVersion;
    server.clearRequests();
    await source.writeStatus(ref, { conditions: [condition('Ready', 'True')] });
    expect(server.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    expect((await getWorkflow(ns, 'w')).metadata.resourceVersion).toBe(rv);
  });

  it('a writer between our read and our PUT loses nothing: 409, re-GET, retry', async () => {
    const { ns, source, ic, ref } = await setup();
    ic.when = (verb, path) => verb === 'PUT' && path.endsWith('/status');
    ic.interject = async () => {
      // Another controller adds its own condition type, and a user edits the spec.
      const cur = await getWorkflow(ns, 'w');
      await client.request('PUT', `${resourcePath('Workflow', ns, 'w')}/status`, {
        body: { ...cur, status: { conditions: [condition('Foreign', 'True')] } },
      });
      await client.request('PATCH', resourcePath('Workflow', ns, 'w'), {
        contentType: 'application/merge-patch+json',
        body: { spec: { description: 'edited meanwhile' } },
      });
    };
    await source.writeStatus(ref, {
      observedGeneration: 1,
      conditions: [condition('Ready', 'False', 'Reconciling')],
    });
    expect(ic.conflicts).toBe(1);
    const obj = await getWorkflow(ns, 'w');
    expect(obj.spec?.description).toBe('edited meanwhile');
    expect(obj.metadata.generation).toBe(2);
    expect(obj.status?.conditions?.map((c) => `${c.type}=${c.status}`).sort()).toEqual([
      'Foreign=True',
      'Ready=False',
    ]);
  });

  it('a concurrent write of our own condition type is not written over: StatusChangedError, the reconcile runs again', async () => {
    const { ns, source, ic, ref } = await setup();
    ic.when = (verb, path) => verb === 'PUT' && path.endsWith('/status');
    ic.interject = async () => {
      const cur = await getWorkflow(ns, 'w');
      await client.request('PUT', `${resourcePath('Workflow', ns, 'w')}/status`, {
        body: {
          ...cur,
          status: {
            conditions: [
              { ...condition('Ready', 'True'), lastTransitionTime: '2025-05-05T00:00:00Z' },
            ],
          },
        },
      });
    };
    // Another replica of the operator (the new leader beside one that lost the Lease):
    // which of the two looked at the world last is unknown, so the write is given up
    // and the reconcile, run again, starts from the server's status (keeping its
    // lastTransitionTime where the status did not flip: mergeConditions).
    await expect(
      source.writeStatus(ref, { conditions: [condition('Ready', 'True', 'Succeeded')] }),
    ).rejects.toBeInstanceOf(StatusChangedError);
    const ready = (await getWorkflow(ns, 'w')).status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.lastTransitionTime).toBe('2025-05-05T00:00:00Z');
    expect((ready as { reason?: string } | undefined)?.reason).toBe('Test');
  });

  it('gives up after DefaultRetry (5 attempts) when every write conflicts', async () => {
    const { source, ref } = await setup();
    server.faults.failNext(5, 409, (r) => r.method === 'PUT' && r.path.endsWith('/status'));
    await expect(
      source.writeStatus(ref, { conditions: [condition('Ready', 'True')] }),
    ).rejects.toMatchObject({ code: 409 });
    server.faults.clear();
    server.faults.failNext(4, 409, (r) => r.method === 'PUT' && r.path.endsWith('/status'));
    await source.writeStatus(ref, { conditions: [condition('Ready', 'True')] });
    expect(ref).toBeDefined();
  });

  it('writes in a row start from the previous write while the informer lags: no 409', async () => {
    const { source, ic, ref } = await setup();
    // Hold the informer back: its watch is gone until it reconnects.
    server.faults.delayNext(1, 300, isWatchOf('workflows'));
    server.closeWatches();
    await source.writeStatus(ref, { conditions: [condition('Ready', 'Unknown', 'Reconciling')] });
    await source.addFinalizer(ref);
    await source.writeStatus(ref, { conditions: [condition('Ready', 'True', 'Succeeded')] });
    expect(ic.conflicts).toBe(0);
    await eventually(() => {
      const cached = source.get(ref);
      expect(cached?.metadata.finalizers).toEqual([FINALIZER]);
      expect((cached?.status as Obj['status'])?.conditions?.[0]?.status).toBe('True');
    });
  });

  it('writing status of a deleted object is a no-op', async () => {
    const { ns, source, ref } = await setup();
    await client.request('DELETE', resourcePath('Workflow', ns, 'w'));
    await source.writeStatus(ref, { conditions: [condition('Ready', 'True')] });
  });

  it('adds the finalizer through the main resource despite a concurrent label edit', async () => {
    const { ns, source, ic, ref } = await setup();
    ic.when = (verb, path) => verb === 'PATCH' && path === resourcePath('Workflow', ns, 'w');
    ic.interject = async () => {
      await client.request('PATCH', resourcePath('Workflow', ns, 'w'), {
        contentType: 'application/merge-patch+json',
        body: { metadata: { labels: { team: 'a' }, finalizers: ['other.example/keep'] } },
      });
    };
    await source.addFinalizer(ref);
    expect(ic.conflicts).toBe(1);
    const obj = await getWorkflow(ns, 'w');
    expect(obj.metadata.labels).toEqual({ team: 'a' });
    expect(obj.metadata.finalizers).toEqual(['other.example/keep', FINALIZER]);
    // Idempotent.
    await eventually(() => expect(source.get(ref)?.metadata.finalizers).toContain(FINALIZER));
    server.clearRequests();
    await source.addFinalizer(ref);
    expect(server.requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });

  it('addFinalizer is true while our finalizer is on a live object (O6)', async () => {
    const { source, ref } = await setup();
    expect(await source.addFinalizer(ref)).toBe(true);
    await eventually(() => expect(source.get(ref)?.metadata.finalizers).toContain(FINALIZER));
    expect(await source.addFinalizer(ref)).toBe(true);
  });

  it('addFinalizer rejects on a 404 to its PATCH: gone or not, that is for the informer to say (O6)', async () => {
    const { ns, source, ic, ref } = await setup();
    const path = resourcePath('Workflow', ns, 'w');
    // Deleted between our read (the cache) and our PATCH.
    ic.when = (verb, p) => verb === 'PATCH' && p === path;
    ic.interject = async () => void (await client.request('DELETE', path));
    await expect(source.addFinalizer(ref)).rejects.toThrow(/not found while adding our finalizer/);
  });

  it('a 404 for a live object (a CRD handler rebuilt answers so for a moment) is an error to retry (O6)', async () => {
    const { ns, source, ref } = await setup();
    const path = resourcePath('Workflow', ns, 'w');
    server.faults.failNext(1, 404, (r) => r.path === path);
    await expect(source.addFinalizer(ref)).rejects.toThrow(/not found while adding our finalizer/);
    // The retry the reconcile makes puts it in place.
    expect(await source.addFinalizer(ref)).toBe(true);
    expect((await getWorkflow(ns, 'w')).metadata.finalizers).toContain(FINALIZER);
  });

  it('addFinalizer is false, and writes nothing, for an object being deleted (O6)', async () => {
    const { ns, source, ic, ref } = await setup();
    const path = resourcePath('Workflow', ns, 'w');
    await client.request('PATCH', path, {
      contentType: 'application/merge-patch+json',
      body: { metadata: { finalizers: ['other.example/keep'] } },
    });
    // Deleted between our read (the cache) and our PATCH: 409, then the server says so.
    ic.when = (verb, p) => verb === 'PATCH' && p === path;
    ic.interject = async () => void (await client.request('DELETE', path));
    expect(await source.addFinalizer(ref)).toBe(false);
    expect(ic.conflicts).toBe(1);
    // Seen deleting in the cache: no PATCH at all.
    await eventually(() => expect(source.get(ref)?.metadata.deletionTimestamp).toBeDefined());
    server.clearRequests();
    expect(await source.addFinalizer(ref)).toBe(false);
    expect(server.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    expect((await getWorkflow(ns, 'w')).metadata.finalizers).toEqual(['other.example/keep']);
  });

  it('addFinalizer rejects for an object deleted before its conflict re-read (O6)', async () => {
    const { ns, source, ic, ref } = await setup();
    const path = resourcePath('Workflow', ns, 'w');
    // Another writer moves the object on (our PATCH: 409), then deletes it before our
    // re-read (404).
    ic.when = (verb, p) => verb === 'PATCH' && p === path;
    ic.interject = async () => {
      await client.request('PATCH', path, {
        contentType: 'application/merge-patch+json',
        body: { spec: { description: 'moved on' } },
      });
      ic.when = (verb, p) => verb === 'GET' && p === path;
      ic.interject = async () => void (await client.request('DELETE', path));
    };
    await expect(source.addFinalizer(ref)).rejects.toThrow(/not found/);
    expect(ic.conflicts).toBe(1);
  });

  it('removes only our finalizer; the object is deleted once it was the last (DELETED seen)', async () => {
    const { ns, source, changes, ref } = await setup();
    await source.addFinalizer(ref);
    await client.request('DELETE', resourcePath('Workflow', ns, 'w'));
    await eventually(() => expect(source.get(ref)?.metadata.deletionTimestamp).toBeDefined());
    changes.length = 0;
    await source.removeFinalizer(ref);
    await eventually(() => expect(source.get(ref)).toBeUndefined());
    expect(seen(changes, 'Workflow', 'w')).toBe(true);
    await expect(getWorkflow(ns, 'w')).rejects.toMatchObject({ code: 404 });
    // Cleanup of a gone object is idempotent.
    await source.removeFinalizer(ref);
  });

  it('leaves foreign finalizers in place', async () => {
    const { ns, source, ref } = await setup();
    await client.request('PATCH', resourcePath('Workflow', ns, 'w'), {
      contentType: 'application/merge-patch+json',
      body: { metadata: { finalizers: ['other.example/keep'] } },
    });
    await eventually(() =>
      expect(source.get(ref)?.metadata.finalizers).toEqual(['other.example/keep']),
    );
    await source.addFinalizer(ref);
    await source.removeFinalizer(ref);
    expect((await getWorkflow(ns, 'w')).metadata.finalizers).toEqual(['other.example/keep']);
  });
});
