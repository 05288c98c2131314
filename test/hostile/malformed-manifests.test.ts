// 1,000 malformed WebhookTrigger and Workflow manifests (manifest-generators.ts), each
// sent to every place that takes manifests:
//
// - the test API server with the generated CRDs installed (as kubectl would: strict
//   field validation): never a 5xx, every refusal a Kubernetes Status (422 Invalid
//   with causes, or 400 BadRequest for a body that is not this resource at all);
// - the product's own admission (api/validate.ts): never a throw, every refusal a
//   list of field errors;
// - the embedded source (the dev server's manifest folder): every refusal a manifest
//   error with file and message, the same verdict as the API server; its read API
//   answers a refused object with a catalogued problem document;
// - the operator: whatever the API server accepted is reconciled, with no reconcile
//   error, to conditions that are not Unknown; so is whatever the embedded source took.
//
// The figures are printed and recorded in docs/security.md (threat M1).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import { isObjectName } from '../../api/identity.ts';
import { admitResource } from '../../api/validate.ts';
import type { Condition } from '../../api/v1alpha1/index.ts';
import { OperatorMetrics } from '../../operator/controller/metrics.ts';
import { Reconciler } from '../../operator/reconcile/reconciler.ts';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import { DirectorySource } from '../../operator/sources/directory.ts';
import { KubernetesSource, resourcePath } from '../../operator/sources/kubernetes.ts';
import { createHttpApp } from '../../runtime/http-app.ts';
import { resourceRoutes } from '../../runtime/read-api/resource-routes.ts';
import { eventually } from '../support/eventually.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import {
  bases,
  exampleObjects,
  jsonClone,
  malformedManifest,
  NAMING,
  type Json,
  type Malformed,
} from './manifest-generators.ts';

const COUNT = 1000;
const SEED = Number(process.env.HOOKGATE_FUZZ_SEED ?? 13);
const NS = 'fuzz';
const PLURAL = { Workflow: 'workflows', WebhookTrigger: 'webhooktriggers' } as const;

interface StatusBody {
  kind?: string;
  apiVersion?: string;
  status?: string;
  code?: number;
  reason?: string;
  message?: string;
  details?: { causes?: { field?: string; message?: string; reason?: string }[] };
}

interface Outcome {
  index: number;
  sample: Malformed;
  name: string | undefined;
  api: { status: number; body: StatusBody };
  admission: { ok: boolean; errors: number };
  directory?: { ok: boolean; errors: number };
}

let cluster: TestCluster;
let loop: ReconcileLoop;
let registry: Registry;
let dir: string;
const outcomes: Outcome[] = [];

/** The manifest with a unique name, unless naming is what the mutation is about. */
function named(sample: Malformed, index: number): { body: Json; name: string | undefined } {
  const body = jsonClone(sample.body);
  const meta =
    body !== null && typeof body === 'object' && !Array.isArray(body) ? body.metadata : undefined;
  const isObj = meta !== null && typeof meta === 'object' && !Array.isArray(meta);
  if (!isObj) return { body, name: undefined };
  if (!sample.tags.some((t) => NAMING.has(t))) meta.name = `m-${index}`;
  return { body, name: typeof meta.name === 'string' ? meta.name : undefined };
}

