// Routes and workflow registrations whose object is gone for good (its finalizer
// stripped while no operator ran, `kubectl delete --force` without one) are swept when
// the reconcile loop starts, against the in-memory API server: only in the namespaces
// the source watches, and never a record whose object exists but is not in the cache
// yet (written by another operator for an object created after our initial list).
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { API_VERSION, FINALIZER } from '../../api/v1alpha1/index.ts';
import {
  KubeClient,
  PatchType,
  type RequestOptions,
  type Verb,
} from '../../operator/controller/kube-client.ts';
import { Manager } from '../../operator/controller/manager.ts';
import { sweepOrphans } from '../../operator/reconcile/orphans.ts';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import { directoryUid } from '../../operator/sources/directory.ts';
import { KubernetesSource, resourcePath } from '../../operator/sources/kubernetes.ts';
import type { ObjectRef, ResourceSource } from '../../operator/sources/ports.ts';
import { eventually } from '../support/eventually.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

let cluster: TestCluster;
let kc: KubeConfig;
let client: KubeClient;
let nsCounter = 0;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  ({ client, kc } = cluster);
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(() => cluster.close());

/** A route store that records deletes, and can run something when it is listed. */
class Routes extends MemoryRecordStore<RouteRecord> {
  readonly deletes: string[] = [];
  onList: (() => Promise<void>) | undefined;
  override delete(key: string): Promise<void> {
    this.deletes.push(key);
    return super.delete(key);
  }
  override async deleteIf(key: string, expected: RouteRecord): Promise<boolean> {
    const deleted = await super.deleteIf(key, expected);
    if (deleted) this.deletes.push(key);
    return deleted;
  }
  override async list(): Promise<RouteRecord[]> {
    const hook = this.onList;
    this.onList = undefined;
    await hook?.();
    return super.list();
  }
}

async function newNamespace(): Promise<string> {
  const name = `sw${++nsCounter}`;
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name } } });
  return name;
}

const createWorkflow = (ns: string, name = 'hello') =>
  client.request('POST', resourcePath('Workflow', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      metadata: { name, namespace: ns },
      spec: {
        application: 'demo',
        environment: 'development',
        nodes: [{ id: 'greet', type: 'transform', expression: '{ "greeting": "hi" }' }],
      },
    },
  });

const createTrigger = (ns: string, name: string, pathSegment = name) =>
  client.request('POST', resourcePath('WebhookTrigger', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'WebhookTrigger',
      metadata: { name, namespace: ns },
      spec: {
        workflowRef: { name: 'hello' },
        pathSegment,
        methods: ['POST'],
        response: { mode: 'immediateAck' },
      },
    },
  });

/** Take the object away for good while no operator runs: no finalizer, then delete. */
async function forceDelete(kind: 'Workflow' | 'WebhookTrigger', ns: string, name: string) {
  const path = resourcePath(kind, ns, name);
  await client.request('PATCH', path, {
    body: { metadata: { finalizers: null } },
    contentType: PatchType.merge,
  });
  await client.request('DELETE', path);
}

/** A route as an operator writes it, for a trigger `ns/name` (which may not exist). */
function route(ns: string, name: string): RouteRecord {
  const workflowId = `${ns}_development_hello`;
  return {
    key: `${ns}/${name}`,
    namespace: ns,
    name,
    uid: `uid-${ns}-${name}`,
    generation: 1,
    workflowId,
    path: `/webhook/${workflowId}/${name}`,
    application: 'demo',
    environment: 'development',
    spec: {
      workflowRef: { name: 'hello' },
      pathSegment: name,
      methods: ['POST'],
      response: { mode: 'immediateAck' },
    } as RouteRecord['spec'],
    credentials: {},
  };
}

interface Stores {
  routes: Routes;
  workflows: MemoryRecordStore<WorkflowRegistration>;
}

const newStores = (): Stores => ({ routes: new Routes(), workflows: new MemoryRecordStore() });

const refKey = (ref: ObjectRef) => `${ref.kind}/${ref.namespace}/${ref.name}`;

/**
 * The Kubernetes source with an informer that lags behind for the objects in `hidden`:
 * not in the cache, their events held back, until `catchUp()`.
 */
class LaggingSource implements ResourceSource {
  readonly hidden = new Set<string>();
  readonly #inner: KubernetesSource;
  #held: ObjectRef[] = [];
  #onChange: (ref: ObjectRef) => void = () => {};

  constructor(inner: KubernetesSource) {
    this.#inner = inner;
  }

