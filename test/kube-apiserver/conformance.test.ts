// Conformance of the in-memory API server: one test per rule K1-K30 as listed in
// testing/kube-apiserver/README.md (K31 and K32 need kubectl and live in
// kubectl.test.ts). HTTP-level rules use fetch; client-behaviour rules use
// @kubernetes/client-node 2.x.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  ListWatch,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import {
  client,
  GROUP,
  readWatch,
  sleep,
  trigger,
  VERSION,
  widget,
  widgetCrd,
  WF,
  WIDGETS,
  WT,
  type Obj,
  type WatchEvent,
} from './support.ts';

const CRDS = resolve(import.meta.dirname, '../../crds');
let server: KubeApiServer;
let call: ReturnType<typeof client>;
let dir: string;

beforeAll(async () => {
  server = await startKubeApiServer({ bookmarkIntervalMs: 100 });
  server.applyCrdsFrom(CRDS);
  server.applyCrd(widgetCrd());
  call = client(server);
  dir = mkdtempSync(join(tmpdir(), 'kube-conf-'));
});

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

async function create(path: string, obj: Obj): Promise<Obj> {
  const res = await call('POST', path, obj);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

const rvOf = (o: Obj): number => Number(o.metadata.resourceVersion);
const MERGE = { 'Content-Type': 'application/merge-patch+json' };

describe('1.1 objects and concurrency', () => {
  it('K1 every write takes the next value of one global counter; a list returns the counter', async () => {
    const a = await create(WT, trigger('k1-a'));
    const w = await create(WIDGETS, widget('k1-w'));
    const b = await call('PUT', `${WT}/k1-a`, {
      ...a,
      spec: { ...(a.spec as object), timeout: '5s' },
    });
    expect(typeof a.metadata.resourceVersion).toBe('string');
    expect(rvOf(w)).toBe(rvOf(a) + 1);
    expect(rvOf(b.body)).toBe(rvOf(w) + 1);
    const list = await call<{ metadata: { resourceVersion: string } }>('GET', WIDGETS);
    expect(list.body.metadata.resourceVersion).toBe(String(server.resourceVersion()));
    expect(Number(list.body.metadata.resourceVersion)).toBeGreaterThanOrEqual(rvOf(b.body));
  });

  it('K2 a PUT with a stale resourceVersion gets the exact 409 Conflict Status', async () => {
    const a = await create(WT, trigger('k2'));
    const first = await call('PUT', `${WT}/k2`, {
      ...a,
      metadata: { ...a.metadata, labels: { x: '1' } },
    });
    expect(first.status).toBe(200);
    const stale = await call('PUT', `${WT}/k2`, {
      ...a,
      metadata: { ...a.metadata, labels: { x: '2' } },
    });
    expect(stale.status).toBe(409);
    expect(stale.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      reason: 'Conflict',
      code: 409,
      details: { name: 'k2', group: GROUP, kind: 'webhooktriggers' },
      message:
        'Operation cannot be fulfilled on webhooktriggers.hookgate.dev "k2": the object has been modified; please apply your changes to the latest version and try again',
    });
  });

  it('K3 PUT without RV → 422 "must be specified for an update"; PUT on a missing CR → 404', async () => {
    const a = await create(WT, trigger('k3'));
    const { resourceVersion: _rv, ...meta } = a.metadata;
    const noRv = await call<{
      reason: string;
      message: string;
      details: { causes: { field: string }[] };
    }>('PUT', `${WT}/k3`, { ...a, metadata: meta });
    // store.go Update builds this one error with the plural resource as its "kind"
    // (GroupKind{Group, Kind: qualifiedResource.Resource}, kubernetes#18526) …
    expect(noRv.status).toBe(422);
    expect(noRv.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'webhooktriggers.hookgate.dev "k3" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update',
      reason: 'Invalid',
      details: {
        name: 'k3',
        group: GROUP,
        kind: 'webhooktriggers',
        causes: [
          {
            reason: 'FieldValueInvalid',
            message: 'Invalid value: 0: must be specified for an update',
            field: 'metadata.resourceVersion',
          },
        ],
      },
      code: 422,
    });
    // … while create's and update's own validation (rest.BeforeCreate, BeforeUpdate) use
    // the Kind.
    const badSpec = { ...(a.spec as object), workflowRef: { name: 'Not_Valid' } };
    const kindOf = (r: { body: Obj }) => [r.body.message, r.body.details];
    const badCreate = await call('POST', WT, { ...trigger('k3-bad'), spec: badSpec });
    const badUpdate = await call('PUT', `${WT}/k3`, { ...a, spec: badSpec });
    for (const [r, name] of [
      [badCreate, 'k3-bad'],
      [badUpdate, 'k3'],
    ] as const) {
      expect(r.status).toBe(422);
      const [message, details] = kindOf(r);
      const cause = (details as { causes: { message: string }[] }).causes[0]?.message ?? '';
      expect(cause).toMatch(/^Invalid value: "Not_Valid": /);
      expect(message).toBe(
        `WebhookTrigger.hookgate.dev "${name}" is invalid: spec.workflowRef.name: ${cause}`,
      );
      expect(details).toMatchObject({ name, group: GROUP, kind: 'WebhookTrigger' });
    }
    const missing = await call('PUT', `${WT}/k3-missing`, trigger('k3-missing'));
    expect(missing.status).toBe(404);
  });

  it('K3b a PUT needs the URL’s name (400) and a matching uid (409 precondition); a patch may not change the uid (422)', async () => {
    const a = await create(WT, trigger('k3b'));
    const { name: _n, ...unnamed } = a.metadata;
    const noName = await call('PUT', `${WT}/k3b`, { ...a, metadata: unnamed });
    expect(noName.status).toBe(400);
    expect(noName.body).toMatchObject({
      reason: 'BadRequest',
      message:
        'the name of the object (k3b based on URL) was undeterminable: name must be provided',
    });
    const noNameStatus = await call('PUT', `${WT}/k3b/status`, { ...a, metadata: unnamed });
    expect(noNameStatus.status).toBe(400);
    const other = await call('PUT', `${WT}/k3b`, { ...a, metadata: { ...a.metadata, name: 'x' } });
    expect(other.status).toBe(400);
    expect(other.body.message).toBe(
      'the name of the object (x) does not match the name on the URL (k3b)',
    );
    const staleUid = '00000000-0000-0000-0000-000000000000';
    const stale = await call('PUT', `${WT}/k3b`, {
      ...a,
      metadata: { ...a.metadata, uid: staleUid },
    });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({
      reason: 'Conflict',
      details: { name: 'k3b', group: GROUP, kind: 'webhooktriggers' },
      message: `Operation cannot be fulfilled on webhooktriggers.hookgate.dev "k3b": StorageError: invalid object, Code: 4, Key: /registry/hookgate.dev/webhooktriggers/default/k3b, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: ${staleUid}, UID in object meta: ${String(a.metadata.uid)}`,
    });
    // Without a uid the stored one is kept.
    const { uid: _u, ...noUid } = a.metadata;
    const kept = await call('PUT', `${WT}/k3b`, {
      ...a,
      metadata: { ...noUid, labels: { k: 'v' } },
    });
    expect(kept.status).toBe(200);
    expect(kept.body.metadata.uid).toBe(a.metadata.uid);
    const patched = await call<{ reason: string; message: string }>(
      'PATCH',
      `${WT}/k3b`,
      { metadata: { uid: staleUid } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(patched.status).toBe(422);
    expect(patched.body.reason).toBe('Invalid');
    expect(patched.body.message).toBe(
      `WebhookTrigger.hookgate.dev "k3b" is invalid: metadata.uid: Invalid value: "${staleUid}": field is immutable`,
    );
  });

  it('K4 a PATCH without RV is unconditional; one carrying a different RV gets 409', async () => {
    const a = await create(WT, trigger('k4'));
    await call('PUT', `${WT}/k4`, { ...a, metadata: { ...a.metadata, labels: { bump: '1' } } });
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    const unconditional = await call(
      'PATCH',
      `${WT}/k4`,
      { metadata: { labels: { p: '1' } } },
      merge,
    );
    expect(unconditional.status).toBe(200);
    const stale = await call(
      'PATCH',
      `${WT}/k4`,
      { metadata: { resourceVersion: a.metadata.resourceVersion, labels: { p: '2' } } },
      merge,
    );
    expect(stale.status).toBe(409);
    const current = await call(
      'PATCH',
      `${WT}/k4`,
      {
        metadata: {
          resourceVersion: unconditional.body.metadata.resourceVersion,
          labels: { p: '3' },
        },
      },
      merge,
    );
    expect(current.status).toBe(200);
  });

  it('K5 a byte-identical write is a no-op: same RV, no watch event', async () => {
    const a = await create(WT, trigger('k5'));
    const same = await call('PUT', `${WT}/k5`, a);
    expect(same.status).toBe(200);
    expect(same.body.metadata.resourceVersion).toBe(a.metadata.resourceVersion);
    const samePatch = await call(
      'PATCH',
      `${WT}/k5`,
      { spec: { timeout: '30s' } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(samePatch.body.metadata.resourceVersion).toBe(a.metadata.resourceVersion);
    const changed = await call(
      'PATCH',
      `${WT}/k5`,
      { spec: { timeout: '31s' } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(rvOf(changed.body)).toBeGreaterThan(rvOf(a));
    const watch = await readWatch(
      `${server.url}${WT}?watch=1&resourceVersion=${a.metadata.resourceVersion}&fieldSelector=metadata.name=k5`,
      { timeoutMs: 300 },
    );
    expect(watch.events.map((e) => [e.type, e.object.metadata.resourceVersion])).toEqual([
      ['MODIFIED', changed.body.metadata.resourceVersion],
    ]);
  });

  it('K6 create sets uid, creationTimestamp, RV, generation=1, generateName; rejects duplicates, RVs and missing namespaces', async () => {
    const gen = await create(WT, {
      ...trigger(''),
      metadata: { generateName: 'k6-' },
    } as unknown as Obj);
    expect(gen.metadata.name).toMatch(/^k6-[a-z0-9]{5}$/);
    expect(gen.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(gen.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(gen.metadata.generation).toBe(1);
    expect(gen.metadata.resourceVersion).toMatch(/^\d+$/);
    const dup = await call<{ reason: string; code: number; message: string }>(
      'POST',
      WT,
      trigger(gen.metadata.name),
    );
    expect(dup.status).toBe(409);
    expect(dup.body.reason).toBe('AlreadyExists');
    expect(dup.body.message).toBe(
      `webhooktriggers.hookgate.dev "${gen.metadata.name}" already exists`,
    );
    const withRv = await call('POST', WT, {
      ...trigger('k6-rv'),
      metadata: { name: 'k6-rv', resourceVersion: '5' },
    });
    expect(withRv.status).toBeGreaterThanOrEqual(400);
    expect((await call('GET', `${WT}/k6-rv`)).status).toBe(404);
    const noNs = await call<{ details: { kind: string; name: string } }>(
      'POST',
      `/apis/${GROUP}/${VERSION}/namespaces/nope/webhooktriggers`,
      trigger('k6-ns'),
    );
    expect(noNs.status).toBe(404);
    expect(noNs.body.details).toMatchObject({ kind: 'namespaces', name: 'nope' });
  });

  it('K6b a body of another apiVersion, or a name that is not a string, is 400 BadRequest; a missing apiVersion takes the URL’s', async () => {
    const wrong = await call('POST', WT, { ...trigger('k6b-a'), apiVersion: `${GROUP}/v1` });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({
      kind: 'Status',
      reason: 'BadRequest',
      message: `the API version in the data (${GROUP}/v1) does not match the expected API version (${GROUP}/${VERSION})`,
    });
    const put = await call('PUT', `${WT}/k6b-a`, { ...trigger('k6b-a'), apiVersion: 'v1' });
    expect(put.status).toBe(400);
    const numeric = await call('POST', WT, {
      ...trigger('x'),
      metadata: { name: 42 },
    });
    expect(numeric.status).toBe(400);
    expect(numeric.body.message).toBe(
      'json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string',
    );
    const { apiVersion: _a, ...untyped } = trigger('k6b-b');
    const created = await create(WT, untyped);
    expect(created.apiVersion).toBe(`${GROUP}/${VERSION}`);
  });

  it('K6c label keys and values and annotation keys follow ObjectMeta validation; annotations at most 256 KiB', async () => {
    const bad = await call<{
      reason: string;
      message: string;
      details: { causes: { field: string; reason: string; message: string }[] };
    }>('POST', WT, {
      ...trigger('k6c-a'),
      metadata: {
        name: 'k6c-a',
        labels: { 'team a': 'x', 'example.com/ok': 'not ok!', 'a/b/c': 'y', ['n'.repeat(64)]: '' },
        annotations: { 'Example.COM/Fine': 'x', '/nameless': 'y' },
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.reason).toBe('Invalid');
    const nameRule =
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
      "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    expect(bad.body.details.causes).toEqual([
      {
        field: 'metadata.labels',
        reason: 'FieldValueInvalid',
        message: `Invalid value: "team a": ${nameRule}`,
      },
      {
        field: 'metadata.labels',
        reason: 'FieldValueInvalid',
        message:
          'Invalid value: "not ok!": a valid label must be an empty string or consist of alphanumeric characters, ' +
          "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', " +
          "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
      },
      {
        field: 'metadata.labels',
        reason: 'FieldValueInvalid',
        message:
          "Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
          "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') " +
          "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
      },
      {
        field: 'metadata.labels',
        reason: 'FieldValueInvalid',
        message: `Invalid value: "${'n'.repeat(64)}": name part must be no more than 63 bytes`,
      },
      {
        field: 'metadata.annotations',
        reason: 'FieldValueInvalid',
        message: 'Invalid value: "/nameless": prefix part must be non-empty',
      },
    ]);
    expect(bad.body.message).toMatch(
      /^WebhookTrigger\.hookgate\.dev "k6c-a" is invalid: \[metadata\.labels: Invalid value: "team a"/,
    );
    expect((await call('GET', `${WT}/k6c-a`)).status).toBe(404);
    const big = await call<{ details: { causes: { field: string; message: string }[] } }>(
      'POST',
      WT,
      {
        ...trigger('k6c-b'),
        metadata: { name: 'k6c-b', annotations: { note: 'x'.repeat(256 * 1024) } },
      },
    );
    expect(big.status).toBe(422);
    expect(big.body.details.causes).toEqual([
      {
        field: 'metadata.annotations',
        reason: 'FieldValueTooLong',
        message: 'Too long: may not be more than 262144 bytes',
      },
    ]);
    // Valid ones, with an empty label value and an upper-case annotation prefix, pass.
    await create(WT, {
      ...trigger('k6c-c'),
      metadata: {
        name: 'k6c-c',
        labels: { 'app.kubernetes.io/name': 'orders', tier: '', 'My_Label.v2': 'A-1_b.c' },
        annotations: { 'Example.COM/Fine': 'x' },
      },
    });
  });

  it('K6d finalizers are qualified names; ownerReferences need apiVersion, kind, name and uid, and one controller at most', async () => {
    type Causes = { details: { causes: { field: string; reason: string; message: string }[] } };
    const owner = { apiVersion: `${GROUP}/${VERSION}`, kind: 'Workflow', name: 'w' };
    const bad = await call<Causes>('POST', WT, {
      ...trigger('k6d-a'),
      metadata: {
        name: 'k6d-a',
        finalizers: ['hookgate.dev/ok', 'a b', 'orphan', 'foregroundDeletion'],
        ownerReferences: [
          { ...owner, controller: true },
          { apiVersion: 'a/b/c', kind: '', name: 'x', uid: 'u2', controller: true },
          { apiVersion: 'v1', kind: 'Event', name: 'e', uid: 'u3' },
        ],
      },
    });
    expect(bad.status).toBe(422);
    const nameRule =
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
      "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    expect(bad.body.details.causes).toEqual([
      {
        field: 'metadata.ownerReferences[0].uid',
        reason: 'FieldValueRequired',
        message: 'Required value: must not be empty',
      },
      {
        field: 'metadata.ownerReferences[1].apiVersion',
        reason: 'FieldValueInvalid',
        message: 'Invalid value: "a/b/c": must be <group>/<version> or <version>',
      },
      {
        field: 'metadata.ownerReferences[1].kind',
        reason: 'FieldValueRequired',
        message: 'Required value: must not be empty',
      },
      {
        field: 'metadata.ownerReferences',
        reason: 'FieldValueInvalid',
        message: `Invalid value: [{"apiVersion":"${GROUP}/${VERSION}","kind":"Workflow","name":"w","uid":"","controller":true},{"apiVersion":"a/b/c","kind":"","name":"x","uid":"u2","controller":true},{"apiVersion":"v1","kind":"Event","name":"e","uid":"u3"}]: Only one reference can have Controller set to true. Found "true" in references for Workflow/w and /x`,
      },
      {
        field: 'metadata.ownerReferences[2]',
        reason: 'FieldValueInvalid',
        message:
          'Invalid value: {"apiVersion":"v1","kind":"Event","name":"e","uid":"u3"}: /v1, Kind=Event is disallowed from being an owner',
      },
      {
        field: 'metadata.finalizers',
        reason: 'FieldValueInvalid',
        message: `Invalid value: "a b": ${nameRule}`,
      },
      {
        field: 'metadata.finalizers',
        reason: 'FieldValueInvalid',
        message:
          'Invalid value: ["hookgate.dev/ok","a b","orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion cannot be both set',
      },
    ]);
    // The same rules on update (here a merge patch adding a finalizer).
    await create(WT, { ...trigger('k6d-b'), metadata: { name: 'k6d-b' } });
    const patched = await call<Causes>(
      'PATCH',
      `${WT}/k6d-b`,
      { metadata: { finalizers: ['example.com/a/b'] } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(patched.status).toBe(422);
    expect(patched.body.details.causes.map((c) => c.field)).toEqual(['metadata.finalizers']);
    await create(WT, {
      ...trigger('k6d-c'),
      metadata: {
        name: 'k6d-c',
        finalizers: ['hookgate.dev/cleanup', 'kubernetes'],
        ownerReferences: [{ ...owner, uid: 'u1', controller: true }],
      },
    });
  });

  it('K6e a finalizer a CR write adds without a "/" gets a Warning header; standard ones, kept ones and /status writes do not', async () => {
    const warning = (f: string, dotted: boolean): string =>
      `299 - "metadata.finalizers: \\"${f}\\": prefer a domain-qualified finalizer name ` +
      `${dotted ? 'including a path (/) ' : ''}to avoid accidental conflicts with other finalizer writers"`;
    const created = await call('POST', WT, {
      ...trigger('k6e'),
      metadata: {
        name: 'k6e',
        finalizers: ['zz-cleanup', 'hookgate.dev/cleanup', 'kubernetes', 'cleanup.hookgate.dev'],
      },
    });
    expect(created.status).toBe(201);
    // One warning per finalizer, in sorted order (sets.String.List), joined by fetch.
    expect(created.headers.get('warning')).toBe(
      [warning('cleanup.hookgate.dev', true), warning('zz-cleanup', false)].join(', '),
    );
    // An update warns only about the finalizers it adds.
    const patched = await call(
      'PATCH',
      `${WT}/k6e`,
      { metadata: { finalizers: ['zz-cleanup', 'cleanup.hookgate.dev', 'more'] } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(patched.status).toBe(200);
    expect(patched.headers.get('warning')).toBe(warning('more', false));
    const status = await call('PUT', `${WT}/k6e/status`, { ...patched.body, status: {} });
    expect(status.status).toBe(200);
    expect(status.headers.get('warning')).toBeNull();
    // Qualified names warn about nothing.
    const clean = await call('POST', WT, {
      ...trigger('k6e-b'),
      metadata: { name: 'k6e-b', finalizers: ['hookgate.dev/cleanup', 'orphan'] },
    });
    expect(clean.status).toBe(201);
    expect(clean.headers.get('warning')).toBeNull();
  });

  it('K7 every error body is a Status; a successful DELETE returns 200 with the object', async () => {
    const errors = await Promise.all([
      call('GET', `${WT}/k7-missing`),
      call('POST', WT, { ...trigger('k7-bad'), spec: { workflowRef: {} } }),
      call('GET', '/apis/nope.dev/v1/things'),
      call(
        'PATCH',
        `${WT}/k7-missing`,
        {},
        { 'Content-Type': 'application/strategic-merge-patch+json' },
      ),
    ]);
    for (const e of errors) {
      expect(e.status).toBeGreaterThanOrEqual(400);
      expect(e.body).toMatchObject({
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        code: e.status,
      });
    }
    const k7 = await create(WT, trigger('k7'));
    const wrongUid = await call('DELETE', `${WT}/k7`, { preconditions: { uid: 'not-the-uid' } });
    expect(wrongUid.status).toBe(409);
    // rest.BeforeDelete names the kind where the resource belongs (its GroupResource).
    expect(wrongUid.body).toMatchObject({
      kind: 'Status',
      reason: 'Conflict',
      details: { name: 'k7', group: GROUP, kind: 'WebhookTrigger' },
      message: `Operation cannot be fulfilled on WebhookTrigger.${GROUP} "k7": the UID in the precondition (not-the-uid) does not match the UID in record (${String(k7.metadata.uid)}). The object might have been deleted and then recreated`,
    });
    const wrongRv = await call('DELETE', `${WT}/k7`, { preconditions: { resourceVersion: '1' } });
    expect(wrongRv.body).toMatchObject({
      code: 409,
      message: `Operation cannot be fulfilled on WebhookTrigger.${GROUP} "k7": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${String(k7.metadata.resourceVersion)}). The object might have been modified`,
    });
    const dry = await call('DELETE', `${WT}/k7?dryRun=All`);
    expect(dry.status).toBe(200);
    expect((await call('GET', `${WT}/k7`)).status).toBe(200);
    const del = await call('DELETE', `${WT}/k7`, {
      preconditions: { uid: k7.metadata.uid, resourceVersion: k7.metadata.resourceVersion },
    });
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ kind: 'WebhookTrigger', metadata: { name: 'k7' } });
  });
});

describe('1.2 generation, status, finalizers', () => {
  const ready = (generation: number) => ({
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'Ok',
        message: 'ok',
        lastTransitionTime: '2026-01-01T00:00:00Z',
        observedGeneration: generation,
      },
    ],
  });

  it('K8 with a status subresource: main writes ignore status, /status ignores the rest, generation tracks spec only', async () => {
    const a = await create(WT, { ...trigger('k8'), status: ready(1) });
    expect(a.status).toBeUndefined();
    const main = await call('PUT', `${WT}/k8`, { ...a, status: ready(1) });
    expect(main.body.status).toBeUndefined();
    expect(main.body.metadata.generation).toBe(1);
    const st = await call('PUT', `${WT}/k8/status`, {
      ...a,
      metadata: { ...a.metadata, finalizers: ['hookgate.dev/x'], labels: { l: '1' } },
      spec: { ...(a.spec as object), timeout: '9s' },
      status: ready(1),
    });
    expect(st.status).toBe(200);
    expect(st.body.status).toEqual(ready(1));
    expect(st.body.metadata.finalizers).toBeUndefined();
    expect(st.body.metadata.labels).toBeUndefined();
    expect((st.body.spec as { timeout: string }).timeout).toBe('30s');
    expect(st.body.metadata.generation).toBe(1);
    const labelled = await call(
      'PATCH',
      `${WT}/k8`,
      { metadata: { labels: { a: 'b' } } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(labelled.body.metadata.generation).toBe(1);
    const spec = await call(
      'PATCH',
      `${WT}/k8`,
      { spec: { timeout: '9s' } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(spec.body.metadata.generation).toBe(2);
    expect(spec.body.status).toEqual(ready(1));
  });

  it('K9 without a status subresource any change outside metadata, status included, bumps generation', async () => {
    const w = await create(WIDGETS, { ...widget('k9'), status: { phase: 'New' } });
    expect(w.status).toEqual({ phase: 'New' });
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    const labelled = await call(
      'PATCH',
      `${WIDGETS}/k9`,
      { metadata: { labels: { a: 'b' } } },
      merge,
    );
    expect(labelled.body.metadata.generation).toBe(1);
    const status = await call('PATCH', `${WIDGETS}/k9`, { status: { phase: 'Done' } }, merge);
    expect(status.body.metadata.generation).toBe(2);
    expect((await call('GET', `${WIDGETS}/k9/status`)).status).toBe(404);
  });

  it('K10 finalizers: deletionTimestamp + grace 0 + generation bump + MODIFIED; no new finalizers; last one removed → DELETED', async () => {
    const a = await create(WT, {
      ...trigger('k10'),
      metadata: { name: 'k10', finalizers: ['hookgate.dev/cleanup'] },
    });
    // On a live object deletionTimestamp is an immutable field: rest.BeforeUpdate only
    // restores a stored one, ValidateObjectMetaAccessorUpdate refuses the change (422),
    // through PUT and PATCH alike.
    const immutable = (name: string, field: string, value: string) => ({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `WebhookTrigger.hookgate.dev "${name}" is invalid: metadata.${field}: Invalid value: ${value}: field is immutable`,
      reason: 'Invalid',
      details: {
        name,
        group: GROUP,
        kind: 'WebhookTrigger',
        causes: [
          {
            reason: 'FieldValueInvalid',
            message: `Invalid value: ${value}: field is immutable`,
            field: `metadata.${field}`,
          },
        ],
      },
      code: 422,
    });
    const early = await call('PUT', `${WT}/k10`, {
      ...a,
      metadata: { ...a.metadata, deletionTimestamp: '2030-01-01T00:00:00.000Z' },
    });
    expect(early.status).toBe(422);
    expect(early.body).toEqual(immutable('k10', 'deletionTimestamp', '"2030-01-01T00:00:00Z"'));
    const earlyPatch = await call(
      'PATCH',
      `${WT}/k10`,
      { metadata: { deletionTimestamp: '2030-01-01T00:00:00Z' } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(earlyPatch.body).toEqual(
      immutable('k10', 'deletionTimestamp', '"2030-01-01T00:00:00Z"'),
    );
    expect((await call('GET', `${WT}/k10`)).body.metadata.resourceVersion).toBe(
      a.metadata.resourceVersion,
    );
    const del = await call('DELETE', `${WT}/k10`);
    expect(del.status).toBe(200);
    const marked = del.body;
    expect(marked.metadata.deletionTimestamp).toMatch(/Z$/);
    expect(marked.metadata.deletionGracePeriodSeconds).toBe(0);
    expect(marked.metadata.generation).toBe(2);
    expect((await call('GET', `${WT}/k10`)).status).toBe(200);
    const again = await call('DELETE', `${WT}/k10`);
    expect(again.body.metadata.resourceVersion).toBe(marked.metadata.resourceVersion);
    const more = await call('PUT', `${WT}/k10`, {
      ...marked,
      metadata: { ...marked.metadata, finalizers: ['hookgate.dev/cleanup', 'other/x'] },
    });
    expect(more.status).toBe(422);
    expect(JSON.stringify(more.body)).toContain(
      'no new finalizers can be added if the object is being deleted',
    );
    const moved = await call('PUT', `${WT}/k10`, {
      ...marked,
      metadata: {
        ...marked.metadata,
        deletionTimestamp: '2030-01-01T00:00:00Z',
        labels: { t: '1' },
      },
    });
    expect(moved.body.metadata.deletionTimestamp).toBe(marked.metadata.deletionTimestamp);
    // The grace period is restored only when left out; another one is refused.
    const regrace = await call('PUT', `${WT}/k10`, {
      ...moved.body,
      metadata: { ...moved.body.metadata, deletionGracePeriodSeconds: 30 },
    });
    expect(regrace.body).toEqual(immutable('k10', 'deletionGracePeriodSeconds', '30'));
    const removed = await call(
      'PATCH',
      `${WT}/k10`,
      [{ op: 'remove', path: '/metadata/finalizers' }],
      { 'Content-Type': 'application/json-patch+json' },
    );
    expect(removed.status).toBe(200);
    expect((await call('GET', `${WT}/k10`)).status).toBe(404);
    const watch = await readWatch(
      `${server.url}${WT}?watch=1&resourceVersion=${a.metadata.resourceVersion}&fieldSelector=metadata.name%3Dk10`,
      { timeoutMs: 300 },
    );
    expect(watch.events.map((e) => e.type)).toEqual(['MODIFIED', 'MODIFIED', 'DELETED']);
    expect(watch.events[2]?.object.metadata.resourceVersion).toBe(String(rvOf(moved.body) + 1));
  });
});

describe('1.3 watch', () => {
  it('K11 200, chunked, one JSON event per line; client-node Watch parses every line', async () => {
    await create(WIDGETS, widget('k11-a'));
    await create(WIDGETS, widget('k11-b'));
    const raw = await readWatch(`${server.url}${WIDGETS}?watch=1&labelSelector=`, { count: 2 });
    expect(raw.status).toBe(200);
    expect(raw.headers.get('transfer-encoding')).toBe('chunked');
    expect(raw.headers.get('content-type')).toBe('application/json');
    for (const line of raw.lines) {
      const ev = JSON.parse(line) as WatchEvent;
      expect(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']).toContain(ev.type);
      expect(ev.object.kind).toBe('Widget');
    }
    const kc = new KubeConfig();
    kc.loadFromFile(server.writeKubeconfig(dir));
    const seen: string[] = [];
    const done = new Promise<void>((resolveDone) => {
      void new Watch(kc)
        .watch(
          WIDGETS,
          { fieldSelector: 'metadata.name=k11-a' },
          (phase, obj: Obj) => {
            seen.push(`${phase}:${obj.metadata.name}`);
            if (seen.length === 2) resolveDone();
          },
          () => undefined,
        )
        .then(async (ctrl) => {
          await call(
            'PATCH',
            `${WIDGETS}/k11-a`,
            { spec: { size: 2 } },
            { 'Content-Type': 'application/merge-patch+json' },
          );
          await done;
          ctrl.abort();
        });
    });
    await done;
    expect(seen).toEqual(['ADDED:k11-a', 'MODIFIED:k11-a']);
  });

  it('K12 a watch from RV=N delivers every later change in order without gaps; RV unset starts with ADDED', async () => {
    const first = await create(WIDGETS, widget('k12'));
    const rvs: string[] = [];
    const live = readWatch(
      `${server.url}${WIDGETS}?watch=true&resourceVersion=${first.metadata.resourceVersion}&fieldSelector=metadata.name%3Dk12`,
      {
        count: 5,
        onOpen: async () => {
          for (let i = 2; i <= 6; i++) {
            const r = await call(
              'PATCH',
              `${WIDGETS}/k12`,
              { spec: { size: i } },
              { 'Content-Type': 'application/merge-patch+json' },
            );
            rvs.push(r.body.metadata.resourceVersion ?? '');
          }
        },
      },
    );
    const w = await live;
    expect(w.events.map((e) => e.object.metadata.resourceVersion)).toEqual(rvs);
    expect(w.events.map((e) => (e.object.spec as { size: number }).size)).toEqual([2, 3, 4, 5, 6]);
    const replay = await readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${first.metadata.resourceVersion}&fieldSelector=metadata.name%3Dk12`,
      { count: 5 },
    );
    expect(replay.events.map((e) => e.object.metadata.resourceVersion)).toEqual(rvs);
    for (const rv of [undefined, '0']) {
      const fresh = await readWatch(
        `${server.url}${WIDGETS}?watch=1&fieldSelector=metadata.name%3Dk12${rv ? `&resourceVersion=${rv}` : ''}`,
        { count: 1 },
      );
      expect(fresh.events[0]).toMatchObject({
        type: 'ADDED',
        object: { metadata: { name: 'k12', resourceVersion: rvs[4] } },
      });
    }
  });

  it('K12b a watch from a resourceVersion ahead of the server waits for it; a watch-list gets 504 Too large resource version after 3 s', async () => {
    // cache_watcher.go process: "only send events newer than resourceVersion".
    const w = await create(WIDGETS, widget('k12b'));
    const ahead = rvOf(w) + 3;
    const rvs: string[] = [];
    const future = await readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${ahead}&fieldSelector=metadata.name%3Dk12b`,
      {
        count: 1,
        onOpen: async () => {
          for (let i = 2; i <= 5; i++) {
            const r = await call(
              'PATCH',
              `${WIDGETS}/k12b`,
              { spec: { size: i } },
              { 'Content-Type': 'application/merge-patch+json' },
            );
            rvs.push(r.body.metadata.resourceVersion ?? '');
          }
        },
      },
    );
    expect(future.status).toBe(200);
    expect(rvs.map(Number)).toEqual([ahead - 2, ahead - 1, ahead, ahead + 1]);
    expect(future.events.map((e) => [e.type, e.object.metadata.resourceVersion])).toEqual([
      ['MODIFIED', String(ahead + 1)],
    ]);

    // A watch-list waits for the cache (watch_cache.go waitUntilFreshAndBlock, 3 s) …
    const list = (rv: number) =>
      `${server.url}${WIDGETS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dk12b&resourceVersion=${rv}`;
    const soon = server.resourceVersion() + 1;
    const writer = sleep(300).then(() =>
      call(
        'PATCH',
        `${WIDGETS}/k12b`,
        { spec: { size: 9 } },
        {
          'Content-Type': 'application/merge-patch+json',
        },
      ),
    );
    const caughtUp = await readWatch(list(soon), { count: 2 });
    await writer;
    expect(caughtUp.events.map((e) => [e.type, e.object.metadata.resourceVersion])).toEqual([
      ['ADDED', String(soon)],
      ['BOOKMARK', String(soon)],
    ]);
    // … and past it answers 200 with one ERROR event, a 504 Timeout Status (storage
    // errors.go NewTooLargeResourceVersionError), then ends.
    const current = server.resourceVersion();
    const started = Date.now();
    const tooLarge = await readWatch(list(current + 100), { timeoutMs: 2000 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(tooLarge.status).toBe(200);
    expect(tooLarge.headers.get('transfer-encoding')).toBe('chunked');
    expect(tooLarge.ended).toBe(true);
    expect(tooLarge.events).toEqual([
      {
        type: 'ERROR',
        object: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `Timeout: Too large resource version: ${current + 100}, current: ${current}`,
          reason: 'Timeout',
          details: {
            causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
            retryAfterSeconds: 1,
          },
          code: 504,
        },
      },
    ]);
  });

  it('K13 DELETED carries the last state at the deletion RV; filtered watches see (un)matching as ADDED/DELETED', async () => {
    const w = await create(WIDGETS, widget('k13', {}, { team: 'a' }));
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    const out = await call(
      'PATCH',
      `${WIDGETS}/k13`,
      { metadata: { labels: { team: 'b' } } },
      merge,
    );
    const back = await call(
      'PATCH',
      `${WIDGETS}/k13`,
      { metadata: { labels: { team: 'a' } }, spec: { size: 7 } },
      merge,
    );
    const del = await call('DELETE', `${WIDGETS}/k13`);
    const filtered = await readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${w.metadata.resourceVersion}&labelSelector=team%3Da`,
      { count: 3 },
    );
    expect(filtered.events.map((e) => [e.type, e.object.metadata.resourceVersion])).toEqual([
      ['DELETED', out.body.metadata.resourceVersion],
      ['ADDED', back.body.metadata.resourceVersion],
      ['DELETED', del.body.metadata.resourceVersion],
    ]);
    // Stopped matching: DELETED carries the previous object (still team=a, as the
    // selector last saw it) at the event's RV (cache_watcher.go convertToWatchEvent);
    // started matching: ADDED carries the new object.
    const [left, joined] = filtered.events;
    expect(left?.object.metadata.labels).toEqual({ team: 'a' });
    expect(left?.object.spec).toEqual(w.spec);
    expect(joined?.object.metadata.labels).toEqual({ team: 'a' });
    expect(joined?.object.spec).toMatchObject({ size: 7 });
    const last = filtered.events[2]?.object;
    expect(last?.spec).toMatchObject({ size: 7 });
    expect(Number(last?.metadata.resourceVersion)).toBe(rvOf(back.body) + 1);
    // The same for a field selector (spec.color is a selectableField of widgets).
    await create(WIDGETS, widget('k13-f', { color: 'red' }));
    const blue = await call('PATCH', `${WIDGETS}/k13-f`, { spec: { color: 'blue' } }, merge);
    const byField = await readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${rvOf(blue.body) - 1}&fieldSelector=${encodeURIComponent('spec.color=red')}`,
      { count: 1 },
    );
    expect(byField.events[0]).toMatchObject({
      type: 'DELETED',
      object: {
        metadata: { name: 'k13-f', resourceVersion: blue.body.metadata.resourceVersion },
        spec: { color: 'red' },
      },
    });
  });

  it('K14 a watch whose RV left the (configurable) window gets 200 + ERROR 410 Expired, then the stream closes', async () => {
    const small = await startKubeApiServer({ historyWindow: 3 });
    try {
      small.applyCrd(widgetCrd());
      const c = client(small);
      const first = (await c('POST', WIDGETS, widget('k14'))).body;
      for (let i = 2; i <= 6; i++)
        await c(
          'PATCH',
          `${WIDGETS}/k14`,
          { spec: { size: i } },
          { 'Content-Type': 'application/merge-patch+json' },
        );
      const oldRv = Number(first.metadata.resourceVersion);
      const w = await readWatch(`${small.url}${WIDGETS}?watch=1&resourceVersion=${oldRv}`, {
        timeoutMs: 1000,
      });
      expect(w.status).toBe(200);
      expect(w.ended).toBe(true);
      expect(w.events).toHaveLength(1);
      const oldest = small.resourceVersion() - 3;
      expect(w.events[0]).toMatchObject({
        type: 'ERROR',
        object: {
          kind: 'Status',
          code: 410,
          reason: 'Expired',
          message: `too old resource version: ${oldRv} (${oldest})`,
        },
      });
      const ok = await readWatch(`${small.url}${WIDGETS}?watch=1&resourceVersion=${oldest}`, {
        count: 3,
      });
      expect(ok.events.map((e) => e.type)).toEqual(['MODIFIED', 'MODIFIED', 'MODIFIED']);
    } finally {
      await small.close();
    }
  });

  it('K14b a CRD spec change recreates its storage: open watches end after the teardown grace, a watch resumed from before it gets 410', async () => {
    const s = await startKubeApiServer({ crdStorageTeardownMs: 200 });
    try {
      s.applyCrd(widgetCrd());
      const c = client(s);
      const crdPath =
        '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.hookgate.dev';
      const rv1 = (await c('POST', WIDGETS, widget('k14b'))).body.metadata.resourceVersion ?? '';
      const watchUrl = (rv: string): string => `${s.url}${WIDGETS}?watch=1&resourceVersion=${rv}`;
      // A change outside spec and accepted names keeps the storage and its watches.
      const labelled = await readWatch(watchUrl(rv1), {
        timeoutMs: 600,
        onOpen: () =>
          s.applyCrd({
            ...widgetCrd(),
            metadata: { name: 'widgets.test.hookgate.dev', labels: { a: 'b' } },
          }),
      });
      expect(labelled).toMatchObject({ ended: false, events: [] });
      // A spec change: the open watch still gets what is written during the grace, then ends
      // cleanly (no ERROR event).
      const changed = widgetCrd() as { spec: { versions: Record<string, unknown>[] } };
      changed.spec.versions[0] = {
        ...changed.spec.versions[0],
        additionalPrinterColumns: [{ name: 'Color', type: 'string', jsonPath: '.spec.color' }],
      };
      let crdRv = '';
      const open = await readWatch(watchUrl(rv1), {
        timeoutMs: 3000,
        onOpen: async () => {
          s.applyCrd(changed);
          crdRv = (await c('GET', crdPath)).body.metadata.resourceVersion ?? '';
          await c('POST', WIDGETS, widget('k14b-2'));
        },
      });
      expect(open.ended).toBe(true);
      expect(open.events.map((e) => [e.type, e.object.metadata.name])).toEqual([
        ['ADDED', 'k14b-2'],
      ]);
      // The new watch cache starts at the CRD's change: an older RV is expired.
      const resumed = await readWatch(watchUrl(rv1), { timeoutMs: 1000 });
      expect(resumed.ended).toBe(true);
      expect(resumed.events).toEqual([
        {
          type: 'ERROR',
          object: expect.objectContaining({
            code: 410,
            reason: 'Expired',
            message: `too old resource version: ${rv1} (${crdRv})`,
          }),
        },
      ]);
      // From the change on, the new storage serves it, and its watches outlive the teardown.
      const fresh = await readWatch(watchUrl(crdRv), { timeoutMs: 600 });
      expect(fresh.ended).toBe(false);
      expect(fresh.events.map((e) => [e.type, e.object.metadata.name])).toEqual([
        ['ADDED', 'k14b-2'],
      ]);
    } finally {
      await s.close();
    }
  });

  it('K15 BOOKMARKs only with allowWatchBookmarks=true; timeoutSeconds closes the stream cleanly', async () => {
    const rv = server.resourceVersion();
    const withBm = await readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${rv}&allowWatchBookmarks=true`,
      { count: 1, timeoutMs: 1500 },
    );
    expect(withBm.events[0]).toMatchObject({
      type: 'BOOKMARK',
      object: { kind: 'Widget', apiVersion: 'test.hookgate.dev/v1' },
    });
    expect(Number(withBm.events[0]?.object.metadata.resourceVersion)).toBeGreaterThanOrEqual(rv);
    const started = Date.now();
    const timed = await readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${server.resourceVersion()}&timeoutSeconds=1`,
      { timeoutMs: 3000 },
    );
    expect(timed.ended).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(timed.events.filter((e) => e.type === 'BOOKMARK')).toEqual([]);
  });

  it('K15 a watch with timeoutSeconds and bookmarks gets one 2 s before its end (cache_watcher.go nextBookmarkTime), however rare the periodic ones', async () => {
    const s = await startKubeApiServer({ bookmarkIntervalMs: 60_000 });
    try {
      s.applyCrd(widgetCrd());
      const rv = s.resourceVersion();
      const opened = Date.now();
      const w = await readWatch(
        `${s.url}${WIDGETS}?watch=1&resourceVersion=${rv}&allowWatchBookmarks=true&timeoutSeconds=3`,
        { count: 1, timeoutMs: 2500 },
      );
      const after = Date.now() - opened;
      expect(w.events).toEqual([
        {
          type: 'BOOKMARK',
          object: {
            kind: 'Widget',
            apiVersion: 'test.hookgate.dev/v1',
            metadata: { resourceVersion: String(s.resourceVersion()) },
          },
        },
      ]);
      expect(after).toBeGreaterThanOrEqual(900);
      // Without bookmarks: none, and the stream just ends.
      const plain = await readWatch(
        `${s.url}${WIDGETS}?watch=1&resourceVersion=${rv}&timeoutSeconds=3`,
        { timeoutMs: 4500 },
      );
      expect(plain.ended).toBe(true);
      expect(plain.events).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('K16 sendInitialEvents=true: ADDED events, then the k8s.io/initial-events-end BOOKMARK only with allowWatchBookmarks=true', async () => {
    await create(WIDGETS, widget('k16'));
    const base = `${server.url}${WIDGETS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&fieldSelector=metadata.name%3Dk16`;
    const w = await readWatch(`${base}&allowWatchBookmarks=true`, { count: 2 });
    expect(w.events[0]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'k16' } } });
    expect(w.events[1]).toMatchObject({
      type: 'BOOKMARK',
      object: {
        kind: 'Widget',
        metadata: {
          resourceVersion: String(server.resourceVersion()),
          annotations: { 'k8s.io/initial-events-end': 'true' },
        },
      },
    });
    // Without allowWatchBookmarks the watch-list is served all the same (validation.go
    // does not require it, for backward compatibility), only without the end bookmark
    // (cacher.go isListWatchRequest, setInitialEventsEndBookmarkIfRequested).
    const plain = await readWatch(base, {
      timeoutMs: 600,
      onOpen: async () => {
        await sleep(300);
        await call('PATCH', `${WIDGETS}/k16`, { spec: { size: 2 } }, MERGE);
      },
    });
    expect(plain.status).toBe(200);
    expect(plain.events.map((e) => [e.type, e.object.metadata.name])).toEqual([
      ['ADDED', 'k16'],
      ['MODIFIED', 'k16'],
    ]);
  });

  it('K16 sendInitialEvents=false starts at the current state with no initial events, from resourceVersion "" and "0" alike', async () => {
    await create(WIDGETS, widget('k16-off'));
    for (const [i, rv] of ['', '&resourceVersion=0'].entries()) {
      const w = await readWatch(
        `${server.url}${WIDGETS}?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dk16-off${rv}`,
        {
          timeoutMs: 600,
          onOpen: async () => {
            await sleep(150);
            await call('PATCH', `${WIDGETS}/k16-off`, { spec: { size: 10 + i } }, MERGE);
          },
        },
      );
      expect(w.status, rv).toBe(200);
      // watch_cache.go getAllEventsSinceLocked: SendInitialEvents=false from "0" starts
      // at the cache's RV, from "" at etcd's current RV (cacher.go getWatchCacheResourceVersion).
      const changes = w.events.filter((e) => e.type !== 'BOOKMARK');
      expect(
        changes.map((e) => [e.type, e.object.metadata.name]),
        rv,
      ).toEqual([['MODIFIED', 'k16-off']]);
      expect(
        w.events.some((e) => JSON.stringify(e.object).includes('k8s.io/initial-events-end')),
        rv,
      ).toBe(false);
    }
  });

  it('K16 a watch from resourceVersion "" or "0" with neither sendInitialEvents nor resourceVersionMatch is a watch-list (SetListOptionsDefaults, WatchList on in 1.35)', async () => {
    await create(WIDGETS, widget('k16-legacy'));
    for (const rv of ['', '&resourceVersion=0']) {
      const w = await readWatch(
        `${server.url}${WIDGETS}?watch=1&allowWatchBookmarks=true&fieldSelector=metadata.name%3Dk16-legacy${rv}`,
        { count: 2 },
      );
      expect(w.events[0], rv).toMatchObject({ type: 'ADDED' });
      expect(w.events[1], rv).toMatchObject({
        type: 'BOOKMARK',
        object: { metadata: { annotations: { 'k8s.io/initial-events-end': 'true' } } },
      });
    }
    // A query boolean is false only when absent, "0" or "false" in any case
    // (runtime/conversion.go Convert_Slice_string_To_bool, Convert_Slice_string_To_Pointer_bool).
    const yes = await readWatch(
      `${server.url}${WIDGETS}?watch=yes&allowWatchBookmarks=on&sendInitialEvents=&resourceVersionMatch=NotOlderThan&fieldSelector=metadata.name%3Dk16-legacy`,
      { count: 2 },
    );
    expect(yes.headers.get('transfer-encoding')).toBe('chunked');
    expect(yes.events.map((e) => e.type)).toEqual(['ADDED', 'BOOKMARK']);
    const no = await call<{ kind: string }>('GET', `${WIDGETS}?watch=FALSE&allowWatchBookmarks=1`);
    expect(no.body.kind).toBe('WidgetList');
  });

  it("K16 a watch's options are refused as ValidateListOptions refuses them after SetListOptionsDefaults: 422 Invalid, its causes in its order; decoding 400s first, storage errors after", async () => {
    type Refusal = {
      status: number;
      body?: {
        kind: string;
        message: string;
        reason?: string;
        code: number;
        details?: { causes?: { reason: string; message: string; field: string }[] };
      };
    };
    const refused = async (q: string): Promise<Refusal> => {
      const abort = new AbortController();
      const res = await fetch(`${server.url}${WIDGETS}?watch=1&${q}`, {
        signal: abort.signal,
        headers: { Authorization: 'Bearer x' },
      });
      if (res.status === 200) {
        abort.abort();
        return { status: 200 };
      }
      return { status: res.status, body: (await res.json()) as Refusal['body'] };
    };
    const inv = 'ListOptions.meta.k8s.io "" is invalid: ';
    const requires =
      'resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan';
    const needsSie =
      'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided';
    const withContinue =
      'resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided';
    const cases: [string, string][] = [
      // allowWatchBookmarks is not required (only one cause).
      ['sendInitialEvents=true', requires],
      ['sendInitialEvents=false&resourceVersion=0', requires],
      [
        'sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true',
        `[${requires}, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]`,
      ],
      ['resourceVersion=5&resourceVersionMatch=NotOlderThan', needsSie],
      // No defaulting once a match is given, even from "0".
      [
        'resourceVersion=0&resourceVersionMatch=Newest',
        `[${needsSie}, resourceVersionMatch: Unsupported value: "Newest": supported values: "NotOlderThan"]`,
      ],
      // Defaulted to a watch-list (NotOlderThan), which continue is forbidden with.
      ['continue=abc', withContinue],
      [
        'sendInitialEvents=true&resourceVersionMatch=Exact&continue=abc',
        `[${requires}, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan", ${withContinue}]`,
      ],
      // 422 before the field label check and before the storage's resourceVersion parse.
      ['resourceVersionMatch=NotOlderThan&resourceVersion=5&fieldSelector=spec.nope%3D1', needsSie],
      ['resourceVersion=abc&resourceVersionMatch=NotOlderThan', needsSie],
    ];
    for (const [q, message] of cases) {
      const r = await refused(q);
      expect(r.status, q).toBe(422);
      expect(r.body, q).toMatchObject({ kind: 'Status', reason: 'Invalid', code: 422 });
      if (!message.startsWith('[')) expect(r.body?.details?.causes, q).toHaveLength(1);
    }
    const first = await refused('sendInitialEvents=true');
    expect(first.body?.message).toBe(`${inv}${requires}`);
    expect(first.body?.details).toEqual({
      name: '',
      group: 'meta.k8s.io',
      kind: 'ListOptions',
      causes: [
        {
          reason: 'FieldValueForbidden',
          message:
            'Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
          field: 'resourceVersionMatch',
        },
      ],
    });
    for (const [q, message] of cases) {
      expect((await refused(q)).body?.message, q).toBe(`${inv}${message}`);
    }
    const exact = await refused(
      'sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true',
    );
    expect(exact.body?.details?.causes?.[1]).toEqual({
      reason: 'FieldValueNotSupported',
      message: 'Unsupported value: "Exact": supported values: "NotOlderThan"',
      field: 'resourceVersionMatch',
    });

    // Decoding the query (url.Values → metav1.ListOptions → internal) comes first: 400.
    const decodeErrors: [string, string][] = [
      [
        'timeoutSeconds=1s&resourceVersionMatch=Exact',
        'strconv.ParseInt: parsing "1s": invalid syntax',
      ],
      [
        'timeoutSeconds=9223372036854775808&limit=x',
        'strconv.ParseInt: parsing "9223372036854775808": value out of range',
      ],
      ['limit=x&labelSelector=a%3D%3Db%3Dc', 'strconv.ParseInt: parsing "x": invalid syntax'],
    ];
    for (const [q, message] of decodeErrors) {
      const r = await refused(q);
      expect(r.status, q).toBe(400);
      expect(r.body, q).toMatchObject({ reason: 'BadRequest', message });
    }
    const badLabels = await refused('labelSelector=a%3D%3Db%3Dc&resourceVersionMatch=Exact');
    expect(badLabels.status).toBe(400);
    const badFields = await refused('fieldSelector=a%3Db%3Dc&resourceVersionMatch=Exact');
    expect(badFields.body?.message).toBe(
      'invalid field selector: unescaped character in value: 61',
    );
    // The field label check comes after validation (ListResource: Transform after
    // ValidateListOptions), so a valid watch reaches it.
    const label = await refused('fieldSelector=spec.nope%3D1');
    expect(label.body).toMatchObject({
      code: 400,
      message: 'field label not supported: spec.nope',
    });

    // The watch cache parses the resourceVersion (cacher.go Watch →
    // APIObjectVersioner.ParseResourceVersion); its storage.InvalidError is no APIStatus,
    // so it is answered as 500 with no reason (responsewriters ErrorToAPIStatus;
    // kubernetes/kubernetes#139485).
    for (const rv of ['abc', '-1']) {
      const r = await refused(`resourceVersion=${rv}`);
      expect(r.status, rv).toBe(500);
      expect(r.body, rv).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `resourceVersion: Invalid value: "${rv}": strconv.ParseUint: parsing "${rv}": invalid syntax`,
        code: 500,
      });
    }
  });
});

describe('1.4 list and selectors', () => {
  it('K17 list body: <Kind>List, metadata.resourceVersion, items with apiVersion and kind; limit/continue pages one snapshot', async () => {
    await create(WIDGETS, widget('k17-a', {}, { k17: 'y' }));
    await create(WIDGETS, widget('k17-b', {}, { k17: 'y' }));
    await create(WIDGETS, widget('k17-c', { size: 3 }, { k17: 'y' }));
    type List = {
      kind: string;
      apiVersion: string;
      metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
      items: Obj[];
    };
    const all = await call<List>('GET', `${WIDGETS}?labelSelector=k17`);
    expect(all.body.kind).toBe('WidgetList');
    expect(all.body.apiVersion).toBe('test.hookgate.dev/v1');
    expect(all.body.metadata.continue).toBeUndefined();
    expect(all.body.items.map((i) => i.metadata.name)).toEqual(['k17-a', 'k17-b', 'k17-c']);
    for (const item of all.body.items) {
      expect(item).toMatchObject({ apiVersion: 'test.hookgate.dev/v1', kind: 'Widget' });
    }
    const first = await call<List>('GET', `${WIDGETS}?labelSelector=k17&limit=2`);
    expect(first.body.items.map((i) => i.metadata.name)).toEqual(['k17-a', 'k17-b']);
    // etcd's count would include objects the selector drops: omitted (storage/continue.go).
    expect(first.body.metadata).not.toHaveProperty('remainingItemCount');
    const byField = await call<List>('GET', `${WIDGETS}?fieldSelector=metadata.name!%3Dx&limit=1`);
    expect(byField.body.metadata.continue).toBeDefined();
    expect(byField.body.metadata).not.toHaveProperty('remainingItemCount');
    const token = first.body.metadata.continue ?? '';
    expect(token).not.toBe('');
    // Changes after the first page do not leak into the next one.
    await call(
      'PATCH',
      `${WIDGETS}/k17-c`,
      { spec: { size: 9 } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    await create(WIDGETS, widget('k17-d', {}, { k17: 'y' }));
    const second = await call<List>(
      'GET',
      `${WIDGETS}?labelSelector=k17&limit=2&continue=${token}`,
    );
    expect(
      second.body.items.map((i) => [i.metadata.name, (i.spec as { size: number }).size]),
    ).toEqual([['k17-c', 3]]);
    expect(second.body.metadata.resourceVersion).toBe(first.body.metadata.resourceVersion);
    expect(second.body.metadata.continue).toBeUndefined();
    const small = await startKubeApiServer({ historyWindow: 2 });
    try {
      small.applyCrd(widgetCrd());
      const c = client(small);
      for (const n of ['a', 'b', 'c']) await c('POST', WIDGETS, widget(`k17-${n}`));
      const page = await c<List>('GET', `${WIDGETS}?limit=1`);
      expect(page.body.metadata.remainingItemCount).toBe(2);
      for (let i = 2; i < 5; i++)
        await c(
          'PATCH',
          `${WIDGETS}/k17-a`,
          { spec: { size: i } },
          { 'Content-Type': 'application/merge-patch+json' },
        );
      const expiredPage = await c<{ code: number; reason: string }>(
        'GET',
        `${WIDGETS}?limit=1&continue=${page.body.metadata.continue ?? ''}`,
      );
      expect(expiredPage.status).toBe(410);
      expect(expiredPage.body).toMatchObject({ kind: 'Status', code: 410, reason: 'Expired' });
    } finally {
      await small.close();
    }
  });

  type WidgetList = {
    kind: string;
    metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
    items: Obj[];
  };
  type StatusReply = {
    kind: string;
    code: number;
    reason?: string;
    message: string;
    metadata: { continue?: string };
    details?: { causes?: { reason: string; message: string; field?: string }[] };
  };
  const merge = { 'Content-Type': 'application/merge-patch+json' };
  const sizes = (l: WidgetList): [string, number | undefined][] =>
    l.items.map((i) => [i.metadata.name, (i.spec as { size?: number }).size]);

  it('K17b a list’s resourceVersion: unset or NotOlderThan → the newest state, "0" ignores limit, Exact and the legacy limit form → the snapshot at N', async () => {
    const a = await create(WIDGETS, widget('k17b-a', { size: 1 }, { k17b: 'y' }));
    const b = await create(WIDGETS, widget('k17b-b', { size: 1 }, { k17b: 'y' }));
    const atB = rvOf(b);
    await call('PATCH', `${WIDGETS}/k17b-a`, { spec: { size: 2 } }, merge);
    await create(WIDGETS, widget('k17b-c', { size: 1 }, { k17b: 'y' }));
    expect((await call('DELETE', `${WIDGETS}/k17b-b`)).status).toBe(200);
    const now = server.resourceVersion();
    const list = (q: string) => call<WidgetList>('GET', `${WIDGETS}?labelSelector=k17b&${q}`);

    // Unset: the newest state (a consistent read), with the counter as its RV (K1).
    const newest = [
      ['k17b-a', 2],
      ['k17b-c', 1],
    ];
    const unset = await list('');
    expect(sizes(unset.body)).toEqual(newest);
    expect(unset.body.metadata.resourceVersion).toBe(String(now));
    // NotOlderThan an older RV (explicit, or implied without a limit): the newest state.
    for (const q of [
      `resourceVersion=${atB}&resourceVersionMatch=NotOlderThan`,
      `resourceVersion=${atB}`,
    ]) {
      const r = await list(q);
      expect(r.status).toBe(200);
      expect(sizes(r.body)).toEqual(newest);
      expect(r.body.metadata.resourceVersion).toBe(String(now));
    }
    // "0" (any): the watch cache ignores limit (cacher.go computeListLimit): one page.
    for (const q of [
      'resourceVersion=0&limit=1',
      'resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=1',
    ]) {
      const r = await list(q);
      expect(sizes(r.body)).toEqual(newest);
      expect(r.body.metadata).toEqual({ resourceVersion: String(now) });
    }
    // NotOlderThan with a limit pages the newest state.
    const paged = await list(`resourceVersion=${atB}&resourceVersionMatch=NotOlderThan&limit=1`);
    expect(sizes(paged.body)).toEqual([['k17b-a', 2]]);
    expect(paged.body.metadata.resourceVersion).toBe(String(now));

    // Exact: the state at N, with N as the list's RV and the items' RVs of then.
    const exact = await list(`resourceVersion=${atB}&resourceVersionMatch=Exact`);
    expect(exact.status).toBe(200);
    expect(sizes(exact.body)).toEqual([
      ['k17b-a', 1],
      ['k17b-b', 1],
    ]);
    expect(exact.body.metadata.resourceVersion).toBe(String(atB));
    expect(exact.body.items.map((i) => i.metadata.resourceVersion)).toEqual([
      a.metadata.resourceVersion,
      b.metadata.resourceVersion,
    ]);
    // The legacy form (an RV other than "0" with a limit, no match) is exact too, and its
    // continue token stays on that snapshot.
    const first = await list(`resourceVersion=${atB}&limit=1`);
    expect(sizes(first.body)).toEqual([['k17b-a', 1]]);
    expect(first.body.metadata.resourceVersion).toBe(String(atB));
    const token = first.body.metadata.continue ?? '';
    const next = await list(`limit=1&continue=${token}`);
    expect(sizes(next.body)).toEqual([['k17b-b', 1]]);
    expect(next.body.metadata).toEqual({ resourceVersion: String(atB) });
    // A continue with resourceVersion "0" is allowed (and, from the cache, unlimited).
    const zero = await list(`resourceVersion=0&limit=1&continue=${token}`);
    expect(sizes(zero.body)).toEqual([['k17b-b', 1]]);
  });

  it('K17c Exact (and the legacy limit form) at an RV compacted out of the window → 410 Expired; an expired continue token’s 410 carries a token for the newest state', async () => {
    const small = await startKubeApiServer({ historyWindow: 2 });
    try {
      small.applyCrd(widgetCrd());
      const c = client(small);
      for (const n of ['a', 'b', 'c']) await c('POST', WIDGETS, widget(`k17c-${n}`));
      const old = small.resourceVersion();
      const page = await c<WidgetList>('GET', `${WIDGETS}?limit=1`);
      expect(page.body.metadata.resourceVersion).toBe(String(old));
      // Inside the window the state at `old` can still be read exactly.
      await c('PATCH', `${WIDGETS}/k17c-a`, { spec: { size: 2 } }, merge);
      const inWindow = await c<WidgetList>(
        'GET',
        `${WIDGETS}?resourceVersion=${old}&resourceVersionMatch=Exact`,
      );
      expect(inWindow.status).toBe(200);
      expect(inWindow.body.metadata.resourceVersion).toBe(String(old));
      for (let i = 3; i < 6; i++)
        await c('PATCH', `${WIDGETS}/k17c-a`, { spec: { size: i } }, merge);
      // etcd3/errors.go interpretListError: ErrCompacted → NewResourceExpired.
      for (const q of [
        `resourceVersion=${old}&resourceVersionMatch=Exact`,
        `resourceVersion=${old}&limit=1`,
      ]) {
        const gone = await c<StatusReply>('GET', `${WIDGETS}?${q}`);
        expect(gone.status).toBe(410);
        expect(gone.body).toEqual({
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: 'The resourceVersion for the provided list is too old.',
          reason: 'Expired',
          code: 410,
        });
      }
      // NotOlderThan the same RV is still served, at the newest state.
      const fresh = await c<WidgetList>(
        'GET',
        `${WIDGETS}?resourceVersion=${old}&resourceVersionMatch=NotOlderThan`,
      );
      expect(fresh.status).toBe(200);
      expect(fresh.body.metadata.resourceVersion).toBe(String(small.resourceVersion()));
      // handleCompactedErrorForPaging: the 410 carries a continue token (rv -1) that goes
      // on from the same key at the newest state.
      const expiredPage = await c<StatusReply>(
        'GET',
        `${WIDGETS}?limit=1&continue=${page.body.metadata.continue ?? ''}`,
      );
      expect(expiredPage.status).toBe(410);
      expect(expiredPage.body.reason).toBe('Expired');
      expect(expiredPage.body.message).toMatch(/^The provided continue parameter is too old/);
      const resume = expiredPage.body.metadata.continue ?? '';
      expect(JSON.parse(Buffer.from(resume, 'base64url').toString())).toMatchObject({
        v: 'meta.k8s.io/v1',
        rv: -1,
      });
      const rest = await c<WidgetList>('GET', `${WIDGETS}?limit=1&continue=${resume}`);
      expect(rest.status).toBe(200);
      expect(rest.body.items.map((i) => i.metadata.name)).toEqual(['k17c-b']);
      expect(rest.body.metadata.resourceVersion).toBe(String(small.resourceVersion()));
      const last = await c<WidgetList>(
        'GET',
        `${WIDGETS}?limit=1&continue=${rest.body.metadata.continue ?? ''}`,
      );
      expect(last.body.items.map((i) => i.metadata.name)).toEqual(['k17c-c']);
      expect(last.body.metadata.continue).toBeUndefined();
    } finally {
      await small.close();
    }
  });

  it('K17d invalid list options → 422 ListOptions (ValidateListOptions) or 400 (storage), worded as the API server words them', async () => {
    const expectStatus = async (q: string, code: number, message: string) => {
      const r = await call<StatusReply>('GET', `${WIDGETS}?${q}`);
      expect(r.status, q).toBe(code);
      expect(r.body, q).toMatchObject({
        kind: 'Status',
        code,
        reason: code === 422 ? 'Invalid' : 'BadRequest',
        message,
      });
      return r.body;
    };
    const inv = 'ListOptions.meta.k8s.io "" is invalid: ';
    const unset = await expectStatus(
      'resourceVersionMatch=NotOlderThan',
      422,
      `${inv}resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`,
    );
    expect(unset.details).toEqual({
      name: '',
      group: 'meta.k8s.io',
      kind: 'ListOptions',
      causes: [
        {
          reason: 'FieldValueForbidden',
          message:
            'Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided',
          field: 'resourceVersionMatch',
        },
      ],
    });
    await expectStatus(
      'resourceVersion=0&resourceVersionMatch=Exact',
      422,
      `${inv}resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"`,
    );
    await expectStatus(
      'resourceVersion=5&resourceVersionMatch=Newest',
      422,
      `${inv}resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""`,
    );
    const page = await call<WidgetList>('GET', `${WIDGETS}?limit=1`);
    const token = page.body.metadata.continue ?? '';
    expect(token).not.toBe('');
    await expectStatus(
      `resourceVersionMatch=Exact&continue=${token}`,
      422,
      `${inv}[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]`,
    );
    await expectStatus(
      'sendInitialEvents=true',
      422,
      `${inv}sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list`,
    );
    await expectStatus(
      'sendInitialEvents=false',
      422,
      `${inv}sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list`,
    );
    // ListResource: decoding the query comes first (400), the field label check after
    // the 422s (Transform after ValidateListOptions).
    await expectStatus(
      'limit=abc&resourceVersionMatch=Exact',
      400,
      'strconv.ParseInt: parsing "abc": invalid syntax',
    );
    await expectStatus(
      'resourceVersionMatch=Exact&fieldSelector=spec.nope%3D1',
      422,
      `${inv}resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`,
    );
    // storage.ValidateListOptions: 400s.
    await expectStatus(
      `resourceVersion=${server.resourceVersion()}&continue=${token}`,
      400,
      'specifying resource version is not allowed when using continue',
    );
    await expectStatus(
      'resourceVersion=abc',
      400,
      'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
    );
    await expectStatus(
      'resourceVersion=-1&resourceVersionMatch=NotOlderThan',
      400,
      'invalid resource version: resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax',
    );
    await expectStatus(
      'resourceVersion=18446744073709551616&resourceVersionMatch=Exact',
      400,
      'invalid resource version: resourceVersion: Invalid value: "18446744073709551616": strconv.ParseUint: parsing "18446744073709551616": value out of range',
    );
    const encode = (t: unknown) => Buffer.from(JSON.stringify(t)).toString('base64url');
    const invalidToken = 'invalid continue token: continue key is not valid';
    await expectStatus(
      `continue=ab%3Dc`,
      400,
      `${invalidToken}: illegal base64 data at input byte 2`,
    );
    await expectStatus(
      `continue=${encode({ v: 'meta.k8s.io/v2', rv: 5, start: 'default/a' })}`,
      400,
      `${invalidToken}: server does not recognize this encoded version meta.k8s.io/v2`,
    );
    await expectStatus(
      `continue=${encode({ v: 'meta.k8s.io/v1', rv: 0, start: 'default/a' })}`,
      400,
      `${invalidToken}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)`,
    );
    await expectStatus(
      `continue=${encode({ v: 'meta.k8s.io/v1', rv: 5, start: '' })}`,
      400,
      `${invalidToken}: encoded start key empty (version meta.k8s.io/v1)`,
    );
    await expectStatus(
      `continue=${encode({ v: 'meta.k8s.io/v1', rv: '5', start: 'a' })}`,
      400,
      `${invalidToken}: json: cannot unmarshal string into Go struct field continueToken.rv of type int64`,
    );
    await expectStatus(
      `continue=${encode({ v: 'meta.k8s.io/v1', rv: 5, start: 'default/../../secrets' })}`,
      400,
      `${invalidToken}: default/../../secrets`,
    );
  });

  it('K17e a list at a resourceVersion ahead of the server waits for it (NotOlderThan, Exact), then 504 Too large resource version after 3 s', async () => {
    await create(WIDGETS, widget('k17e-a', {}, { k17e: 'y' }));
    const soon = server.resourceVersion() + 1;
    const list = (q: string) =>
      call<WidgetList | StatusReply>('GET', `${WIDGETS}?labelSelector=k17e&${q}`);
    const notOlder = list(`resourceVersion=${soon}&resourceVersionMatch=NotOlderThan`);
    const exact = list(`resourceVersion=${soon}&resourceVersionMatch=Exact`);
    const far = server.resourceVersion() + 100;
    const started = Date.now();
    const tooLarge = list(`resourceVersion=${far}&resourceVersionMatch=Exact`);
    const tooLargeLegacy = list(`resourceVersion=${far}`);
    await sleep(300);
    await create(WIDGETS, widget('k17e-b', {}, { k17e: 'y' }));
    await call('PATCH', `${WIDGETS}/k17e-b`, { spec: { size: 4 } }, merge);
    const served = await notOlder;
    expect(served.status).toBe(200);
    const l = served.body as WidgetList;
    expect(l.items.map((i) => i.metadata.name)).toEqual(['k17e-a', 'k17e-b']);
    expect(Number(l.metadata.resourceVersion)).toBeGreaterThanOrEqual(soon);
    const atSoon = (await exact).body as WidgetList;
    expect(atSoon.metadata.resourceVersion).toBe(String(soon));
    expect(sizes(atSoon)).toEqual([
      ['k17e-a', 1],
      ['k17e-b', 1],
    ]);
    const current = server.resourceVersion();
    for (const pending of [tooLarge, tooLargeLegacy]) {
      const r = await pending;
      expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
      expect(r.status).toBe(504);
      expect(r.body).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `Timeout: Too large resource version: ${far}, current: ${current}`,
        reason: 'Timeout',
        details: {
          causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
          retryAfterSeconds: 1,
        },
        code: 504,
      });
    }
  });

  it('K18 label selectors (=, ==, !=, in, notin, key, !key); field selectors name/namespace/selectableFields, others 400', async () => {
    await create(WIDGETS, widget('k18-a', { color: 'red' }, { k18: 'a', tier: 'x' }));
    await create(WIDGETS, widget('k18-b', {}, { k18: 'b' }));
    await create(WIDGETS, widget('k18-c', {}, { k18: 'c', tier: 'y' }));
    const names = async (q: string): Promise<string[]> => {
      const r = await call<{ items: Obj[] }>('GET', `${WIDGETS}?${q}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.items
        .map((i) => i.metadata.name)
        .filter((n) => n.startsWith('k18'))
        .sort();
    };
    const sel = (s: string) => `labelSelector=${encodeURIComponent(s)}`;
    expect(await names(sel('k18=a'))).toEqual(['k18-a']);
    expect(await names(sel('k18==b'))).toEqual(['k18-b']);
    expect(await names(sel('k18,k18!=a'))).toEqual(['k18-b', 'k18-c']);
    expect(await names(sel('k18 in (a, c)'))).toEqual(['k18-a', 'k18-c']);
    expect(await names(sel('k18,k18 notin (a,c)'))).toEqual(['k18-b']);
    expect(await names(sel('k18,tier'))).toEqual(['k18-a', 'k18-c']);
    expect(await names(sel('k18,!tier'))).toEqual(['k18-b']);
    expect(await names(`fieldSelector=${encodeURIComponent('metadata.name=k18-b')}`)).toEqual([
      'k18-b',
    ]);
    expect(
      await names(
        `fieldSelector=${encodeURIComponent('metadata.namespace=default,metadata.name!=k18-b')}&${sel('k18')}`,
      ),
    ).toEqual(['k18-a', 'k18-c']);
    expect(await names(`fieldSelector=${encodeURIComponent('spec.color=red')}`)).toEqual(['k18-a']);
    const bad = await call('GET', `${WT}?fieldSelector=${encodeURIComponent('spec.timeout=5s')}`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      kind: 'Status',
      reason: 'BadRequest',
      message: 'field label not supported: spec.timeout',
    });
  });

  it('K18b malformed selectors → 400 with labels.Parse / fields.ParseSelector’s own error; their edge cases parse as the API server parses them', async () => {
    // apimachinery labels/selector.go Parse and fields/selector.go ParseSelector, answered
    // by handlers/get.go as errors.NewBadRequest(err.Error()).
    const valueRule =
      "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
      "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    const keyRule =
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
      "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const refused: [string, string][] = [
      ['a=b=c', "found '=', expected: ',' or 'end of string'"],
      ['x==a==b', "found '==', expected: ',' or 'end of string'"],
      ['!x=a', "found '=', expected: ',' or 'end of string'"],
      ['a,', "found '', expected: identifier after ','"],
      [',a', "found ',', expected: !, identifier, or 'end of string'"],
      ['a in (b c)', "unable to parse requirement: found 'c', expected: ',' or ')'"],
      ['a in b', "unable to parse requirement: found 'b' expected: '('"],
      ['a b', "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"],
      ['a=b_', `unable to parse requirement: values[0][a]: Invalid value: "b_": ${valueRule}`],
      ['-a=b', `unable to parse requirement: <nil>: Invalid value: "-a": ${keyRule}`],
      [
        'x<a',
        `unable to parse requirement: values[0]: Invalid value: "a": for 'Gt', 'Lt' operators, the value must be an integer`,
      ],
    ];
    for (const [selector, message] of refused) {
      const r = await call('GET', `${WIDGETS}?labelSelector=${encodeURIComponent(selector)}`);
      expect({ selector, status: r.status, body: r.body }).toEqual({
        selector,
        status: 400,
        body: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message,
          reason: 'BadRequest',
          code: 400,
        },
      });
      const w = await call(
        'GET',
        `${WIDGETS}?watch=1&labelSelector=${encodeURIComponent(selector)}`,
      );
      expect(w.status).toBe(400);
    }

    await create(WIDGETS, widget('k18b-empty', { color: 'r,d' }, { k18b: '', n: '5' }));
    await create(WIDGETS, widget('k18b-set', { color: 'a=b' }, { k18b: 'in', n: '12' }));
    const names = async (q: string): Promise<string[]> => {
      const r = await call<{ items: Obj[] }>('GET', `${WIDGETS}?${q}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.items.map((i) => i.metadata.name).filter((n) => n.startsWith('k18b'));
    };
    const sel = (s: string) => `labelSelector=${encodeURIComponent(s)}`;
    // `()` is the set of the empty string; `in`/`notin` are plain values inside a set.
    expect(await names(sel('k18b in ()'))).toEqual(['k18b-empty']);
    expect(await names(sel('k18b,k18b notin ()'))).toEqual(['k18b-set']);
    expect(await names(sel('k18b in (,x)'))).toEqual(['k18b-empty']);
    expect(await names(sel('k18b in (in)'))).toEqual(['k18b-set']);
    expect(await names(sel('k18b='))).toEqual(['k18b-empty']);
    expect(await names(sel('k18b=in'))).toEqual(['k18b-set']);
    // gt/lt compare integers.
    expect(await names(sel('n>6'))).toEqual(['k18b-set']);
    expect(await names(sel('k18b,n<6'))).toEqual(['k18b-empty']);

    // Field selectors: `\,` `\=` `\\` escape a value; a bare `=` in a value, an unknown
    // escape, or a label with spaces (nothing is trimmed) is refused.
    const field = (s: string) => `fieldSelector=${encodeURIComponent(s)}`;
    expect(await names(field('spec.color=r\\,d'))).toEqual(['k18b-empty']);
    expect(await names(field('spec.color==a\\=b'))).toEqual(['k18b-set']);
    expect(await names(`${field('metadata.name=k18b-set,')}`)).toEqual(['k18b-set']);
    const fieldRefused: [string, string][] = [
      ['metadata.name=a=b', 'invalid field selector: unescaped character in value: 61'],
      ['metadata.name=a\\b', 'invalid field selector: invalid escape sequence: \\b'],
      ['metadata.name', "invalid selector: 'metadata.name'; can't understand 'metadata.name'"],
      ['metadata.name = k18b-set', 'field label not supported: metadata.name '],
    ];
    // A cluster-scoped custom resource has no metadata.namespace field label
    // (conversion/converter.go crConverter.ConvertFieldLabel).
    const crd = widgetCrd() as { spec: Record<string, unknown> };
    server.applyCrd({
      ...crd,
      metadata: { name: 'sprockets.test.hookgate.dev' },
      spec: {
        ...crd.spec,
        scope: 'Cluster',
        names: {
          kind: 'Sprocket',
          plural: 'sprockets',
          singular: 'sprocket',
          listKind: 'SprocketList',
        },
      },
    });
    const sprockets = `/apis/test.hookgate.dev/v1/sprockets`;
    expect((await call('GET', `${sprockets}?${field('metadata.name=g')}`)).status).toBe(200);
    expect(
      (await call('GET', `${sprockets}?${field('metadata.namespace=default')}`)).body,
    ).toMatchObject({
      code: 400,
      message: 'field label not supported: metadata.namespace',
    });
    for (const [selector, message] of fieldRefused) {
      const r = await call('GET', `${WIDGETS}?${field(selector)}`);
      expect({ selector, status: r.status, message: r.body.message }).toEqual({
        selector,
        status: 400,
        message,
      });
    }
  });
});

describe('1.5 schema', () => {
  it('K19 unknown fields: pruned; Strict → 400 listing them; Warn (default) → Warning header; Ignore → silent; preserve-unknown-fields kept', async () => {
    const body = {
      ...trigger('k19'),
      spec: {
        ...(trigger('k19').spec as object),
        bogus: 1,
        response: { mode: 'immediateAck', nope: true },
      },
    };
    const strict = await call<{ message: string }>('POST', `${WT}?fieldValidation=Strict`, body);
    expect(strict.status).toBe(400);
    expect(strict.body.message).toContain('unknown field "spec.bogus"');
    expect(strict.body.message).toContain('unknown field "spec.response.nope"');
    const warn = await call('POST', WT, body);
    expect(warn.status).toBe(201);
    expect(warn.headers.get('warning')).toContain('unknown field \\"spec.bogus\\"');
    expect(warn.body.spec).not.toHaveProperty('bogus');
    expect(warn.body.spec).toMatchObject({ response: { mode: 'immediateAck' } });
    expect((warn.body.spec as { response: object }).response).not.toHaveProperty('nope');
    const ignore = await call('POST', `${WT}?fieldValidation=Ignore`, {
      ...body,
      metadata: { name: 'k19-i' },
    });
    expect(ignore.status).toBe(201);
    expect(ignore.headers.get('warning')).toBeNull();
    const kept = await create(WIDGETS, widget('k19-w', { extra: { anything: { goes: [1] } } }));
    expect(kept.spec).toMatchObject({ extra: { anything: { goes: [1] } } });
  });

  it('K20 defaults after pruning (null on a non-nullable field is pruned then defaulted); violations → 422 Invalid with causes', async () => {
    const w = await create(WIDGETS, widget('k20', { size: null, color: null }));
    expect(w.spec).toEqual({ size: 1, color: 'blue' });
    const t = await create(WT, trigger('k20'));
    expect(t.spec).toMatchObject({
      methods: ['POST'],
      timeout: '30s',
      requireHttps: false,
      deploy: true,
    });
    const bad = await call<{
      reason: string;
      code: number;
      message: string;
      details: {
        name: string;
        kind: string;
        group: string;
        causes: { field: string; message: string; reason: string }[];
      };
    }>('POST', WT, {
      ...trigger('k20-bad'),
      spec: {
        workflowRef: { name: 'Not_Valid' },
        methods: ['FETCH'],
        response: { mode: 'immediateAck' },
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({
      kind: 'Status',
      reason: 'Invalid',
      code: 422,
      details: { name: 'k20-bad', kind: 'WebhookTrigger', group: GROUP },
    });
    expect(bad.body.message).toMatch(/^WebhookTrigger\.hookgate\.dev "k20-bad" is invalid: /);
    const fields = bad.body.details.causes.map((c) => c.field);
    expect(fields).toEqual(expect.arrayContaining(['spec.workflowRef.name', 'spec.methods[0]']));
    for (const c of bad.body.details.causes) expect(c.message).toBeTruthy();
  });

  it('K21 CEL rules: messages, fieldPath, transition rules on UPDATE only, messageExpression; uncompilable CRDs rejected', async () => {
    const both = await call<{ details: { causes: { field: string; message: string }[] } }>(
      'POST',
      WT,
      {
        ...trigger('k21'),
        spec: {
          ...(trigger('k21').spec as object),
          auth: {
            method: 'bearer',
            bearer: {
              issuer: 'i',
              audiences: ['a'],
              jwksUrl: 'https://x',
              keySecretRef: { name: 's', key: 'k' },
            },
          },
        },
      },
    );
    expect(both.status).toBe(422);
    // A failed rule is an Invalid cause; objects and lists print no value (Kubernetes 1.35).
    expect(both.body.details.causes.map((c) => c.message)).toContain(
      'Invalid value: exactly one of jwksUrl and keySecretRef must be set',
    );
    const tags = await call<{ details: { causes: { field: string; message: string }[] } }>(
      'POST',
      WIDGETS,
      widget('k21-t', { tags: ['t-a', 'x'] }),
    );
    expect(tags.status).toBe(422);
    expect(tags.body.details.causes).toEqual([
      expect.objectContaining({
        field: 'spec.tags',
        message: 'Invalid value: tags must start with t-',
      }),
    ]);
    const created = await create(WIDGETS, widget('k21', { immutableId: 'one' }));
    expect(created.spec).toMatchObject({ immutableId: 'one' });
    const changed = await call<{ details: { causes: { field: string; message: string }[] } }>(
      'PATCH',
      `${WIDGETS}/k21`,
      { spec: { immutableId: 'two' } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(changed.status).toBe(422);
    expect(changed.body.details.causes[0]).toMatchObject({
      field: 'spec.immutableId',
      message: 'Invalid value: "two": immutableId is immutable, was one',
    });
    const other = await call(
      'PATCH',
      `${WIDGETS}/k21`,
      { spec: { size: 3 } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(other.status).toBe(200);
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    await create(WIDGETS, widget('k21-z', { zones: ['a', 'b'] }));
    const reordered = await call(
      'PATCH',
      `${WIDGETS}/k21-z`,
      { spec: { zones: ['b', 'a'] } },
      merge,
    );
    expect(reordered.status).toBe(200);
    const grown = await call<{ details: { causes: { field: string; message: string }[] } }>(
      'PATCH',
      `${WIDGETS}/k21-z`,
      { spec: { zones: ['b', 'a', 'c'] } },
      merge,
    );
    expect(grown.status).toBe(422);
    expect(grown.body.details.causes[0]).toMatchObject({
      field: 'spec.zones',
      message: 'Invalid value: zones are immutable (order aside)',
    });
    const crd = widgetCrd() as {
      metadata: { name: string };
      spec: {
        names: Record<string, string>;
        versions: {
          schema: { openAPIV3Schema: { properties: { spec: Record<string, unknown> } } };
        }[];
      };
    };
    crd.metadata.name = 'gadgets.test.hookgate.dev';
    crd.spec.names = {
      kind: 'Gadget',
      plural: 'gadgets',
      singular: 'gadget',
      listKind: 'GadgetList',
    };
    crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec['x-kubernetes-validations'] = [
      { rule: 'self.size >' },
    ];
    const rejected = await call<{ reason: string; message: string }>(
      'POST',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
      crd,
    );
    expect(rejected.status).toBe(422);
    expect(rejected.body.message).toContain('compilation failed');
    expect(
      (await call('GET', '/apis/test.hookgate.dev/v1/namespaces/default/gadgets')).status,
    ).toBe(404);
  });
});

describe('1.6 patch', () => {
  it('K22 json-patch, merge-patch (arrays replaced whole, conditions too), apply-patch+yaml; strategic merge → 415', async () => {
    await create(WT, {
      ...trigger('k22'),
      spec: { ...(trigger('k22').spec as object), methods: ['POST', 'PUT'] },
    });
    const cond = (type: string) => ({
      type,
      status: 'True',
      reason: 'R',
      message: 'm',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 1,
    });
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    await call(
      'PATCH',
      `${WT}/k22/status`,
      { status: { conditions: [cond('Ready'), cond('Synced')] } },
      merge,
    );
    const st = await call(
      'PATCH',
      `${WT}/k22/status`,
      { status: { conditions: [cond('Ready')] } },
      merge,
    );
    expect((st.body.status as { conditions: object[] }).conditions).toEqual([cond('Ready')]);
    const arr = await call('PATCH', `${WT}/k22`, { spec: { methods: ['GET'] } }, merge);
    expect((arr.body.spec as { methods: string[] }).methods).toEqual(['GET']);
    const jp = await call(
      'PATCH',
      `${WT}/k22`,
      [
        { op: 'test', path: '/spec/methods/0', value: 'GET' },
        { op: 'add', path: '/spec/methods/-', value: 'DELETE' },
        { op: 'replace', path: '/spec/timeout', value: '10s' },
      ],
      { 'Content-Type': 'application/json-patch+json' },
    );
    expect(jp.status).toBe(200);
    expect(jp.body.spec).toMatchObject({ methods: ['GET', 'DELETE'], timeout: '10s' });
    const failedTest = await call(
      'PATCH',
      `${WT}/k22`,
      [{ op: 'test', path: '/spec/timeout', value: '1s' }],
      { 'Content-Type': 'application/json-patch+json' },
    );
    expect(failedTest.status).toBe(422);
    const apply = await call(
      'PATCH',
      `${WT}/k22?fieldManager=test`,
      'apiVersion: hookgate.dev/v1alpha1\nkind: WebhookTrigger\nmetadata:\n  name: k22\nspec:\n  timeout: 20s\n',
      { 'Content-Type': 'application/apply-patch+yaml' },
    );
    expect(apply.status).toBe(200);
    expect(apply.body.spec).toMatchObject({ timeout: '20s', methods: ['GET', 'DELETE'] });
    const smp = await call<{ message: string; reason: string }>(
      'PATCH',
      `${WT}/k22`,
      { spec: { timeout: '5s' } },
      { 'Content-Type': 'application/strategic-merge-patch+json' },
    );
    expect(smp.status).toBe(415);
    expect(smp.body.message).toBe(
      'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
    );
  });

  it('K23 client-node patches default to json-patch (an object body gets 400); setHeaderOptions selects merge patch', async () => {
    await create(WT, trigger('k23'));
    const kc = new KubeConfig();
    kc.loadFromFile(server.writeKubeconfig(dir));
    const api = kc.makeApiClient(CustomObjectsApi);
    const args = {
      group: GROUP,
      version: VERSION,
      namespace: 'default',
      plural: 'webhooktriggers',
      name: 'k23',
    };
    server.clearRequests();
    const err = await api
      .patchNamespacedCustomObject({ ...args, body: { spec: { timeout: '7s' } } })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
    expect(err?.code).toBe(400);
    expect(server.requests.find((r) => r.method === 'PATCH')?.contentType).toBe(
      'application/json-patch+json',
    );
    const ok = (await api.patchNamespacedCustomObject(
      { ...args, body: { spec: { timeout: '7s' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as Obj;
    expect(ok.spec).toMatchObject({ timeout: '7s' });
    expect(server.requests.filter((r) => r.method === 'PATCH').at(-1)?.contentType).toBe(
      'application/merge-patch+json',
    );
  });

  it('K24 server-side apply needs fieldManager, creates missing objects (201), accepts force', async () => {
    const yaml = (timeout: string) =>
      `apiVersion: test.hookgate.dev/v1\nkind: Widget\nmetadata:\n  name: k24\nspec:\n  color: ${timeout}\n`;
    const ct = { 'Content-Type': 'application/apply-patch+yaml' };
    const noManager = await call('PATCH', `${WIDGETS}/k24`, yaml('red'), ct);
    expect(noManager.status).toBe(400);
    const created = await call('PATCH', `${WIDGETS}/k24?fieldManager=me`, yaml('red'), ct);
    expect(created.status).toBe(201);
    expect(created.body.spec).toEqual({ color: 'red', size: 1 });
    const forced = await call(
      'PATCH',
      `${WIDGETS}/k24?fieldManager=other&force=true`,
      yaml('green'),
      ct,
    );
    expect(forced.status).toBe(200);
    expect(forced.body.spec).toMatchObject({ color: 'green' });
  });
});

describe('1.7 scope', () => {
  it('K25 ownerReferences are stored and returned; nothing garbage-collects dependents', async () => {
    const owner = await create(WF, {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'Workflow',
      metadata: { name: 'k25' },
      spec: { application: 'a', environment: 'development', nodes: [{ id: 'r', type: 'respond' }] },
    });
    const ref = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'Workflow',
      name: 'k25',
      uid: owner.metadata.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
    const dep = await create(WT, {
      ...trigger('k25'),
      metadata: { name: 'k25', ownerReferences: [ref] },
    });
    expect(dep.metadata.ownerReferences).toEqual([ref]);
    expect((await call('DELETE', `${WF}/k25`)).status).toBe(200);
    expect((await call('GET', `${WT}/k25`)).status).toBe(200);
  });

  it('K26 Foreground and Orphan propagation are rejected; Background works; any token is accepted', async () => {
    await create(WIDGETS, widget('k26'));
    for (const policy of ['Foreground', 'Orphan']) {
      const r = await call('DELETE', `${WIDGETS}/k26`, {
        kind: 'DeleteOptions',
        apiVersion: 'v1',
        propagationPolicy: policy,
      });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ kind: 'Status', reason: 'BadRequest' });
    }
    const q = await call('DELETE', `${WIDGETS}/k26?propagationPolicy=Foreground`);
    expect(q.status).toBe(400);
    const res = await fetch(`${server.url}${WIDGETS}/k26`, {
      method: 'DELETE',
      headers: { Authorization: 'Bearer whatever', 'Content-Type': 'application/json' },
      body: JSON.stringify({ propagationPolicy: 'Background' }),
    });
    expect(res.status).toBe(200);
  });

  it('K27 namespaces (with default), leases, core and events.k8s.io events, Established CRDs', async () => {
    const ns = await call<{ items: Obj[] }>('GET', '/api/v1/namespaces');
    expect(ns.body.items.map((n) => n.metadata.name)).toContain('default');
    const lease = await call('POST', '/apis/coordination.k8s.io/v1/namespaces/default/leases', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'k27' },
      spec: {
        holderIdentity: 'a',
        leaseDurationSeconds: 15,
        renewTime: '2026-01-01T00:00:00.000000Z',
      },
    });
    expect(lease.status).toBe(201);
    const renewed = await call(
      'PUT',
      '/apis/coordination.k8s.io/v1/namespaces/default/leases/k27',
      { ...lease.body, spec: { holderIdentity: 'b' } },
    );
    expect(renewed.status).toBe(200);
    const stale = await call('PUT', '/apis/coordination.k8s.io/v1/namespaces/default/leases/k27', {
      ...lease.body,
      spec: { holderIdentity: 'c' },
    });
    expect(stale.status).toBe(409);
    const coreEvents = '/api/v1/namespaces/default/events';
    const core = await call('POST', coreEvents, {
      metadata: { generateName: 'k27-' },
      involvedObject: { kind: 'WebhookTrigger', name: 'x' },
      reason: 'R',
      message: 'm',
      type: 'Normal',
    });
    expect(core.status).toBe(201);
    const byObject = await call<{ items: Obj[] }>(
      'GET',
      `${coreEvents}?fieldSelector=${encodeURIComponent('involvedObject.kind=WebhookTrigger,involvedObject.name=x,type=Normal')}`,
    );
    expect(byObject.body.items.map((e) => e.metadata.name)).toEqual([core.body.metadata.name]);
    const ev = await call('POST', '/apis/events.k8s.io/v1/namespaces/default/events', {
      metadata: { generateName: 'k27-' },
      regarding: { kind: 'WebhookTrigger', name: 'x' },
      reason: 'R',
      note: 'm',
      type: 'Normal',
      action: 'Reconcile',
      eventTime: '2026-01-01T00:00:00.000000Z',
      reportingController: 'hookgate',
      reportingInstance: 'x',
    });
    expect(ev.status).toBe(201);
    const secret = await call<{ data: Record<string, string> }>(
      'POST',
      '/api/v1/namespaces/default/secrets',
      { metadata: { name: 'k27' }, stringData: { key: 'value' } },
    );
    expect(secret.body.data).toEqual({ key: Buffer.from('value').toString('base64') });
    const crd = await call<{ status: { conditions: { type: string; status: string }[] } }>(
      'GET',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/webhooktriggers.hookgate.dev',
    );
    expect(crd.body.status.conditions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'Established', status: 'True' }),
        expect.objectContaining({ type: 'NamesAccepted', status: 'True' }),
      ]),
    );
  });
});

describe('1.8 kubectl-facing endpoints', () => {
  const AGG =
    'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json';
  type Discovery = {
    kind: string;
    items: {
      metadata: { name?: string };
      versions: {
        version: string;
        resources: {
          resource: string;
          responseKind: object;
          scope: string;
          singularResource: string;
          verbs: string[];
          subresources: { subresource: string }[];
        }[];
      }[];
    }[];
  };

  it('K28 aggregated discovery (and legacy); a new CRD shows up', async () => {
    const agg = await call<Discovery>('GET', '/apis', undefined, { Accept: AGG });
    expect(agg.headers.get('content-type')).toBe(
      'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
    );
    expect(agg.body.kind).toBe('APIGroupDiscoveryList');
    const hg = agg.body.items.find((i) => i.metadata.name === GROUP);
    const wt = hg?.versions[0]?.resources.find((r) => r.resource === 'webhooktriggers');
    expect(wt).toMatchObject({
      responseKind: { group: GROUP, version: VERSION, kind: 'WebhookTrigger' },
      scope: 'Namespaced',
      singularResource: 'webhooktrigger',
      subresources: [{ subresource: 'status' }],
    });
    expect(wt?.verbs).toEqual(
      expect.arrayContaining(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']),
    );
    const core = await call<Discovery>('GET', '/api', undefined, { Accept: AGG });
    expect(core.body.items[0]?.versions[0]?.resources.map((r) => r.resource)).toEqual(
      expect.arrayContaining(['namespaces', 'secrets', 'events']),
    );
    const legacy = await call<{ kind: string; groups: { name: string }[] }>('GET', '/apis');
    expect(legacy.body.kind).toBe('APIGroupList');
    expect((await call<{ kind: string }>('GET', `/apis/${GROUP}/${VERSION}`)).body.kind).toBe(
      'APIResourceList',
    );
    expect(legacy.body.groups.map((g) => g.name)).not.toContain('k28.hookgate.dev');
    const crd = widgetCrd() as {
      metadata: { name: string };
      spec: { group: string; versions: Record<string, unknown>[] };
    };
    crd.metadata.name = 'widgets.k28.hookgate.dev';
    crd.spec.group = 'k28.hookgate.dev';
    // Listed alpha first; discovery must still prefer v1. Both share one store.
    const [v1] = crd.spec.versions;
    crd.spec.versions = [{ ...v1, name: 'v1alpha1', storage: false }, { ...v1 }];
    expect(
      (await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status,
    ).toBe(201);
    const after = await call<Discovery>('GET', '/apis', undefined, { Accept: AGG });
    expect(after.body.items.map((i) => i.metadata.name)).toContain('k28.hookgate.dev');
    const k28 = after.body.items.find((i) => i.metadata.name === 'k28.hookgate.dev');
    expect(k28?.versions.map((v) => v.version)).toEqual(['v1', 'v1alpha1']);
    const viaAlpha = await call(
      'POST',
      '/apis/k28.hookgate.dev/v1alpha1/namespaces/default/widgets',
      {
        ...widget('k28'),
        apiVersion: 'k28.hookgate.dev/v1alpha1',
      },
    );
    expect(viaAlpha.status).toBe(201);
    const viaV1 = await call('GET', '/apis/k28.hookgate.dev/v1/namespaces/default/widgets/k28');
    expect(viaV1.body).toMatchObject({
      apiVersion: 'k28.hookgate.dev/v1',
      metadata: { name: 'k28' },
    });
    expect((await call('GET', '/apis/k28.hookgate.dev/v1/namespaces/default/widgets')).status).toBe(
      200,
    );
  });

  it('K29 /openapi/v3 index with hashed URLs; PATCH operations with GVK, fieldValidation and patch types', async () => {
    const index = await call<{ paths: Record<string, { serverRelativeURL: string }> }>(
      'GET',
      '/openapi/v3',
    );
    const entry = index.body.paths[`apis/${GROUP}/${VERSION}`];
    expect(entry?.serverRelativeURL).toMatch(
      new RegExp(`^/openapi/v3/apis/${GROUP}/${VERSION}\\?hash=[0-9A-F]+$`),
    );
    type Doc = {
      paths: Record<
        string,
        {
          patch?: {
            parameters: { name: string; in: string }[];
            requestBody: { content: Record<string, unknown> };
            'x-kubernetes-group-version-kind': object;
          };
        }
      >;
      components: { schemas: Record<string, { 'x-kubernetes-group-version-kind': object[] }> };
    };
    const doc = await call<Doc>('GET', entry?.serverRelativeURL ?? '');
    const patch =
      doc.body.paths[`/apis/${GROUP}/${VERSION}/namespaces/{namespace}/webhooktriggers/{name}`]
        ?.patch;
    expect(patch?.['x-kubernetes-group-version-kind']).toEqual({
      group: GROUP,
      version: VERSION,
      kind: 'WebhookTrigger',
    });
    expect(patch?.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'fieldValidation', in: 'query' })]),
    );
    expect(Object.keys(patch?.requestBody.content ?? {}).sort()).toEqual([
      'application/apply-patch+yaml',
      'application/json-patch+json',
      'application/merge-patch+json',
    ]);
    const schema = Object.values(doc.body.components.schemas).find((s) =>
      JSON.stringify(s['x-kubernetes-group-version-kind']).includes('WebhookTrigger'),
    );
    expect(schema).toBeDefined();
    expect((await call('GET', '/openapi/v2')).status).toBe(404);
  });

  it('K30 Table output: Name + additionalPrinterColumns (null for missing), Name + Age without columns', async () => {
    await create(WT, trigger('k30'));
    const st = await call(
      'PATCH',
      `${WT}/k30/status`,
      {
        status: {
          url: 'https://hooks/x',
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'R',
              message: 'fine',
              lastTransitionTime: '2026-01-01T00:00:00Z',
              observedGeneration: 1,
            },
          ],
        },
      },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(st.status).toBe(200);
    await create(WT, trigger('k30-empty'));
    const accept =
      'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
    type Table = {
      kind: string;
      apiVersion: string;
      columnDefinitions: {
        name: string;
        type: string;
        format: string;
        description: string;
        priority: number;
      }[];
      rows: { cells: unknown[]; object: { kind: string; metadata: { name: string } } }[];
    };
    const t = await call<Table>('GET', WT, undefined, { Accept: accept });
    expect(t.body).toMatchObject({ kind: 'Table', apiVersion: 'meta.k8s.io/v1' });
    expect(t.body.columnDefinitions.map((c) => c.name)).toEqual([
      'Name',
      'Ready',
      'Status',
      'URL',
      'Mode',
      'Age',
    ]);
    expect(t.body.columnDefinitions[0]).toMatchObject({ type: 'string', format: 'name' });
    expect(t.body.columnDefinitions.find((c) => c.name === 'Mode')).toMatchObject({
      priority: 1,
      description: 'Response mode.',
    });
    const row = t.body.rows.find((r) => r.cells[0] === 'k30');
    expect(row?.cells.slice(0, 5)).toEqual([
      'k30',
      'True',
      'fine',
      'https://hooks/x',
      'immediateAck',
    ]);
    expect(row?.cells[5]).toMatch(/^\d+s$/);
    expect(row?.object).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 'k30' } });
    expect(t.body.rows.find((r) => r.cells[0] === 'k30-empty')?.cells.slice(1, 4)).toEqual([
      null,
      null,
      null,
    ]);
    const one = await call<Table>('GET', `${WT}/k30`, undefined, { Accept: accept });
    expect(one.body.rows).toHaveLength(1);
    const plain = await call<Table>('GET', WIDGETS, undefined, { Accept: accept });
    expect(plain.body.columnDefinitions.map((c) => c.name)).toEqual(['Name', 'Age']);
  });

  it('client-node ListWatch relists after a forced 410 and after a closed watch (fault switches)', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(server.writeKubeconfig(dir));
    const api = kc.makeApiClient(CustomObjectsApi);
    const path = '/apis/test.hookgate.dev/v1/namespaces/default/widgets';
    await create(WIDGETS, widget('lw-a', {}, { lw: 'yes' }));
    const listFn = () =>
      api.listNamespacedCustomObject({
        group: 'test.hookgate.dev',
        version: 'v1',
        namespace: 'default',
        plural: 'widgets',
        labelSelector: 'lw=yes',
      }) as Promise<{
        items: KubernetesObject[];
        metadata: { resourceVersion: string };
      }>;
    const lw = new ListWatch<KubernetesObject>(path, new Watch(kc), listFn, false, 'lw=yes');
    const names = () =>
      lw
        .list('default')
        .map((o) => o.metadata?.name)
        .sort();
    await lw.start();
    expect(names()).toEqual(['lw-a']);
    server.faults.failNext(1, 410, (r) => r.watch && r.path === path, { asWatchEvent: true });
    server.closeWatches();
    await create(WIDGETS, widget('lw-b', {}, { lw: 'yes' }));
    for (let i = 0; i < 50 && names().length < 2; i++) await sleep(50);
    expect(names()).toEqual(['lw-a', 'lw-b']);
    const lists = server.requests.filter((r) => r.path === path && !r.query.watch);
    expect(lists.length).toBeGreaterThanOrEqual(2);
    await lw.stop();
  });
});

describe('test fault switches', () => {
  it('failNext answers matching requests with a forced Status, delayNext delays them, the log records both', async () => {
    await create(WIDGETS, widget('faults'));
    const path = `${WIDGETS}/faults`;
    server.faults.failNext(2, 500, (r) => r.method === 'GET' && r.path === path);
    server.faults.failNext(1, 409, (r) => r.method === 'PATCH');
    server.clearRequests();
    expect((await call('GET', path)).status).toBe(500);
    expect((await call('GET', WIDGETS)).status).toBe(200);
    expect((await call('GET', path)).status).toBe(500);
    expect((await call('GET', path)).status).toBe(200);
    const conflict = await call(
      'PATCH',
      path,
      { spec: { size: 4 } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({
      reason: 'Conflict',
      details: { name: 'faults', kind: 'widgets' },
    });
    expect(server.requests.map((r) => r.status)).toEqual([500, 200, 500, 200, 409]);
    expect(server.requests[4]).toMatchObject({
      method: 'PATCH',
      path,
      contentType: 'application/merge-patch+json',
    });
    // On a subresource the details name the object and its resource, as a real
    // status-update conflict does.
    const t = await create(WT, trigger('faults-status'));
    server.faults.failNext(1, 409, (r) => r.method === 'PUT' && r.path.endsWith('/status'));
    const statusConflict = await call('PUT', `${WT}/faults-status/status`, t);
    expect(statusConflict.body).toMatchObject({
      code: 409,
      reason: 'Conflict',
      details: { name: 'faults-status', group: GROUP, kind: 'webhooktriggers' },
      message: `Operation cannot be fulfilled on webhooktriggers.${GROUP} "faults-status": the object has been modified; please apply your changes to the latest version and try again`,
    });
    server.faults.delayNext(1, 300, (r) => r.path === path);
    const started = Date.now();
    expect((await call('GET', path)).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    const watching = readWatch(
      `${server.url}${WIDGETS}?watch=1&resourceVersion=${server.resourceVersion()}`,
      { timeoutMs: 3000 },
    );
    for (let i = 0; i < 40 && server.faults.openWatches() === 0; i++) await sleep(25);
    expect(server.closeWatches()).toBeGreaterThanOrEqual(1);
    expect((await watching).ended).toBe(true);
  });
});

describe('client-node typed clients (K27 built-ins as the operator uses them)', () => {
  it('CoreV1Api reads secrets; CoordinationV1Api creates and renews leases (409 on a stale RV); KubernetesObjectApi works on CRs', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(server.writeKubeconfig(dir));
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'typed' }, stringData: { apiKey: 's3cret' } },
    });
    const secret = await core.readNamespacedSecret({ name: 'typed', namespace: 'default' });
    expect(Buffer.from(secret.data?.apiKey ?? '', 'base64').toString()).toBe('s3cret');
    expect(secret.type).toBe('Opaque');
    const leases = kc.makeApiClient(CoordinationV1Api);
    const lease = await leases.createNamespacedLease({
      namespace: 'default',
      body: {
        metadata: { name: 'typed' },
        spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: new Date() },
      },
    });
    const renewed = await leases.replaceNamespacedLease({
      name: 'typed',
      namespace: 'default',
      body: {
        ...lease,
        spec: { ...lease.spec, holderIdentity: 'a', renewTime: new Date(Date.now() + 1000) },
      },
    });
    expect(Number(renewed.metadata?.resourceVersion)).toBeGreaterThan(
      Number(lease.metadata?.resourceVersion),
    );
    const stale = await leases
      .replaceNamespacedLease({
        name: 'typed',
        namespace: 'default',
        body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } },
      })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
    expect(stale?.code).toBe(409);
    const objects = KubernetesObjectApi.makeApiClient(kc);
    const created = await objects.create(trigger('typed'));
    expect(created.metadata?.uid).toBeTruthy();
    const read = await objects.read({
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'WebhookTrigger',
      metadata: { name: 'typed', namespace: 'default' },
    });
    expect(read.metadata?.resourceVersion).toBe(created.metadata?.resourceVersion);
  });
});
