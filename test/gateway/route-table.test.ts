// The route table's lifecycle: one record object per route version, and a removal
// listener for state kept by route key.
import { describe, expect, it } from 'vitest';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { RouteTable } from '../../runtime/gateway/route-table.ts';
import { makeRoute } from '../gateway-security/fixtures.ts';

function route(name: string, generation = 1, path = `/webhook/shop-production/${name}`) {
  return { ...makeRoute({}, {}, `shop/${name}`, generation), name, path };
}

async function tableOver(...routes: RouteRecord[]) {
  const store = new MemoryRecordStore<RouteRecord>();
  for (const r of routes) await store.put(r.key, r);
  const table = await RouteTable.create(store, new MemoryRecordStore<WorkflowRegistration>());
  const removed: string[] = [];
  const stop = table.onRemoved((r) => removed.push(`${r.key}@${r.generation}`));
  return { store, table, removed, stop };
}

const served = (table: RouteTable, name: string) =>
  table.match(`/webhook/shop-production/${name}`)?.route;

describe('RouteTable lifecycle', () => {
  it('keeps the record object of an unchanged route across rebuilds', async () => {
    const { store, table } = await tableOver(route('a'), route('b'));
    const a = served(table, 'a');
    expect(a).toBeDefined();
    await store.put('shop/b', route('b', 2));
    await table.refresh();
    expect(served(table, 'a')).toBe(a);
    await store.put('shop/a', route('a')); // written again, same content
    await table.refresh();
    expect(served(table, 'a')).toBe(a);
    table.close();
  });

  it('serves a new record object when the route changes (generation or credentials)', async () => {
    const { store, table, removed } = await tableOver(route('a'));
    const first = served(table, 'a');
    await store.put('shop/a', route('a', 2));
    await table.refresh();
    const second = served(table, 'a');
    expect(second).not.toBe(first);
    expect(second?.generation).toBe(2);
    await store.put('shop/a', { ...route('a', 2), credentials: { jwtKey: 'rotated' } });
    await table.refresh();
    expect(served(table, 'a')).not.toBe(second);
    expect(removed).toEqual([]); // a replaced route has not left
    table.close();
  });

  it('tells listeners about routes that leave: deleted, or no longer served', async () => {
    const { store, table, removed, stop } = await tableOver(route('a'), route('b'));
    await store.delete('shop/a');
    await table.refresh();
    expect(removed).toEqual(['shop/a@1']);
    // b moves to a0's new path... a0 asks for b's path: b keeps it, a0 is not served
    await store.put('shop/a0', route('a0', 1, '/webhook/shop-production/b'));
    await table.refresh();
    expect(served(table, 'b')?.key).toBe('shop/b');
    expect(table.size).toBe(1);
    // b leaves: a0 gets the path it asked for
    await store.delete('shop/b');
    await table.refresh();
    expect(removed).toEqual(['shop/a@1', 'shop/b@1']);
    expect(served(table, 'b')?.key).toBe('shop/a0');
    stop();
    await store.delete('shop/a0');
    await table.refresh();
    expect(removed).toEqual(['shop/a@1', 'shop/b@1']);
    table.close();
  });
});

/** A memory store that counts whole reads and single reads, and can be made to fail. */
class CountingStore<T> extends MemoryRecordStore<T> {
  lists = 0;
  gets = 0;
  failing = false;
  override list(): Promise<T[]> {
    this.lists++;
    return this.failing ? Promise.reject(new Error('store down')) : super.list();
  }
  override get(key: string): Promise<T | undefined> {
    this.gets++;
    return this.failing ? Promise.reject(new Error('store down')) : super.get(key);
  }
}

/** Waits until the table has applied every change announced so far. */
async function settled(table: RouteTable, revision: number) {
  for (let i = 0; i < 200 && table.revision <= revision; i++)
    await new Promise((r) => setTimeout(r, 5));
}

describe('RouteTable follows changes key by key', () => {
  async function counted(...routes: RouteRecord[]) {
    const store = new CountingStore<RouteRecord>();
    for (const r of routes) await store.put(r.key, r);
    const workflows = new CountingStore<WorkflowRegistration>();
    const table = await RouteTable.create(store, workflows);
    return { store, workflows, table };
  }

  it('reads only the record that changed, never the whole store again', async () => {
    const many = Array.from({ length: 50 }, (_, i) => route(`r${i}`));
    const { store, workflows, table } = await counted(...many);
    expect(store.lists).toBe(1);
    const before = table.revision;
    await store.put('shop/new', route('new'));
    await settled(table, before);
    expect(served(table, 'new')?.key).toBe('shop/new');
    await store.put('shop/r7', route('r7', 2));
    await store.delete('shop/r8');
    await settled(table, table.revision);
    await new Promise((r) => setTimeout(r, 20));
    expect(served(table, 'r7')?.generation).toBe(2);
    expect(served(table, 'r8')).toBeUndefined();
    expect(table.size).toBe(50);
    expect(store.lists).toBe(1);
    expect(workflows.lists).toBe(1);
    expect(store.gets).toBe(3);
    table.close();
  });

  it('moves a route to its new path: the old one answers nothing', async () => {
    const { store, table } = await counted(route('a'), route('b'));
    const revision = table.revision;
    await store.put('shop/a', route('a', 2, '/webhook/shop-production/a2'));
    await settled(table, revision);
    expect(served(table, 'a')).toBeUndefined();
    expect(served(table, 'a2')?.generation).toBe(2);
    expect(served(table, 'b')?.key).toBe('shop/b');
    // The metrics' label values still current: the new path, not the old one.
    expect(table.servedLabels().routes).toEqual(
      new Set(['/webhook/shop-production/a2', '/webhook/shop-production/b']),
    );
    table.close();
  });

  it('serves a route skipped for a taken path once the path is free', async () => {
    const { store, table } = await counted(route('a'));
    let revision = table.revision;
    await store.put('shop/z', route('z', 1, '/webhook/shop-production/a'));
    await settled(table, revision);
    expect(served(table, 'a')?.key).toBe('shop/a');
    revision = table.revision;
    await store.delete('shop/a');
    await settled(table, revision + 1);
    expect(served(table, 'a')?.key).toBe('shop/z');
    table.close();
  });

  it('after a failed read, the next change reads the whole store (nothing lost)', async () => {
    const { store, table } = await counted(route('a'));
    store.failing = true;
    const revision = table.revision;
    await store.put('shop/b', route('b'));
    for (let i = 0; i < 50 && store.gets === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(served(table, 'b')).toBeUndefined(); // the read failed: not applied
    store.failing = false;
    await store.put('shop/c', route('c'));
    await settled(table, revision);
    expect(served(table, 'b')?.key).toBe('shop/b');
    expect(served(table, 'c')?.key).toBe('shop/c');
    expect(store.lists).toBe(2); // the first load, and one in full after the failure
    table.close();
  });

  it('follows workflow registrations by id', async () => {
    const { workflows, table } = await counted(route('a'));
    const revision = table.revision;
    const registration = {
      workflowId: 'w1',
      namespace: 'shop',
      name: 'w1',
      generation: 1,
      application: 'shop',
      environment: 'production',
      spec: { application: 'shop', environment: 'production', nodes: [] },
    } as unknown as WorkflowRegistration;
    await workflows.put('w1', registration);
    await settled(table, revision);
    expect(table.workflow('w1')?.name).toBe('w1');
    await workflows.delete('w1');
    await settled(table, revision + 1);
    expect(table.workflow('w1')).toBeUndefined();
    expect(workflows.lists).toBe(1);
    table.close();
  });
});
