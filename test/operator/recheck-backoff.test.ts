// A trigger waiting for the gateways (GatewayPending, NoGateway) is looked at again
// later each time while nothing changes: 5 s doubling up to 5 min (30 s first with no
// gateway), per trigger, instead of every 5 s forever. A change starts it over: the
// gateways' change feed naming the route, a new generation; a route served everywhere
// ends the rechecks. Through the real reconcile loop (controller + work queue) on a
// FakeClock; every look at what the gateways serve is a reconcile of the trigger.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RouteServed } from '../../api/records/gateways.ts';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { FakeClock } from '../../operator/controller/clock.ts';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import { DirectorySource } from '../../operator/sources/directory.ts';
import { manifestDir, trigger, workflow } from '../support/manifests.ts';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (cond()) return;
    await tick();
  }
  throw new Error(`timed out waiting for ${what}`);
}

const KEY = 'default/t';
const S = 1000;

let dir: Awaited<ReturnType<typeof manifestDir>>;
let source: DirectorySource;
let routes: MemoryRecordStore<RouteRecord>;
let workflows: MemoryRecordStore<WorkflowRegistration>;
let gateways: MemoryGatewayStore;
let clock: FakeClock;
let loop: ReconcileLoop | undefined;
/** When (FakeClock time) each reconcile of the trigger looked at what the gateways serve. */
let looks: number[];

beforeEach(async () => {
  dir = await manifestDir();
  await dir.write('all.yaml', workflow('orders'), trigger('t', { pathSegment: 'in' }));
  source = new DirectorySource({ dir: dir.dir });
  routes = new MemoryRecordStore();
  workflows = new MemoryRecordStore();
  gateways = new MemoryGatewayStore({ pollMs: 60 * 60_000 });
  clock = new FakeClock();
  looks = [];
});

afterEach(async () => {
  await loop?.stop(1000);
  loop = undefined;
  gateways.close();
  await dir.cleanup();
});

async function start(): Promise<void> {
  const served = gateways.served.bind(gateways);
  loop = await startReconcileLoop({
    source,
    routes,
    workflows,
    gateways: {
      served: (key: string): Promise<RouteServed[]> => {
        if (key === KEY) looks.push(clock.now());
        return served(key);
      },
      subscribe: (listener) => gateways.subscribe(listener),
    },
    baseUrl: 'https://hooks.example.com',
    controller: { clock, workers: 1 },
  });
  await settled(1);
}

/** Wait until the trigger has been looked at `n` times and its next look is scheduled (or none is). */
async function settled(n: number, rechecking = true): Promise<void> {
  await until(
    () =>
      looks.length === n &&
      loop!.controller.queue.len() === 0 &&
      clock.pendingTimers() === (rechecking ? 1 : 0),
    `look ${n}`,
  );
}

/** Step the clock to just before `ms` from now (no look), then to it (one look). */
async function expectNextLookAfter(ms: number): Promise<void> {
  const n = looks.length;
  clock.step(ms - 1);
  await tick();
  expect(looks.length, `no look before ${ms} ms`).toBe(n);
  clock.step(1);
  await settled(n + 1);
}

/** A gateway `g` serving the trigger's route at `generation` (0: not at all). */
async function gatewayServes(g: string, generation: number, revision: number): Promise<void> {
  await gateways.report({
    gateway: g,
    revision,
    full: true,
    serve: generation > 0 ? [[KEY, { generation, workflow: true }]] : [],
    drop: [],
    ttlMs: 24 * 60 * 60_000,
  });
}

const deployedReason = () =>
  (
    source.get({ kind: 'WebhookTrigger', namespace: 'default', name: 't' })?.status as
      { conditions?: { type: string; reason: string }[] } | undefined
  )?.conditions?.find((c) => c.type === 'Deployed')?.reason;

describe('rechecks of a trigger waiting for the gateways back off', () => {
  it('GatewayPending: 5 s doubling, capped at 5 min', async () => {
    await gatewayServes('g1', 0, 1); // a gateway that never serves the route
    await start();
    expect(deployedReason()).toBe('GatewayPending');
    for (const s of [5, 10, 20, 40, 80, 160, 300, 300, 300]) await expectNextLookAfter(s * S);
    expect(deployedReason()).toBe('GatewayPending');
  });

  it('NoGateway: 30 s doubling, capped at 5 min', async () => {
    await start();
    expect(deployedReason()).toBe('NoGateway');
    for (const s of [30, 60, 120, 240, 300, 300]) await expectNextLookAfter(s * S);
  });

  it('the change feed naming the route starts the backoff over', async () => {
    await gatewayServes('g1', 0, 1);
    await start();
    for (const s of [5, 10, 20, 40]) await expectNextLookAfter(s * S);
    // g1 reports about the route, still not serving generation 1: the same wait, but the
    // feed said something changed. Looked at now, then 5 s later again.
    await gateways.report({
      gateway: 'g1',
      revision: 2,
      full: false,
      serve: [[KEY, { generation: 0, workflow: true }]],
      drop: [],
      ttlMs: 24 * 60 * 60_000,
    });
    await settled(6);
    expect(looks[5]).toBe(looks[4]); // at once, no clock step
    for (const s of [5, 10]) await expectNextLookAfter(s * S);
  });

  it('a new generation starts the backoff over', async () => {
    await gatewayServes('g1', 0, 1);
    await start();
    for (const s of [5, 10, 20, 40, 80]) await expectNextLookAfter(s * S);
    await dir.write(
      'all.yaml',
      workflow('orders'),
      trigger('t', { pathSegment: 'in', methods: ['PUT'] }),
    );
    await source.reload(); // the loop enqueues the changed trigger
    await settled(7);
    expect(looks[6]).toBe(looks[5]);
    for (const s of [5, 10]) await expectNextLookAfter(s * S);
  });

  it('a route served by every gateway ends the rechecks', async () => {
    await gatewayServes('g1', 0, 1);
    await start();
    for (const s of [5, 10, 20]) await expectNextLookAfter(s * S);
    await gatewayServes('g1', 1, 2); // the feed brings the trigger back: Deployed
    await settled(5);
    expect(deployedReason()).toBe('Deployed');
    // The recheck already scheduled (40 s after the last one) still runs, once, as
    // client-go's delaying queue keeps a key's delayed add; none follows.
    expect(looks[4]).toBe(looks[3]);
    clock.step(40 * S);
    await settled(6, false);
    expect(looks[5]! - looks[3]!).toBe(40 * S);
    clock.step(60 * 60_000);
    await tick();
    expect(looks).toHaveLength(6);
    expect(deployedReason()).toBe('Deployed');
  });
});