async function post(kind: Malformed['kind'], body: Json) {
  const res = await fetch(`${cluster.server.url}${resourcePath(kind, NS)}?fieldValidation=Strict`, {
    method: 'POST',
    headers: { authorization: 'Bearer fuzz', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as StatusBody };
}

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  const { client, kc } = cluster;
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: NS } } });
  // The examples' Secrets and Workflows, valid, so that accepted triggers find them.
  for (const obj of exampleObjects()) {
    if (obj.kind === 'WebhookTrigger') continue;
    const { namespace: _ns, ...metadata } = obj.metadata as Record<string, Json>;
    const path =
      obj.kind === 'Secret' ? `/api/v1/namespaces/${NS}/secrets` : resourcePath('Workflow', NS);
    await client.request('POST', path, {
      body: { ...obj, metadata: { ...metadata, namespace: NS } },
    });
  }
  registry = new Registry();
  loop = await startReconcileLoop({
    source: new KubernetesSource({ kubeConfig: kc, namespace: NS }),
    routes: new MemoryRecordStore<RouteRecord>(),
    workflows: new MemoryRecordStore<WorkflowRegistration>(),
    gateways: new MemoryGatewayStore(),
    baseUrl: 'http://hooks.test',
    controller: { workers: 4, metrics: new OperatorMetrics(registry) },
  });
  dir = await mkdtemp(join(tmpdir(), 'hookgate-malformed-'));

  const samples = fc.sample(malformedManifest(bases()), { numRuns: COUNT, seed: SEED });
  for (const [index, sample] of samples.entries()) {
    const { body, name } = named(sample, index);
    const api = await post(sample.kind, body);
    // Our admission sees what the wire carries (JSON.parse: `__proto__` is data).
    const admitted = admitResource(JSON.parse(JSON.stringify(body)));
    outcomes.push({
      index,
      sample,
      name,
      api,
      admission: { ok: admitted.ok, errors: admitted.ok ? 0 : admitted.errors.length },
    });
    await writeFile(join(dir, `m-${index}.json`), JSON.stringify(body));
  }
}, 600_000);

