// Tenants cannot squat each other's URLs (ADR 0022), and a URL never moves silently:
// the reconcilers against the real directory source and in-memory stores.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Condition } from '../../../api/v1alpha1/index.ts';
import { Reconciler } from '../../../operator/reconcile/reconciler.ts';
import { DirectorySource } from '../../../operator/sources/directory.ts';
import type { ObjectRef } from '../../../operator/sources/ports.ts';
import { MemoryGatewayStore } from '../../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../../api/records/records.ts';
import { reportServing } from '../../support/gateways.ts';
import { manifestDir, trigger, workflow } from '../../support/manifests.ts';

type Dir = Awaited<ReturnType<typeof manifestDir>>;
let dir: Dir;
let source: DirectorySource;
let routes: MemoryRecordStore<RouteRecord>;
let workflows: MemoryRecordStore<WorkflowRegistration>;
let gateways: MemoryGatewayStore;
let reconciler: Reconciler;
let events: { object: string; type: string; reason: string; message: string }[];

const refOf = (
  kind: 'Workflow' | 'WebhookTrigger',
  r: { metadata: { namespace?: string; name: string } },
): ObjectRef => ({
  kind,
  namespace: r.metadata.namespace ?? 'default',
  name: r.metadata.name,
});
const statusOf = (ref: ObjectRef) =>
  (source.get(ref)?.status ?? {}) as { url?: string; conditions?: Condition[] };
const ready = (ref: ObjectRef) => {
  const c = statusOf(ref).conditions?.find((x) => x.type === 'Ready');
  return `${c?.status}/${c?.reason}`;
};

async function settle() {
  for (let i = 0; i < 3; i++) {
    for (const w of source.list('Workflow')) await reconciler.reconcile(refOf('Workflow', w));
    for (const t of source.list('WebhookTrigger'))
      await reconciler.reconcile(refOf('WebhookTrigger', t));
    await reportServing(gateways, 'g1', routes, workflows);
  }
}

beforeEach(async () => {
  dir = await manifestDir();
  source = new DirectorySource({ dir: dir.dir });
  await source.start(() => {});
  routes = new MemoryRecordStore();
  workflows = new MemoryRecordStore();
  gateways = new MemoryGatewayStore();
  events = [];
  reconciler = new Reconciler({
    source,
    routes,
    workflows,
    gateways,
    baseUrl: 'https://hooks.example.com',
    now: () => new Date('2026-11-23T10:00:00Z'),
    recordEvent: (obj, type, reason, message) =>
      events.push({
        object: `${obj.metadata.namespace}/${obj.metadata.name}`,
        type,
        reason,
        message,
      }),
  });
});
afterEach(async () => {
  await source.stop();
  await dir.cleanup();
});

