// The operator's reconcile loop (operator/reconcile) over the Kubernetes source,
// against the in-memory API server: level-based and idempotent (O1), finalizer and
// cleanup with backoff (O6), convergence after a watch outage (O7). Assertions are on
// the state of the world: the API objects, the server's resourceVersion, the stores.
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import type { KubeClient } from '../../operator/controller/kube-client.ts';
import { OperatorMetrics } from '../../operator/controller/metrics.ts';
import { refKey } from '../../operator/reconcile/refs.ts';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import { KubernetesSource, resourcePath } from '../../operator/sources/kubernetes.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { GatewayReporter } from '../../runtime/gateway/reporter.ts';
import { RouteTable } from '../../runtime/gateway/route-table.ts';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually, sleep } from '../support/eventually.ts';

let cluster: TestCluster;
let server: KubeApiServer;
let kc: KubeConfig;
let client: KubeClient;
let nsCounter = 0;
const loops: ReconcileLoop[] = [];
/** The in-process gateways that serve what the loops deploy, closed after each test. */
const gatewaysToClose: (() => Promise<void>)[] = [];

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  ({ server, client, kc } = cluster);
});

afterEach(async () => {
  server.faults.clear();
  await Promise.all(loops.splice(0).map((l) => l.stop(1000)));
  await Promise.all(gatewaysToClose.splice(0).map((close) => close()));
});

afterAll(() => cluster.close());

/** Wait until the server's resourceVersion has not moved for `quietMs`. */
async function quiesce(quietMs = 400): Promise<number> {
  let rv = server.resourceVersion();
  let since = Date.now();
  while (Date.now() - since < quietMs) {
    await sleep(25);
    const now = server.resourceVersion();
    if (now !== rv) {
      rv = now;
      since = Date.now();
    }
  }
  return rv;
}

interface Obj {
  metadata: {
    name: string;
    resourceVersion: string;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
  status?: { url?: string; conditions?: { type: string; status: string; reason: string }[] };
}

class FlakyRoutes extends MemoryRecordStore<RouteRecord> {
  failDeletes = 0;
  /** Every key ever written. */
  readonly puts: string[] = [];
  override put(key: string, value: RouteRecord): Promise<void> {
    this.puts.push(key);
    return super.put(key, value);
  }
  override delete(key: string): Promise<void> {
    if (this.failDeletes > 0) {
      this.failDeletes--;
      return Promise.reject(new Error('route store unavailable'));
    }
    return super.delete(key);
  }
}

class RecordingRegistry extends MemoryRecordStore<WorkflowRegistration> {
  /** Every key ever written. */
  readonly puts: string[] = [];
  override put(key: string, value: WorkflowRegistration): Promise<void> {
    this.puts.push(key);
    return super.put(key, value);
  }
}

async function newNamespace(): Promise<string> {
  const ns = `op${++nsCounter}`;
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
  return ns;
}

const createWorkflow = (ns: string, metadata: { finalizers?: string[] } = {}) =>
  client.request('POST', resourcePath('Workflow', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'hello', namespace: ns, ...metadata },
      spec: {
        application: 'demo',
        environment: 'development',
        nodes: [{ id: 'greet', type: 'transform', expression: '{ "greeting": "hi" }' }],
      },
    },
  });

const createTrigger = (ns: string, metadata: { finalizers?: string[] } = {}) =>
  client.request('POST', resourcePath('WebhookTrigger', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'WebhookTrigger',
      metadata: { name: 'hello', namespace: ns, ...metadata },
      spec: {
        workflowRef: { name: 'hello' },
        pathSegment: 'default',
        methods: ['POST'],
        response: { mode: 'immediateAck' },
      },
    },
  });