  catchUp(): void {
    this.hidden.clear();
    for (const ref of this.#held.splice(0)) this.#onChange(ref);
  }

  start(
    onChange: (ref: ObjectRef) => void,
    onSecretAccess?: (namespace: string | undefined) => void,
  ): Promise<void> {
    this.#onChange = onChange;
    return this.#inner.start((ref) => {
      if (this.hidden.has(refKey(ref))) this.#held.push(ref);
      else onChange(ref);
    }, onSecretAccess);
  }
  get(ref: ObjectRef) {
    return this.hidden.has(refKey(ref)) ? undefined : this.#inner.get(ref);
  }
  list(kind: 'Workflow' | 'WebhookTrigger') {
    return this.#inner
      .list(kind)
      .filter(
        (o) => !this.hidden.has(`${kind}/${o.metadata.namespace ?? 'default'}/${o.metadata.name}`),
      );
  }
  get namespaces() {
    return this.#inner.namespaces;
  }
  listFresh(kind: 'Workflow' | 'WebhookTrigger') {
    return this.#inner.listFresh(kind);
  }
  mayHaveWritten(ref: ObjectRef, uid: string) {
    return this.#inner.mayHaveWritten(ref, uid);
  }
  get secretSelector() {
    return this.#inner.secretSelector;
  }
  getSecret(namespace: string, name: string) {
    return this.#inner.getSecret(namespace, name);
  }
  secretsWatchedIn(namespace: string) {
    return this.#inner.secretsWatchedIn(namespace);
  }
  secretsForbiddenIn(namespace: string) {
    return this.#inner.secretsForbiddenIn(namespace);
  }
  writeStatus(ref: ObjectRef, status: unknown) {
    return this.#inner.writeStatus(ref, status);
  }
  addFinalizer(ref: ObjectRef) {
    return this.#inner.addFinalizer(ref);
  }
  removeFinalizer(ref: ObjectRef) {
    return this.#inner.removeFinalizer(ref);
  }
  stop() {
    return this.#inner.stop();
  }
}

const kubernetesSource = (namespace?: string) =>
  new KubernetesSource({
    kubeConfig: kc,
    ...(namespace ? { namespace } : {}),
    restartBackoff: { initialMs: 50, maxMs: 200 },
    maxReconnectDelayMs: 50,
  });

