// The sweep of orphaned records over the manifest folder (the embedded source, e.g.
// `hookgate dev` against shared Redis): a manifest taken out while no process ran
// leaves its route and registration behind until the next start sweeps them.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryGatewayStore } from '../../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../../api/records/records.ts';
import { FakeClock } from '../../../operator/controller/clock.ts';
import { sweepOrphans } from '../../../operator/reconcile/orphans.ts';
import { startReconcileLoop } from '../../../operator/reconcile/run.ts';
import { DirectorySource, directoryUid } from '../../../operator/sources/directory.ts';
import { API_VERSION } from '../../../api/v1alpha1/index.ts';
import { manifestDir, trigger, workflow } from '../../support/manifests.ts';

let dir: Awaited<ReturnType<typeof manifestDir>>;
let routes: MemoryRecordStore<RouteRecord>;
let workflows: MemoryRecordStore<WorkflowRegistration>;

beforeEach(async () => {
  dir = await manifestDir();
  routes = new MemoryRecordStore();
  workflows = new MemoryRecordStore();
});
afterEach(() => dir.cleanup());

async function run(): Promise<void> {
  const gateways = new MemoryGatewayStore();
  const loop = await startReconcileLoop({
    source: new DirectorySource({ dir: dir.dir }),
    routes,
    workflows,
    gateways,
    baseUrl: 'https://hooks.example.com',
  });
  await loop.swept;
  await loop.stop(1000);
  gateways.close();
}

