// Deployed means served: a trigger is Deployed (and Ready) only when every live gateway
// serves its current generation, with its workflow; status says why not (NoGateway,
// GatewayPending) and asks to be looked at again. A failing store leaves
// Ready=False/StoreError behind and the reconcile fails, so it is retried.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryGatewayStore } from '../../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../../api/records/records.ts';
import type { Condition } from '../../../api/v1alpha1/index.ts';
import { Reconciler } from '../../../operator/reconcile/reconciler.ts';
import { DirectorySource } from '../../../operator/sources/directory.ts';
import type { ObjectRef } from '../../../operator/sources/ports.ts';
import { reportServing } from '../../support/gateways.ts';
import { manifestDir, trigger, workflow } from '../../support/manifests.ts';

type Dir = Awaited<ReturnType<typeof manifestDir>>;
let dir: Dir;
let source: DirectorySource;
let routes: FlakyStore<RouteRecord>;
let workflows: FlakyStore<WorkflowRegistration>;
let gateways: MemoryGatewayStore;
let reconciler: Reconciler;
let now: number;

/** A memory store that fails every call while `down` is set, as Redis would. */
class FlakyStore<T> extends MemoryRecordStore<T> {
  down: Error | undefined;
  override put(key: string, value: T) {
    return this.down ? Promise.reject(this.down) : super.put(key, value);
  }
  override get(key: string) {
    return this.down ? Promise.reject(this.down) : super.get(key);
  }
  override delete(key: string) {
    return this.down ? Promise.reject(this.down) : super.delete(key);
  }
  override list() {
    return this.down ? Promise.reject(this.down) : super.list();
  }
}

const T = (name: string): ObjectRef => ({ kind: 'WebhookTrigger', namespace: 'default', name });
const W = (name: string): ObjectRef => ({ kind: 'Workflow', namespace: 'default', name });
const conditions = (ref: ObjectRef) =>
  Object.fromEntries(
    ((source.get(ref)?.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).map(
      (c) => [c.type, c],
    ),
  );
const summary = (ref: ObjectRef) =>
  Object.fromEntries(
    Object.values(conditions(ref)).map((c) => [c.type, `${c.status}/${c.reason}`]),
  );

async function load(...docs: object[]) {
  await dir.write('all.yaml', ...docs);
  await source.reload();
}

/** Reconcile every object once (workflows first). */
async function reconcileAll() {
  for (const w of source.list('Workflow')) await reconciler.reconcile(W(w.metadata.name));
  for (const t of source.list('WebhookTrigger')) await reconciler.reconcile(T(t.metadata.name));
}

const serve = (gateway: string) => reportServing(gateways, gateway, routes, workflows, 15_000);

beforeEach(async () => {
  dir = await manifestDir();
  source = new DirectorySource({ dir: dir.dir });
  await source.start(() => {});
  routes = new FlakyStore();
  workflows = new FlakyStore();
  now = Date.parse('2026-11-23T10:00:00Z');
  gateways = new MemoryGatewayStore({ now: () => now });
  reconciler = new Reconciler({
    source,
    routes,
    workflows,
    gateways,
    baseUrl: 'https://hooks.example.com',
    now: () => new Date(now),
  });
  await load(workflow('orders'), trigger('t', { pathSegment: 'in' }));
});
afterEach(async () => {
  gateways.close();
  await source.stop();
  await dir.cleanup();
});

describe('Deployed means served', () => {
  it('no gateway: Ready=False/NoGateway, and the reconcile asks to look again', async () => {
    await reconcileAll();
    // The second look at an unchanged wait: twice the first delay (recheck.ts).
    expect(await reconciler.reconcile(T('t'))).toEqual({ requeueAfterMs: 60_000 });
    expect(summary(T('t'))).toEqual({
      Valid: 'True/Succeeded',
      Deployed: 'False/NoGateway',
      WorkflowPublished: 'True/Published',
      Ready: 'False/NoGateway',
    });
    expect(conditions(T('t')).Deployed?.message).toBe(
      'No gateway is running to serve generation 1 of /webhook/default_production_orders/in',
    );
    // The route is written all the same: a gateway that starts serves it at once.
    expect(await routes.get('default/t')).toBeDefined();
    await serve('g1');
    expect(await reconciler.reconcile(T('t'))).toBeUndefined();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
  });

  it('served by 1 of 2 gateways: GatewayPending until both serve it', async () => {
    await serve('g2');
    await reconcileAll();
    await serve('g1');
    expect(await reconciler.reconcile(T('t'))).toEqual({ requeueAfterMs: 5_000 });
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'False/GatewayPending',
      Ready: 'False/GatewayPending',
    });
    expect(conditions(T('t')).Deployed?.message).toBe(
      'generation 1 of /webhook/default_production_orders/in served by 1 of 2 gateways',
    );
    await serve('g2');
    expect(await reconciler.reconcile(T('t'))).toBeUndefined();
    expect(summary(T('t'))).toMatchObject({ Deployed: 'True/Deployed', Ready: 'True/Succeeded' });
  });

  it('an edit flips Deployed back to GatewayPending until the gateways serve the new generation', async () => {
    await reconcileAll();
    await serve('g1');
    await reconcileAll();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
    await load(workflow('orders'), trigger('t', { pathSegment: 'in', methods: ['PUT'] }));
    await reconcileAll();
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'False/GatewayPending',
      Ready: 'False/GatewayPending',
    });
    expect(conditions(T('t')).Deployed?.message).toContain(
      'generation 2 of /webhook/default_production_orders/in served by 0 of 1 gateways',
    );
    await serve('g1');
    await reconcileAll();
    expect(summary(T('t'))).toMatchObject({ Deployed: 'True/Deployed', Ready: 'True/Succeeded' });
    expect(conditions(T('t')).Ready?.observedGeneration).toBe(2);
  });

  it('a gateway that has the route but not its workflow yet: WorkflowPublished=False/GatewayPending', async () => {
    await reconcileAll();
    await gateways.report({
      gateway: 'g1',
      revision: 1,
      full: true,
      serve: [['default/t', { generation: 1, workflow: false }]],
      drop: [],
      ttlMs: 15_000,
    });
    expect(await reconciler.reconcile(T('t'))).toEqual({ requeueAfterMs: 5_000 });
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'True/Deployed',
      WorkflowPublished: 'False/GatewayPending',
      Ready: 'False/GatewayPending',
    });
    expect(conditions(T('t')).WorkflowPublished?.message).toContain('loaded by 0 of 1 gateways');
    await serve('g1');
    await reconcileAll();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
  });

  it('a gateway that stops reporting stops counting once its report expires', async () => {
    await reconcileAll();
    await serve('g1');
    await serve('g2');
    await reconcileAll();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
    // g2 dies after a new generation is written: pending, served by g1 only.
    await load(workflow('orders'), trigger('t', { pathSegment: 'in', methods: ['PUT'] }));
    await reconcileAll();
    await serve('g1');
    await reconcileAll();
    expect(conditions(T('t')).Deployed?.message).toContain('served by 1 of 2 gateways');
    const changes: string[] = [];
    gateways.subscribe((c) => changes.push(c.kind));
    now += 10_000;
    await gateways.refresh('g1', 15_000);
    now += 6_000; // g2's report (15 s) has expired; g1's was refreshed
    gateways.poll();
    expect(changes).toEqual(['gateways']);
    expect(await gateways.live()).toEqual(['g1']);
    await reconcileAll();
    expect(summary(T('t'))).toMatchObject({ Deployed: 'True/Deployed', Ready: 'True/Succeeded' });
    now += 20_000;
    await reconcileAll();
    expect(summary(T('t')).Ready).toBe('False/NoGateway');
  });

  it('the change feed names the triggers to look at again', () => {
    expect(
      reconciler.servedChanged({ kind: 'routes', keys: ['default/t', 'default/gone'] }),
    ).toEqual([T('t')]);
    expect(reconciler.servedChanged({ kind: 'gateways' })).toEqual([T('t')]);
    expect(reconciler.servedChanged({ kind: 'resync' })).toEqual([W('orders'), T('t')]);
  });
});

