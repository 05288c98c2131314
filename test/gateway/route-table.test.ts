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
    // a0 takes b's path: the first by key serves it, so b leaves the table
    await store.put('shop/a0', route('a0', 1, '/webhook/shop-production/b'));
    await table.refresh();
    expect(removed).toEqual(['shop/a@1', 'shop/b@1']);
    expect(served(table, 'b')?.key).toBe('shop/a0');
    expect(table.size).toBe(1);
    stop();
    await store.delete('shop/a0');
    await table.refresh();
    expect(removed).toEqual(['shop/a@1', 'shop/b@1']);
    table.close();
  });
});