describe('orphaned records over a manifest folder', () => {
  it('a manifest removed while nothing ran: its route and registration go at the next start', async () => {
    await dir.write('orders.yaml', workflow('orders'), trigger('t', { pathSegment: 'in' }));
    await dir.write(
      'billing.yaml',
      workflow('billing'),
      trigger('b', { workflowRef: { name: 'billing' } }),
    );
    await run();
    expect((await routes.list()).map((r) => r.key).sort()).toEqual(['default/b', 'default/t']);
    expect((await workflows.list()).map((w) => w.name).sort()).toEqual(['billing', 'orders']);

    await dir.remove('billing.yaml');
    await run();
    expect((await routes.list()).map((r) => r.key)).toEqual(['default/t']);
    expect((await workflows.list()).map((w) => w.name)).toEqual(['orders']);
  });

  it('records whose key is not what this operator writes for the object they name are kept (another version wrote them)', async () => {
    await dir.write(
      'billing.yaml',
      workflow('billing'),
      trigger('b', { workflowRef: { name: 'billing' } }),
    );
    await run();
    const route = (await routes.get('default/b')) as RouteRecord;
    const registration = (await workflows.list())[0] as WorkflowRegistration;
    await routes.put('v9:default/b', { ...route, key: 'v9:default/b' });
    await workflows.put('v9:billing', { ...registration, workflowId: 'v9:billing' });
    await dir.remove('billing.yaml');
    await run();
    expect((await routes.list()).map((r) => r.key)).toEqual(['v9:default/b']);
    expect((await workflows.list()).map((w) => w.workflowId)).toEqual(['v9:billing']);
  });

  it('the folder watches every namespace; records of objects that exist are left alone', async () => {
    await dir.write('orders.yaml', workflow('orders'), trigger('t', { pathSegment: 'in' }));
    const source = new DirectorySource({ dir: dir.dir });
    await source.start(() => {});
    expect(source.namespaces).toBe('all');
    expect(await source.listFresh('WebhookTrigger')).toEqual([
      { kind: 'WebhookTrigger', namespace: 'default', name: 't' },
    ]);
    await run();
    const logs: string[] = [];
    const before = await routes.list();
    await routes.put('elsewhere/x', {
      ...before[0]!,
      key: 'elsewhere/x',
      namespace: 'elsewhere',
      name: 'x',
      // As a folder that held it wrote it.
      uid: directoryUid(API_VERSION, 'WebhookTrigger', 'elsewhere', 'x'),
    });
    const result = await sweepOrphans({
      source,
      routes,
      workflows,
      enqueue: () => {},
      log: (msg) => logs.push(msg),
      stopped: () => false,
    });
    expect(result).toEqual({ routes: ['elsewhere/x'], workflows: [] });
    expect(logs).toEqual(['Deleted an orphaned route: no WebhookTrigger elsewhere/x']);
    expect(await routes.list()).toEqual(before);
    await source.stop();
  });

  it('a sweep that cannot read the store is retried with backoff until it gets through', async () => {
    await dir.write('orders.yaml', workflow('orders'));
    const ghost = { namespace: 'default', name: 'gone', workflowId: 'default_production_gone' };
    await workflows.put(ghost.workflowId, ghost as WorkflowRegistration);
    let failures = 2;
    // Only the sweep lists the routes (the reconciles read the registry's list too).
    const list = routes.list.bind(routes);
    routes.list = () =>
      failures-- > 0 ? Promise.reject(new Error('Connection is closed.')) : list();
    const clock = new FakeClock();
    const logs: { msg: string; fields?: object }[] = [];
    const gateways = new MemoryGatewayStore();
    const loop = await startReconcileLoop({
      source: new DirectorySource({ dir: dir.dir }),
      routes,
      workflows,
      gateways,
      baseUrl: 'https://hooks.example.com',
      controller: { clock },
      log: (msg, fields) => logs.push({ msg, ...(fields ? { fields } : {}) }),
    });
    const failed = () => logs.filter((l) => l.msg.startsWith('Sweep of orphaned')).length;
    await vi.waitFor(() => expect(failed()).toBe(1));
    expect(logs[0]?.fields).toMatchObject({ error: 'Connection is closed.', inMs: 1000 });
    clock.step(1000);
    await vi.waitFor(() => expect(failed()).toBe(2));
    expect(logs[1]?.fields).toMatchObject({ inMs: 2000 });
    clock.step(2000);
    expect(await loop.swept).toEqual({ routes: [], workflows: ['default_production_gone'] });
    await loop.stop(1000);
    gateways.close();
  });

  it('routes a cluster operator wrote (hookgate dev on its Redis): nothing is deleted, and it is said', async () => {
    await dir.write('orders.yaml', workflow('orders'), trigger('t', { pathSegment: 'in' }));
    await run();
    const mine = await routes.list();
    // The cluster's records: a trigger with an API server's random uid, its workflow.
    const theirs: RouteRecord = {
      ...mine[0]!,
      key: 'shop/orders',
      namespace: 'shop',
      name: 'orders',
      uid: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f',
    };
    await routes.put(theirs.key, theirs);
    const registration = {
      namespace: 'shop',
      name: 'orders',
      workflowId: 'shop_production_orders',
    };
    await workflows.put(registration.workflowId, registration as WorkflowRegistration);
    const source = new DirectorySource({ dir: dir.dir });
    await source.start(() => {});
    const logs: { msg: string; fields?: object }[] = [];
    const result = await sweepOrphans({
      source,
      routes,
      workflows,
      enqueue: () => {},
      log: (msg, fields) => logs.push({ msg, ...(fields ? { fields } : {}) }),
      stopped: () => false,
    });
    await source.stop();
    expect(result).toEqual({ routes: [], workflows: [], refused: true });
    expect(await routes.get('shop/orders')).toEqual(theirs);
    expect(await workflows.get('shop_production_orders')).toEqual(registration);
    expect(logs).toHaveLength(1);
    expect(logs[0]?.msg).toMatch(/^Not sweeping orphaned routes and registrations/);
    expect(logs[0]?.fields).toMatchObject({ foreignRoutes: 1, example: { route: 'shop/orders' } });
  });

  it('a leadership that cannot be confirmed (the API server unreachable) fails the sweep before any delete; confirmed, it deletes', async () => {
    await dir.write('orders.yaml', workflow('orders'), trigger('t', { pathSegment: 'in' }));
    await dir.write('billing.yaml', workflow('billing'));
    await run();
    await dir.remove('billing.yaml');
    const source = new DirectorySource({ dir: dir.dir });
    await source.start(() => {});
    let reachable = false;
    const confirmations: boolean[] = [];
    const sweep = () =>
      sweepOrphans({
        source,
        routes,
        workflows,
        enqueue: () => {},
        log: () => {},
        stopped: () => false,
        leadership: {
          confirm: () => {
            confirmations.push(reachable);
            return reachable ? Promise.resolve() : Promise.reject(new Error('ECONNREFUSED'));
          },
        },
      });
    await expect(sweep()).rejects.toThrow('ECONNREFUSED');
    expect((await workflows.list()).map((w) => w.name).sort()).toEqual(['billing', 'orders']);
    reachable = true;
    expect(await sweep()).toEqual({ routes: [], workflows: ['default_production_billing'] });
    // Asked once per delete, never for records whose object exists.
    expect(confirmations).toEqual([false, true]);
    await source.stop();
  });

  it('a manifest that fails admission or parsing is still there: its records are no orphans', async () => {
    await dir.write('orders.yaml', workflow('orders'), trigger('t', { pathSegment: 'in' }));
    await dir.write('billing.yaml', workflow('billing'));
    await run();
    const before = (await routes.list()).map((r) => r.key);
    expect(before).toEqual(['default/t']);
    // Edited while nothing ran: the trigger's document now fails the CRD schema.
    await dir.write(
      'orders.yaml',
      workflow('orders'),
      trigger('t', { pathSegment: 'in', response: { mode: 'bogus' } }),
    );
    const source = new DirectorySource({ dir: dir.dir });
    await source.start(() => {});
    expect(source.get({ kind: 'WebhookTrigger', namespace: 'default', name: 't' })).toBeUndefined();
    const sweep = () =>
      sweepOrphans({
        source,
        routes,
        workflows,
        enqueue: () => {},
        log: () => {},
        stopped: () => false,
      });
    expect(await sweep()).toEqual({ routes: [], workflows: [] });
    expect((await routes.list()).map((r) => r.key)).toEqual(before);
    // A file that cannot be parsed may name anything: the sweep fails (and is retried).
    await dir.writeText('billing.yaml', 'kind: Workflow\nmetadata: [unclosed\n');
    await source.reload();
    await expect(sweep()).rejects.toThrow(/cannot be read or parsed: billing.yaml/);
    expect((await workflows.list()).map((w) => w.name).sort()).toEqual(['billing', 'orders']);
    await source.stop();
  });
});