describe('status on every exit path', () => {
  it('a route store that fails: Ready=False/StoreError with the message, the reconcile fails; it recovers', async () => {
    await serve('g1');
    routes.down = new Error('connect ECONNREFUSED redis://admin:s3cret@127.0.0.1:6379');
    await reconciler.reconcile(W('orders'));
    await expect(reconciler.reconcile(T('t'))).rejects.toThrow('ECONNREFUSED');
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'False/StoreError',
      Ready: 'False/StoreError',
    });
    const message = conditions(T('t')).Ready?.message ?? '';
    expect(message).toContain('Cannot deploy the route: connect ECONNREFUSED');
    expect(message).not.toContain('s3cret');
    routes.down = undefined;
    await reconcileAll();
    await serve('g1');
    await reconcileAll();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
  });

  it('a workflow registry that fails: both kinds say StoreError, and recover', async () => {
    await serve('g1');
    workflows.down = new Error('Connection is closed.');
    await expect(reconciler.reconcile(W('orders'))).rejects.toThrow('Connection is closed.');
    expect(summary(W('orders'))).toMatchObject({
      Published: 'False/StoreError',
      Ready: 'False/StoreError',
    });
    expect(conditions(W('orders')).Ready?.message).toBe(
      'Cannot write the workflow registry: Connection is closed.',
    );
    await expect(reconciler.reconcile(T('t'))).rejects.toThrow('Connection is closed.');
    expect(summary(T('t'))).toMatchObject({
      WorkflowPublished: 'False/StoreError',
      Ready: 'False/StoreError',
    });
    workflows.down = undefined;
    await reconcileAll();
    await serve('g1');
    await reconcileAll();
    expect(summary(W('orders')).Ready).toBe('True/Succeeded');
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
  });

  it('gateway reports that cannot be read: StoreError', async () => {
    const failing = new Reconciler({
      source,
      routes,
      workflows,
      gateways: { served: () => Promise.reject(new Error('READONLY You cannot write')) },
      baseUrl: 'https://hooks.example.com',
    });
    await failing.reconcile(W('orders'));
    await expect(failing.reconcile(T('t'))).rejects.toThrow('READONLY');
    expect(summary(T('t')).Ready).toBe('False/StoreError');
  });
});