/** The reconcile loop over `namespace` (all when undefined), on `stores`. */
async function startLoop(stores: Stores, namespace?: string, source?: ResourceSource) {
  const logs: { msg: string; fields?: object }[] = [];
  const gateways = new MemoryGatewayStore();
  const loop: ReconcileLoop = await startReconcileLoop({
    source: source ?? kubernetesSource(namespace),
    ...stores,
    gateways,
    baseUrl: 'http://hooks.test',
    controller: { workers: 2, log: (msg, fields) => logs.push({ msg, fields }) },
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await loop.stop(1000);
    gateways.close();
  };
  cleanups.push(stop);
  const deletions = () => logs.filter((l) => l.msg.startsWith('Deleted an orphaned'));
  return { loop, logs, deletions, stop };
}

describe('orphaned routes and registrations are swept at start', () => {
  it('a trigger and a workflow force-deleted while the operator was down leave nothing behind', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns);
    await createTrigger(ns, 'gone');
    await createTrigger(ns, 'kept');
    const stores = newStores();
    const first = await startLoop(stores, ns);
    await eventually(async () => {
      expect(await stores.routes.get(`${ns}/gone`)).toBeDefined();
      expect(await stores.routes.get(`${ns}/kept`)).toBeDefined();
      expect(await stores.workflows.get(`${ns}_development_hello`)).toBeDefined();
    });
    await first.loop.swept;
    await first.stop();
    expect(first.deletions()).toEqual([]);

    // While no operator runs: the trigger `gone` is force-deleted; so is the workflow,
    // after `kept` moved to another one (its route must stay, rewritten).
    await forceDelete('WebhookTrigger', ns, 'gone');
    await createWorkflow(ns, 'other');
    await client.request('PATCH', resourcePath('WebhookTrigger', ns, 'kept'), {
      body: { spec: { workflowRef: { name: 'other' } } },
      contentType: PatchType.merge,
    });
    await forceDelete('Workflow', ns, 'hello');

    const second = await startLoop(stores, ns);
    expect(await second.loop.swept).toEqual({
      routes: [`${ns}/gone`],
      workflows: [`${ns}_development_hello`],
    });
    expect(await stores.routes.get(`${ns}/gone`)).toBeUndefined();
    expect(await stores.workflows.get(`${ns}_development_hello`)).toBeUndefined();
    await eventually(async () => {
      expect((await stores.routes.get(`${ns}/kept`))?.workflowId).toBe(`${ns}_development_other`);
    });
    // One log line per deletion, naming the record; nothing about the objects that exist.
    expect(second.deletions().map((l) => l.msg)).toEqual([
      `Deleted an orphaned route: no WebhookTrigger ${ns}/gone`,
      `Deleted an orphaned workflow registration: no Workflow ${ns}/hello`,
    ]);
    expect(second.deletions()[0]?.fields).toMatchObject({
      route: `${ns}/gone`,
      path: `/webhook/${ns}_development_hello/gone`,
    });
    expect(stores.routes.deletes.filter((k) => k !== `${ns}/gone`)).toEqual([]);
    // The trigger that remains still has its finalizer: the sweep touched no object.
    const kept = await client.request<{ metadata: { finalizers?: string[] } }>(
      'GET',
      resourcePath('WebhookTrigger', ns, 'kept'),
    );
    expect(kept.metadata.finalizers).toContain(FINALIZER);
  });

  it("a namespaced operator keeps another namespace's records", async () => {
    const mine = await newNamespace();
    const theirs = await newNamespace();
    const stores = newStores();
    // Neither trigger exists: one is our orphan, the other is none of our business.
    await stores.routes.put(`${mine}/ghost`, route(mine, 'ghost'));
    await stores.routes.put(`${theirs}/ghost`, route(theirs, 'ghost'));
    const theirRegistration: WorkflowRegistration = {
      workflowId: `${theirs}_development_hello`,
      namespace: theirs,
      name: 'hello',
      generation: 1,
      application: 'demo',
      environment: 'development',
      spec: { application: 'demo', environment: 'development', publish: true, nodes: [] },
    } as unknown as WorkflowRegistration;
    await stores.workflows.put(theirRegistration.workflowId, theirRegistration);

    const { loop, deletions } = await startLoop(stores, mine);
    expect(await loop.swept).toEqual({ routes: [`${mine}/ghost`], workflows: [] });
    expect(await stores.routes.get(`${theirs}/ghost`)).toBeDefined();
    expect(await stores.workflows.get(`${theirs}_development_hello`)).toBeDefined();
    expect(stores.routes.deletes).toEqual([`${mine}/ghost`]);
    expect(deletions()).toHaveLength(1);
  });

  it('a trigger created during the sweep keeps its route', async () => {
    const ns = await newNamespace();
    await createWorkflow(ns);
    const stores = newStores();
    await stores.routes.put(`${ns}/ghost`, route(ns, 'ghost')); // a real orphan
    const source = new LaggingSource(kubernetesSource(ns));
    // When the sweep reads the routes, another writer (the previous leader, a newer
    // operator) has just created a trigger and written its route: this loop's cache has
    // not seen the trigger yet.
    stores.routes.onList = async () => {
      source.hidden.add(`WebhookTrigger/${ns}/late`);
      await createTrigger(ns, 'late');
      await stores.routes.put(`${ns}/late`, route(ns, 'late'));
    };
    const { loop } = await startLoop(stores, ns, source);
    expect(await loop.swept).toEqual({ routes: [`${ns}/ghost`], workflows: [] });
    expect(stores.routes.deletes).toEqual([`${ns}/ghost`]);
    expect(await stores.routes.get(`${ns}/late`)).toBeDefined();
    // The cache catches up, and the loop takes the trigger over as its own.
    source.catchUp();
    await eventually(async () => {
      expect((await stores.routes.get(`${ns}/late`))?.uid).not.toBe(`uid-${ns}-late`);
    });
  });

  it('a route a folder wrote (hookgate dev on the same Redis): nothing is deleted', async () => {
    const ns = await newNamespace();
    const stores = newStores();
    await stores.routes.put(`${ns}/ghost`, route(ns, 'ghost')); // an orphan of ours
    const dev = {
      ...route(ns, 'dev'),
      uid: directoryUid(API_VERSION, 'WebhookTrigger', ns, 'dev'),
    };
    await stores.routes.put(dev.key, dev);
    const { loop, logs } = await startLoop(stores, ns);
    expect(await loop.swept).toEqual({ routes: [], workflows: [], refused: true });
    expect(stores.routes.deletes).toEqual([]);
    expect(logs.filter((l) => l.msg.startsWith('Not sweeping'))).toHaveLength(1);
  });

  it('an operator over every namespace sweeps them all', async () => {
    const a = await newNamespace();
    const b = await newNamespace();
    const stores = newStores();
    await stores.routes.put(`${a}/ghost`, route(a, 'ghost'));
    await stores.routes.put(`${b}/ghost`, route(b, 'ghost'));
    const { loop } = await startLoop(stores);
    const swept = await loop.swept;
    expect(swept?.routes).toEqual(expect.arrayContaining([`${a}/ghost`, `${b}/ghost`]));
    expect(await stores.routes.get(`${a}/ghost`)).toBeUndefined();
    expect(await stores.routes.get(`${b}/ghost`)).toBeUndefined();
  });
});