async function setup() {
  const ns = await newNamespace();
  await createWorkflow(ns);
  await createTrigger(ns);
  const { routes, workflows, registry, loop } = await startLoop(ns);
  const trigger = { kind: 'WebhookTrigger' as const, namespace: ns, name: 'hello' };
  const getTrigger = () => client.request<Obj>('GET', resourcePath('WebhookTrigger', ns, 'hello'));
  const ready = (o: Obj) => o.status?.conditions?.find((c) => c.type === 'Ready')?.status;
  await eventually(async () => {
    const t = await getTrigger();
    expect(ready(t)).toBe('True');
    expect(t.metadata.finalizers).toContain(FINALIZER);
  });
  return { ns, routes, workflows, registry, loop, trigger, getTrigger, ready };
}

/** The reconcile loop over namespace `ns`, with one in-process gateway serving its stores. */
async function startLoop(ns: string) {
  const routes = new FlakyRoutes();
  const workflows = new RecordingRegistry();
  // One gateway serves the stores and reports what it serves (Deployed reads it).
  const gateways = new MemoryGatewayStore();
  const table = await RouteTable.create(routes, workflows);
  const reporter = new GatewayReporter({ store: gateways, table });
  await reporter.start();
  gatewaysToClose.push(async () => {
    await reporter.close();
    table.close();
    gateways.close();
  });
  const registry = new Registry();
  const metrics = new OperatorMetrics(registry);
  const source = new KubernetesSource({
    kubeConfig: kc,
    namespace: ns,
    restartBackoff: { initialMs: 50, maxMs: 200 },
    maxReconnectDelayMs: 50,
  });
  const loop = await startReconcileLoop({
    source,
    routes,
    workflows,
    gateways,
    baseUrl: 'http://hooks.test',
    controller: { workers: 2, metrics },
  });
  loops.push(loop);
  return { routes, workflows, registry, loop };
}

describe('operator over the Kubernetes source', () => {
  it('reconciles to Ready with the finalizer, the route and the URL', async () => {
    const { ns, routes, getTrigger } = await setup();
    const t = await getTrigger();
    expect(t.status?.url).toBe(`http://hooks.test/webhook/${ns}_development_hello/default`);
    expect((await routes.get(`${ns}/hello`))?.path).toBe(
      `/webhook/${ns}_development_hello/default`,
    );
  });

  it('O1: enqueueing a key many times changes nothing and writes nothing', async () => {
    const { ns, loop, trigger, registry } = await setup();
    const rv = await quiesce();
    const reconciles = async () =>
      (await registry.getSingleMetricAsString('hookgate_operator_reconcile_total'))
        .split('\n')
        .filter((l) => l.startsWith('hookgate_operator_reconcile_total{'))
        .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
    const before = await reconciles();
    server.clearRequests();
    for (let i = 0; i < 10; i++) {
      loop.controller.enqueue(refKey(trigger));
      loop.controller.enqueue(refKey({ ...trigger, kind: 'Workflow' }));
      await sleep(i % 3 === 0 ? 30 : 0);
    }
    await eventually(async () => expect(await reconciles()).toBeGreaterThanOrEqual(before + 2));
    await quiesce();
    expect(server.resourceVersion()).toBe(rv);
    expect(server.requests.filter((r) => r.method !== 'GET')).toEqual([]);
    expect(ns).toBeTruthy();
  });

  it('O6: a failing cleanup keeps the object and retries with backoff; success deletes it', async () => {
    const { ns, routes, getTrigger, registry } = await setup();
    routes.failDeletes = 4;
    await client.request('DELETE', resourcePath('WebhookTrigger', ns, 'hello'));
    await eventually(() => expect(routes.failDeletes).toBe(0));
    await eventually(async () => expect(getTrigger()).rejects.toMatchObject({ code: 404 }));
    expect(await routes.get(`${ns}/hello`)).toBeUndefined();
    const errors = await registry.getSingleMetricAsString(
      'hookgate_operator_reconcile_errors_total',
    );
    expect(errors).toMatch(
      /hookgate_operator_reconcile_errors_total\{controller="hookgate"\} [4-9]/,
    );
  });

  it('O6: while cleanup fails the object lingers with its finalizer', async () => {
    const { ns, routes, getTrigger } = await setup();
    routes.failDeletes = 1_000_000;
    await client.request('DELETE', resourcePath('WebhookTrigger', ns, 'hello'));
    await sleep(500);
    const t = await getTrigger();
    expect(t.metadata.deletionTimestamp).toBeDefined();
    expect(t.metadata.finalizers).toContain(FINALIZER);
    // Status on the cleanup path too: the object says why it lingers.
    expect(t.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'StoreError',
    });
    routes.failDeletes = 0;
    // Backoff has grown (5 ms·2^n); it still converges once the store is back.
    await eventually(async () => expect(getTrigger()).rejects.toMatchObject({ code: 404 }));
  });

  it('O7: a spec change made during a watch outage (500) is reconciled', async () => {
    const { ns, getTrigger } = await setup();
    server.faults.delayNext(1, 200, (r) => r.watch && r.path.endsWith('/webhooktriggers'));
    server.faults.failNext(1, 500, (r) => r.watch && r.path.endsWith('/webhooktriggers'));
    server.closeWatches();
    await client.request('PATCH', resourcePath('WebhookTrigger', ns, 'hello'), {
      contentType: 'application/merge-patch+json',
      body: { spec: { pathSegment: 'ingest' } },
    });
    await eventually(async () =>
      expect((await getTrigger()).status?.url).toBe(
        `http://hooks.test/webhook/${ns}_development_hello/ingest`,
      ),
    );
  });
});