afterAll(async () => {
  await loop?.stop(2000);
  await cluster?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const accepted = () => outcomes.filter((o) => o.api.status === 201);
const refused = () => outcomes.filter((o) => o.api.status !== 201);

describe(`${COUNT} malformed manifests`, () => {
  it('every base is valid, so each refusal is the mutation’s doing', () => {
    for (const base of bases()) expect(admitResource(base.manifest)).toMatchObject({ ok: true });
  });

  it('the API server: no 5xx; every refusal a Status, 422 Invalid with causes or 400 BadRequest', () => {
    expect(outcomes).toHaveLength(COUNT);
    const statuses = new Map<number, number>();
    for (const o of outcomes) statuses.set(o.api.status, (statuses.get(o.api.status) ?? 0) + 1);
    console.log('API server answers', Object.fromEntries(statuses));
    expect([...statuses.keys()].filter((s) => s >= 500 || s === 0)).toEqual([]);
    for (const o of refused()) {
      const where = JSON.stringify({ index: o.index, tags: o.sample.tags, status: o.api.status });
      expect([400, 409, 422], where).toContain(o.api.status);
      expect(o.api.body, where).toMatchObject({
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        code: o.api.status,
      });
      expect(o.api.body.message?.length, where).toBeGreaterThan(0);
      if (o.api.status === 422) {
        expect(o.api.body.reason, where).toBe('Invalid');
        const causes = o.api.body.details?.causes ?? [];
        expect(causes.length, where).toBeGreaterThan(0);
        for (const c of causes) {
          expect(typeof c.field, where).toBe('string');
          expect(c.message?.length, where).toBeGreaterThan(0);
        }
      } else if (o.api.status === 409) {
        // Two samples that both chose the same (valid) name: the second already exists.
        expect(
          o.sample.tags.some((t) => NAMING.has(t)),
          where,
        ).toBe(true);
        expect(o.api.body.reason, where).toBe('AlreadyExists');
      } else {
        expect(o.api.body.reason, where).toBe('BadRequest');
      }
    }
    // Most mutations break the manifest; some leave it valid (an optional field gone).
    expect(refused().length).toBeGreaterThan(COUNT / 2);
    expect(accepted().length).toBeGreaterThan(0);
  });

  it('a manifest without apiVersion or kind: the API server takes the URL’s, the embedded source refuses it as kubectl does', () => {
    const untyped = outcomes.filter((o) => lacksTypeMeta(o.sample.body));
    expect(untyped.length).toBeGreaterThan(0);
    for (const o of untyped) expect(o.admission.ok).toBe(false);
  });

  it('our admission never throws, refuses with field errors, and agrees with the API server', () => {
    // admitResource checks the resource, not the name (the source's job): compare
    // where the name is valid and the namespace is the URL's.
    let compared = 0;
    const disagreements: string[] = [];
    for (const o of outcomes) {
      if (!o.admission.ok) expect(o.admission.errors).toBeGreaterThan(0);
      // 409: the name is taken (by an example object or an earlier sample), not invalid.
      if (o.api.status === 409) continue;
      if (lacksTypeMeta(o.sample.body) || !plainMetadata(o.sample.body, o.name)) continue;
      compared++;
      if (o.admission.ok !== (o.api.status === 201)) disagreements.push(explain(o));
    }
    console.log(`admission compared on ${compared}, disagreements: ${disagreements.length}`);
    expect(compared).toBeGreaterThan(COUNT / 2);
    expect(disagreements).toEqual([]);
  });

  it('the embedded source: every refusal a manifest error with file and message; the same verdict as the API server', async () => {
    const source = new DirectorySource({ dir, defaultNamespace: NS });
    const started = performance.now();
    await source.start(() => {});
    const readMs = Math.round(performance.now() - started);
    try {
      const errors = source.errors();
      const byFile = new Map<string, number>();
      for (const e of errors) {
        expect(e.message.length).toBeGreaterThan(0);
        byFile.set(e.file, (byFile.get(e.file) ?? 0) + 1);
      }
      const held = new Set(
        [...source.list('Workflow'), ...source.list('WebhookTrigger')].map(
          (r) => `${r.kind}/${r.metadata.name}`,
        ),
      );
      // A name several samples chose: which one is taken depends on the order of reading.
      const chosen = new Map<string, number>();
      for (const o of outcomes) {
        const k = `${o.sample.kind}/${o.name ?? ''}`;
        chosen.set(k, (chosen.get(k) ?? 0) + 1);
      }
      let compared = 0;
      const disagreements: string[] = [];
      for (const o of outcomes) {
        const errs = byFile.get(`m-${o.index}.json`) ?? 0;
        o.directory = { ok: errs === 0, errors: errs };
        if (lacksTypeMeta(o.sample.body)) {
          expect(o.directory.ok).toBe(false);
          continue;
        }
        if (o.api.status === 409) continue;
        if (o.name && (chosen.get(`${o.sample.kind}/${o.name}`) ?? 0) > 1) continue;
        compared++;
        const apiOk = o.api.status === 201;
        if (apiOk !== o.directory.ok) {
          const mine = errors.filter((e) => e.file === `m-${o.index}.json`);
          disagreements.push(`${explain(o)}; embedded: ${JSON.stringify(mine).slice(0, 300)}`);
        }
        if (apiOk && o.name) expect(held.has(`${o.sample.kind}/${o.name}`)).toBe(true);
      }
      console.log(
        `embedded source: read in ${readMs} ms, ${errors.length} errors; compared on ${compared}, disagreements: ${disagreements.length}`,
      );
      expect(disagreements).toEqual([]);

      // Its read API: a refused object is a catalogued 404, a held one is served.
      const { app } = createHttpApp({});
      resourceRoutes(app, { source, manifestErrors: () => source.errors() });
      await app.ready();
      await checkReadApi(app, source.errors().length, held);
      await app.close();

      // The reconcilers take whatever it holds, without a throw.
      const reconciler = new Reconciler({
        source,
        routes: new MemoryRecordStore(),
        workflows: new MemoryRecordStore(),
        gateways: new MemoryGatewayStore(),
        baseUrl: 'http://hooks.test',
      });
      for (const kind of ['Workflow', 'WebhookTrigger'] as const)
        for (const r of source.list(kind))
          await reconciler.reconcile({ kind, namespace: NS, name: r.metadata.name });
      for (const kind of ['Workflow', 'WebhookTrigger'] as const)
        for (const r of source.list(kind)) expect(readyOf(r.status)).toMatch(/^(True|False)$/);
    } finally {
      await source.stop();
    }
  }, 300_000);

  it('the operator reconciles every accepted manifest without an error: conditions set', async () => {
    const mine = accepted().filter((o) => o.name !== undefined);
    await eventually(
      async () => {
        for (const kind of ['Workflow', 'WebhookTrigger'] as const) {
          const list = await cluster.client.request<{
            items: { metadata: { name: string; generation?: number }; status?: unknown }[];
          }>('GET', resourcePath(kind, NS));
          const byName = new Map(list.items.map((i) => [i.metadata.name, i]));
          for (const o of mine.filter((x) => x.sample.kind === kind)) {
            const obj = byName.get(o.name as string);
            expect(obj, `${kind} ${o.name}`).toBeDefined();
            const status = obj?.status as { observedGeneration?: number } | undefined;
            expect(readyOf(status), `${kind} ${o.name}`).toMatch(/^(True|False)$/);
            expect(status?.observedGeneration).toBe(obj?.metadata.generation);
          }
        }
      },
      120_000,
      500,
    );
    const errors = await registry.getSingleMetricAsString(
      'hookgate_operator_reconcile_errors_total',
    );
    const total = errors
      .split('\n')
      .filter((l) => l.startsWith('hookgate_operator_reconcile_errors_total{'))
      .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    expect(total).toBe(0);
    printSummary();
  }, 180_000);
});

/** No apiVersion or kind: kubectl refuses such a file, the API server defaults both. */
function lacksTypeMeta(body: Json): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  return body.apiVersion === undefined || body.kind === undefined;
}

/** A valid name and no namespace of its own: the API server's verdict is about the rest. */
function plainMetadata(body: Json, name: string | undefined): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const meta = body.metadata;
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) return false;
  return name !== undefined && isObjectName(name) && meta.namespace === undefined;
}