describe('workflow identifiers across tenants', () => {
  it('the squatting pair of the old `-` join gets two URLs, both served', async () => {
    // Old scheme: both were /webhook/team-development-staging-x/ingest, and the later
    // trigger got PathConflict.
    const victimNs = { namespace: 'team-development' };
    const squatterNs = { namespace: 'team' };
    await dir.write(
      'victim.yaml',
      workflow('x', { environment: 'staging' }, victimNs),
      trigger('hook', { workflowRef: { name: 'x' }, pathSegment: 'ingest' }, victimNs),
    );
    await dir.write(
      'squatter.yaml',
      workflow('staging-x', { environment: 'development' }, squatterNs),
      trigger('hook', { workflowRef: { name: 'staging-x' }, pathSegment: 'ingest' }, squatterNs),
    );
    await source.reload();
    expect(source.errors()).toEqual([]);
    await settle();

    const victim: ObjectRef = {
      kind: 'WebhookTrigger',
      namespace: 'team-development',
      name: 'hook',
    };
    const squatter: ObjectRef = { kind: 'WebhookTrigger', namespace: 'team', name: 'hook' };
    expect(ready(victim)).toBe('True/Succeeded');
    expect(ready(squatter)).toBe('True/Succeeded');
    expect(statusOf(victim).url).toBe(
      'https://hooks.example.com/webhook/team-development_staging_x/ingest',
    );
    expect(statusOf(squatter).url).toBe(
      'https://hooks.example.com/webhook/team_development_staging-x/ingest',
    );
    const paths = (await routes.list()).map((r) => r.path).sort();
    expect(paths).toEqual([
      '/webhook/team-development_staging_x/ingest',
      '/webhook/team_development_staging-x/ingest',
    ]);
    expect(events.filter((e) => e.reason === 'PathConflict')).toEqual([]);
  });

  it('names that differ only in . and - get their own URLs', async () => {
    await dir.write(
      'all.yaml',
      workflow('orders.v2'),
      workflow('orders-v2'),
      trigger('dotted', { workflowRef: { name: 'orders.v2' }, pathSegment: 'ingest' }),
      trigger('dashed', { workflowRef: { name: 'orders-v2' }, pathSegment: 'ingest' }),
    );
    await source.reload();
    await settle();
    const dotted: ObjectRef = { kind: 'WebhookTrigger', namespace: 'default', name: 'dotted' };
    const dashed: ObjectRef = { kind: 'WebhookTrigger', namespace: 'default', name: 'dashed' };
    expect(ready(dotted)).toBe('True/Succeeded');
    expect(ready(dashed)).toBe('True/Succeeded');
    expect(statusOf(dotted).url).toContain('/webhook/default_production_orders.v2/ingest');
    expect(statusOf(dashed).url).toContain('/webhook/default_production_orders-v2/ingest');
  });

  it('the embedded source refuses a namespace that is not a DNS label, as the API server does', async () => {
    await dir.write('bad.yaml', workflow('x', {}, { namespace: 'Team_A' }));
    await source.reload();
    expect(source.errors()).toEqual([
      expect.objectContaining({
        field: 'metadata.namespace',
        message: expect.stringContaining('DNS label'),
      }),
    ]);
    expect(source.list('Workflow')).toEqual([]);
  });
});

describe('a URL never moves silently', () => {
  const hook: ObjectRef = { kind: 'WebhookTrigger', namespace: 'default', name: 'hook' };

  it('an upgrade from the old identifier: new status.url, and a Warning Event naming both URLs', async () => {
    await dir.write('all.yaml', workflow('orders'), trigger('hook', { pathSegment: 'ingest' }));
    await source.reload();
    await settle();
    // What an operator of the old scheme left behind in status.
    const old = 'https://hooks.example.com/webhook/default-production-orders/ingest';
    await source.writeStatus(hook, {
      ...statusOf(hook),
      url: old,
      workflowId: 'default-production-orders',
    });
    events = [];
    await reconciler.reconcile(hook);
    const next = 'https://hooks.example.com/webhook/default_production_orders/ingest';
    expect(statusOf(hook).url).toBe(next);
    expect(events).toEqual([
      {
        object: 'default/hook',
        type: 'Warning',
        reason: 'WebhookUrlChanged',
        message: `The webhook URL moved from ${old} to ${next}; callers of the old URL get 404 route-not-found`,
      },
    ]);
    // Said once: the next reconcile finds the new URL in status.
    events = [];
    await reconciler.reconcile(hook);
    expect(events).toEqual([]);
  });

  it('a new path segment is announced the same way; the first deploy is not a move', async () => {
    await dir.write('all.yaml', workflow('orders'), trigger('hook', { pathSegment: 'ingest' }));
    await source.reload();
    await settle();
    expect(events.filter((e) => e.reason === 'WebhookUrlChanged')).toEqual([]);
    await dir.write('all.yaml', workflow('orders'), trigger('hook', { pathSegment: 'intake' }));
    await source.reload();
    await settle();
    expect(events.filter((e) => e.reason === 'WebhookUrlChanged').map((e) => e.message)).toEqual([
      'The webhook URL moved from https://hooks.example.com/webhook/default_production_orders/ingest to https://hooks.example.com/webhook/default_production_orders/intake; callers of the old URL get 404 route-not-found',
    ]);
  });
});