describe('O6: nothing is deployed for an object deleted under its finalizer write', () => {
  const FOREIGN = 'other.example/keep';
  const isPatchOf = (kind: 'Workflow' | 'WebhookTrigger', ns: string) => {
    const path = resourcePath(kind, ns, 'hello');
    return (r: { method: string; path: string }) => r.method === 'PATCH' && r.path === path;
  };

  /**
   * Hold our next finalizer PATCH of `kind` hello, delete the object while it is held,
   * and wait for the PATCH's answer (404 when the object is gone, 409 when it is being
   * deleted) and for the reconciles that follow.
   */
  async function deleteUnderFinalizerPatch(
    kind: 'Workflow' | 'WebhookTrigger',
    ns: string,
    create: () => Promise<unknown>,
  ): Promise<number> {
    const isPatch = isPatchOf(kind, ns);
    server.clearRequests();
    server.faults.delayNext(1, 500, isPatch);
    await create();
    // Logged on arrival: the PATCH is now held by the server.
    await eventually(() => expect(server.requests.some(isPatch)).toBe(true));
    await client.request('DELETE', resourcePath(kind, ns, 'hello'));
    const patch = await eventually(() => {
      const answered = server.requests.find((r) => isPatch(r) && r.status !== 0);
      expect(answered).toBeDefined();
      return answered?.status ?? 0;
    });
    await quiesce();
    return patch;
  }

  it('a trigger deleted while its finalizer PATCH is in flight (404): no route is ever written', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns);
    const { routes } = await startLoop(ns);
    const status = await deleteUnderFinalizerPatch('WebhookTrigger', ns, () => createTrigger(ns));
    expect(status).toBe(404);
    expect(routes.puts).toEqual([]);
    expect(await routes.get(`${ns}/hello`)).toBeUndefined();
    await expect(
      client.request('GET', resourcePath('WebhookTrigger', ns, 'hello')),
    ).rejects.toMatchObject({ code: 404 });
  });

  it('a trigger being deleted (another finalizer holds it) when our PATCH lands: no route, no finalizer of ours', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns);
    const { routes } = await startLoop(ns);
    const status = await deleteUnderFinalizerPatch('WebhookTrigger', ns, () =>
      createTrigger(ns, { finalizers: [FOREIGN] }),
    );
    expect(status).toBe(409);
    expect(routes.puts).toEqual([]);
    expect(await routes.get(`${ns}/hello`)).toBeUndefined();
    const path = resourcePath('WebhookTrigger', ns, 'hello');
    const t = await client.request<Obj>('GET', path);
    expect(t.metadata.deletionTimestamp).toBeDefined();
    expect(t.metadata.finalizers).toEqual([FOREIGN]);
    // The other finalizer goes: nothing of ours keeps the object.
    await client.request('PATCH', path, {
      contentType: 'application/merge-patch+json',
      body: { metadata: { finalizers: null } },
    });
    await eventually(async () =>
      expect(client.request('GET', path)).rejects.toMatchObject({ code: 404 }),
    );
    expect(routes.puts).toEqual([]);
  });

  it('a workflow deleted while its finalizer PATCH is in flight (404): it is never registered', async () => {
    const ns = await newNamespace();
    const { workflows } = await startLoop(ns);
    const status = await deleteUnderFinalizerPatch('Workflow', ns, () => createWorkflow(ns));
    expect(status).toBe(404);
    expect(workflows.puts).toEqual([]);
    expect(await workflows.list()).toEqual([]);
  });

  it('a live trigger whose finalizer PATCH answers 404 once is deployed all the same (retried)', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns);
    const { routes } = await startLoop(ns);
    server.faults.failNext(1, 404, isPatchOf('WebhookTrigger', ns));
    await createTrigger(ns);
    await eventually(async () => expect(await routes.get(`${ns}/hello`)).toBeDefined(), 15_000);
    const t = await client.request<Obj>('GET', resourcePath('WebhookTrigger', ns, 'hello'));
    expect(t.metadata.finalizers).toHaveLength(1);
  });

  it('a workflow being deleted when our PATCH lands: never registered, no finalizer of ours', async () => {
    const ns = await newNamespace();
    const { workflows } = await startLoop(ns);
    const status = await deleteUnderFinalizerPatch('Workflow', ns, () =>
      createWorkflow(ns, { finalizers: [FOREIGN] }),
    );
    expect(status).toBe(409);
    expect(workflows.puts).toEqual([]);
    const w = await client.request<Obj>('GET', resourcePath('Workflow', ns, 'hello'));
    expect(w.metadata.finalizers).toEqual([FOREIGN]);
  });
});