/**
 * A client whose next list of `path` (the fresh list) is answered by `answer` instead of
 * the API server; `pass` sends a request (with the options given) on to the server.
 */
class ScriptedClient extends KubeClient {
  script: {
    path: string;
    answer: (opts: RequestOptions, pass: (opts: RequestOptions) => Promise<unknown>) => unknown;
  }[] = [];
  override async request<T>(verb: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const i = verb === 'GET' ? this.script.findIndex((s) => s.path === path) : -1;
    if (i < 0) return super.request<T>(verb, path, opts);
    const [step] = this.script.splice(i, 1);
    return (await step!.answer(opts, (o) => super.request(verb, path, o))) as T;
  }
}

describe('the fresh list decides what is deleted: only a whole list counts', () => {
  async function setUp() {
    const ns = await newNamespace();
    await createWorkflow(ns);
    await createTrigger(ns, 'live');
    const scripted = new ScriptedClient(kc);
    const inner = new KubernetesSource({ kubeConfig: kc, namespace: ns, client: scripted });
    const source = new LaggingSource(inner);
    await source.start(() => {});
    cleanups.push(() => source.stop());
    // The cache lags behind for the live trigger: its route is a candidate.
    source.hidden.add(`WebhookTrigger/${ns}/live`);
    const stores = newStores();
    await stores.routes.put(`${ns}/live`, route(ns, 'live'));
    const sweep = () =>
      sweepOrphans({
        source,
        ...stores,
        enqueue: () => {},
        log: () => {},
        stopped: () => false,
      });
    return { ns, scripted, stores, sweep };
  }

  it('an answer that is not a list (a proxy page, a Status) is an error, not "no objects"', async () => {
    const { ns, scripted, stores, sweep } = await setUp();
    const path = resourcePath('WebhookTrigger', ns);
    scripted.script.push({ path, answer: () => '<html>Sign in</html>' });
    await expect(sweep()).rejects.toThrow(/not a list/);
    scripted.script.push({ path, answer: () => ({ kind: 'Status', status: 'Success' }) });
    await expect(sweep()).rejects.toThrow(/not a list/);
    expect(stores.routes.deletes).toEqual([]);
    expect(await stores.routes.get(`${ns}/live`)).toBeDefined();
  });

  it('a list cut into pages (metadata.continue) is read to its end', async () => {
    const { ns, scripted, stores, sweep } = await setUp();
    const path = resourcePath('WebhookTrigger', ns);
    const seen: (RequestOptions['query'] | undefined)[] = [];
    scripted.script.push(
      {
        path,
        answer: (opts) => {
          seen.push(opts.query);
          return { kind: 'WebhookTriggerList', metadata: { continue: 'page-2' }, items: [] };
        },
      },
      {
        path,
        answer: (opts, pass) => {
          seen.push(opts.query);
          return pass({}); // the rest: the whole list
        },
      },
    );
    expect(await sweep()).toEqual({ routes: [], workflows: [] });
    expect(seen).toEqual([undefined, { continue: 'page-2' }]);
    expect(stores.routes.deletes).toEqual([]);
  });
});