/** One line about a sample, for a disagreement. */
function explain(o: Outcome): string {
  const message = o.api.body.message ?? '';
  return `#${o.index} ${o.sample.kind} ${o.sample.tags.join('+')}: API server ${o.api.status} ${message}`.slice(
    0,
    400,
  );
}

function readyOf(status: unknown): string | undefined {
  const conditions = (status as { conditions?: Condition[] } | undefined)?.conditions;
  return conditions?.find((c) => c.type === 'Ready')?.status;
}

async function checkReadApi(
  app: FastifyInstance,
  errorCount: number,
  held: Set<string>,
): Promise<void> {
  const errs = await app.inject({ method: 'GET', url: '/api/manifests/errors' });
  expect(errs.statusCode).toBe(200);
  expect(errs.json<{ items: unknown[] }>().items).toHaveLength(errorCount);
  for (const path of ['/api/workflows', '/api/triggers']) {
    expect((await app.inject({ method: 'GET', url: path })).statusCode).toBe(200);
  }
  for (const o of outcomes.filter((x) => x.name !== undefined && x.name !== '')) {
    const plural = o.sample.kind === 'Workflow' ? 'workflows' : 'triggers';
    const res = await app.inject({
      method: 'GET',
      url: `/api/${plural}/${NS}/${encodeURIComponent(o.name as string)}`,
    });
    if (held.has(`${o.sample.kind}/${o.name}`)) {
      // Taken, or refused while another file holds the name.
      expect(res.statusCode).toBe(200);
    } else {
      expect([404, 400]).toContain(res.statusCode);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json<{ type: string }>().type).toMatch(
        /^https:\/\/hookgate\.dev\/problems\/[a-z-]+$/,
      );
    }
  }
}

function printSummary(): void {
  const rows = new Map<string, { sent: number; api: number; dir: number; admission: number }>();
  for (const o of outcomes) {
    for (const tag of o.sample.tags) {
      const row = rows.get(tag) ?? { sent: 0, api: 0, dir: 0, admission: 0 };
      row.sent++;
      if (o.api.status !== 201) row.api++;
      if (o.directory && !o.directory.ok) row.dir++;
      if (!o.admission.ok) row.admission++;
      rows.set(tag, row);
    }
  }
  const lines = [...rows]
    .sort()
    .map(
      ([tag, r]) =>
        `${tag.padEnd(14)} sent ${r.sent}, refused: API server ${r.api}, embedded ${r.dir}, admission ${r.admission}`,
    );
  console.log(
    [
      `seed ${SEED}: ${COUNT} manifests, ${accepted().length} accepted and reconciled, ${refused().length} refused`,
      `by kind: ${PLURAL.Workflow} ${outcomes.filter((o) => o.sample.kind === 'Workflow').length}, ${PLURAL.WebhookTrigger} ${outcomes.filter((o) => o.sample.kind === 'WebhookTrigger').length}`,
      ...lines,
    ].join('\n'),
  );
}