describe('read your own writes: reconciles while the informer lags behind them', () => {
  it('a trigger whose informer has not seen its first status is not set back to Unknown', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns);
    const { loop } = await startLoop(ns);
    const trigger = { kind: 'WebhookTrigger' as const, namespace: ns, name: 'hello' };
    const statusPath = `${resourcePath('WebhookTrigger', ns, 'hello')}/status`;
    // The first status write of the trigger is held a moment; meanwhile every watch
    // stream ends and cannot come back for 3 s, so the cache keeps the trigger as it was
    // created (no status, no finalizer) while that reconcile and the next ones write.
    let held = false;
    server.faults.delayNext(1, 300, (r) => {
      const match = r.method === 'PUT' && r.path === statusPath;
      if (match) held = true;
      return match;
    });
    server.clearRequests();
    await createTrigger(ns);
    await eventually(() => expect(held).toBe(true));
    server.faults.delayNext(20, 3000, (r) => r.watch);
    server.closeWatches();
    const written = () =>
      server.requests
        .filter((r) => r.method === 'PUT' && r.path === statusPath && r.status === 200)
        .map(
          (r) =>
            (JSON.parse(r.body ?? '{}') as Obj).status?.conditions?.map(
              (c) => `${c.type}=${c.status}`,
            ) ?? [],
        );
    // The first reconcile is done: its status (past Unknown) is on the server.
    await eventually(() => expect(written().length).toBeGreaterThanOrEqual(2));
    loop.controller.enqueue(refKey(trigger));
    await sleep(500);
    const [first, ...later] = written();
    expect(first?.every((c) => c.endsWith('=Unknown'))).toBe(true);
    // Once the conditions were computed, no write sets them back to Unknown.
    for (const conditions of later)
      expect(conditions.filter((c) => c.endsWith('=Unknown'))).toEqual([]);
  });
});