describe('only the leader sweeps: the Lease is read before each delete', () => {
  const leasePath = (name: string) =>
    `/apis/coordination.k8s.io/v1/namespaces/default/leases/${name}`;

  /** Another replica writes itself into the Lease, as a takeover after a freeze does. */
  async function takeLease(name: string, holder: string): Promise<void> {
    const lease = await client.request<{ metadata: object; spec: object }>('GET', leasePath(name));
    await client.request('PUT', leasePath(name), {
      body: { ...lease, spec: { ...lease.spec, holderIdentity: holder, leaseTransitions: 1 } },
    });
  }

  it('the Lease taken by another replica mid-sweep: no delete after that, and the replica stops leading', async () => {
    const ns = await newNamespace();
    const stores = newStores();
    const ghosts = ['ghost-a', 'ghost-b', 'ghost-c'];
    for (const name of ghosts) await stores.routes.put(`${ns}/${name}`, route(ns, name));
    const leaseName = `sweep-${ns}`;
    // Right after the first delete, another replica holds the Lease (this one has not
    // noticed: its next renewal round is a RetryPeriod away).
    const deleteRoute = stores.routes.deleteIf.bind(stores.routes);
    stores.routes.deleteIf = async (key, expected) => {
      const deleted = await deleteRoute(key, expected);
      if (stores.routes.deletes.length === 1) await takeLease(leaseName, 'b');
      return deleted;
    };
    const logs: { msg: string; fields?: object }[] = [];
    const lost: number[] = [];
    const gateways = new MemoryGatewayStore();
    let loop: ReconcileLoop | undefined;
    const manager = new Manager({
      leaderElection: {
        lock: { client, namespace: 'default', name: leaseName },
        identity: 'a',
        leaseDurationMs: 15_000,
        renewDeadlineMs: 10_000,
        retryPeriodMs: 2_000,
      },
      startLeading: async (_signal, leadership) => {
        loop = await startReconcileLoop({
          source: kubernetesSource(ns),
          ...stores,
          gateways,
          baseUrl: 'http://hooks.test',
          controller: { workers: 2, log: (msg, fields) => logs.push({ msg, fields }) },
          leadership,
        });
        return loop;
      },
      onLostLeadership: () => lost.push(Date.now()),
    });
    cleanups.push(async () => {
      await loop?.stop(1000);
      gateways.close();
    });
    const started = Date.now();
    manager.start();
    await eventually(() => expect(loop).toBeDefined());
    const swept = await loop!.swept;
    expect(swept).toEqual({ routes: [`${ns}/ghost-a`], workflows: [], leadershipLost: true });
    expect(stores.routes.deletes).toEqual([`${ns}/ghost-a`]);
    expect(await stores.routes.get(`${ns}/ghost-b`)).toBeDefined();
    expect(await stores.routes.get(`${ns}/ghost-c`)).toBeDefined();
    expect(logs.filter((l) => l.msg.startsWith('Stopped sweeping'))).toEqual([
      {
        msg: 'Stopped sweeping orphaned routes and registrations: this replica no longer leads',
        fields: { reason: 'the Lease is held by b', deletedRoutes: 1, deletedWorkflows: 0 },
      },
    ]);
    // The read that saw b ended the leadership then, not at the next renewal round.
    await eventually(() => expect(lost).toHaveLength(1));
    expect(lost[0]! - started).toBeLessThan(2_000);
    const lease = await client.request<{ spec: { holderIdentity: string } }>(
      'GET',
      leasePath(leaseName),
    );
    expect(lease.spec.holderIdentity).toBe('b');
  });
});

describe('a record written again between the Lease read and the delete is kept', () => {
  // A replica that passed its Lease read and froze before the delete (or whose read
  // raced a takeover) resumes and deletes: by then the new leader may have written
  // the key again, for an object created again under the name. The delete takes only
  // the record the sweep judged, as a Kubernetes delete precondition would.
  it('a route and a registration put again after the read stay; the rest is deleted', async () => {
    const ns = await newNamespace();
    const source = kubernetesSource(ns);
    await source.start(() => {});
    cleanups.push(() => source.stop());
    const stores = newStores();
    const registration = (name: string, generation: number): WorkflowRegistration => ({
      workflowId: `${ns}_development_${name}`,
      namespace: ns,
      name,
      generation,
      application: 'demo',
      environment: 'development',
      spec: { application: 'demo', environment: 'development', nodes: [] } as never,
    });
    await stores.routes.put(`${ns}/again`, route(ns, 'again'));
    await stores.routes.put(`${ns}/gone`, route(ns, 'gone'));
    await stores.workflows.put(`${ns}_development_again`, registration('again', 3));
    const rewrites: (() => Promise<void>)[] = [
      // Each Lease read is followed by another writer's put of that candidate's key.
      () => stores.routes.put(`${ns}/again`, { ...route(ns, 'again'), uid: 'uid-new' }),
      () => Promise.resolve(),
      () => stores.workflows.put(`${ns}_development_again`, registration('again', 1)),
    ];
    const logs: { msg: string; fields?: object }[] = [];
    const result = await sweepOrphans({
      source,
      ...stores,
      enqueue: () => {},
      log: (msg, fields) => logs.push({ msg, fields }),
      stopped: () => false,
      leadership: { confirm: () => (rewrites.shift() ?? (() => Promise.resolve()))() },
    });
    expect(result).toEqual({ routes: [`${ns}/gone`], workflows: [] });
    expect((await stores.routes.get(`${ns}/again`))?.uid).toBe('uid-new');
    expect(await stores.routes.get(`${ns}/gone`)).toBeUndefined();
    expect((await stores.workflows.get(`${ns}_development_again`))?.generation).toBe(1);
    expect(logs.filter((l) => l.msg.startsWith('Kept'))).toHaveLength(2);
  });
});
