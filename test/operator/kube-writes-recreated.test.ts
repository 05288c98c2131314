// KubeWriter against the in-memory API server when the object it was asked to write
// for has been deleted and created again under the same name (a new uid) since the
// reconcile read it: a stale leader finishing a reconcile after a takeover, or a
// cache that lags behind a `kubectl delete` + `kubectl apply`. The first write meets a
// 409 (its resourceVersion, and for status its uid, are the old object's); the
// re-read then finds the new object. What was computed for the old one must not land
// on the new one: its status, the removal of the new object's finalizer (whose later
// delete would then skip the cleanup of its route), or a finalizer for a reconcile
// that is about the old object.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import type { KubeClient } from '../../operator/controller/kube-client.ts';
import { KubeWriter } from '../../operator/sources/kube-writes.ts';
import { resourcePath, type KubeObject } from '../../operator/sources/kube-resources.ts';
import type { ObjectRef } from '../../operator/sources/ports.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

let cluster: TestCluster;
let client: KubeClient;
let nsCounter = 0;

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  ({ client } = cluster);
});

afterAll(() => cluster.close());

function workflow(namespace: string, finalizers?: string[]) {
  return {
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'Workflow',
    metadata: { name: 'w', namespace, ...(finalizers ? { finalizers } : {}) },
    spec: {
      application: 'demo',
      environment: 'development',
      nodes: [{ id: 'greet', type: 'transform', expression: '{ "ok": true }' }],
    },
  };
}

/**
 * A Workflow read (the old one, as a stale cache holds it), then deleted and created
 * again with `finalizers`: returns the old copy and the ref.
 */
async function recreated(
  oldFinalizers: string[] | undefined,
  newFinalizers: string[] | undefined,
): Promise<{ old: KubeObject; ref: ObjectRef; get: () => Promise<KubeObject> }> {
  const ns = `rc${++nsCounter}`;
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
  const path = resourcePath('Workflow', ns, 'w');
  const old = await client.request<KubeObject>('POST', resourcePath('Workflow', ns), {
    body: workflow(ns, oldFinalizers),
  });
  if (oldFinalizers) {
    // Deleting, then its finalizers taken off by someone else (the new leader).
    await client.request('DELETE', path);
    await client.request('PATCH', path, {
      contentType: 'application/merge-patch+json',
      body: { metadata: { finalizers: null } },
    });
  } else {
    await client.request('DELETE', path);
  }
  await client.request('POST', resourcePath('Workflow', ns), { body: workflow(ns, newFinalizers) });
  const ref: ObjectRef = { kind: 'Workflow', namespace: ns, name: 'w' };
  return { old, ref, get: () => client.request<KubeObject>('GET', path) };
}

/** A status the CRD's schema takes: Ready as `status`, saying `message`. */
function readyStatus(status: string, message: string) {
  return {
    observedGeneration: 1,
    conditions: [
      {
        type: 'Ready',
        status,
        reason: 'Succeeded',
        message,
        lastTransitionTime: '2026-11-28T00:00:00Z',
        observedGeneration: 1,
      },
    ],
  };
}

const uidOf = (obj: KubeObject) => String(obj.metadata.uid);

describe('KubeWriter: an object deleted and created again under the same name', () => {
  it("does not write the old object's status onto the new one", async () => {
    const { old, ref, get } = await recreated(undefined, undefined);
    const writer = new KubeWriter({ client, cached: () => old });
    await writer.writeStatus(ref, readyStatus('True', 'old'), uidOf(old));
    expect((await get()).status).toBeUndefined();
  });

  it('keeps the uid of the first read when none is given', async () => {
    const { old, ref, get } = await recreated(undefined, undefined);
    const writer = new KubeWriter({ client, cached: () => old });
    await writer.writeStatus(ref, readyStatus('True', 'old'));
    expect((await get()).status).toBeUndefined();
  });

  it("does not remove the new object's finalizer", async () => {
    const { old, ref, get } = await recreated([FINALIZER], [FINALIZER]);
    const writer = new KubeWriter({ client, cached: () => old });
    await writer.removeFinalizer(ref, uidOf(old));
    expect((await get()).metadata.finalizers).toEqual([FINALIZER]);
  });

  it('adds no finalizer to the new object for a reconcile of the old one: false, gone', async () => {
    const { old, ref, get } = await recreated(undefined, undefined);
    // The server answers 409 to the old resourceVersion; the re-read finds the new object.
    const writer = new KubeWriter({ client, cached: () => old });
    expect(await writer.addFinalizer(ref, uidOf(old))).toBe(false);
    expect((await get()).metadata.finalizers).toBeUndefined();
  });

  it('the same object (same uid) is written as before', async () => {
    const { ref, get } = await recreated(undefined, undefined);
    const current = await get();
    const writer = new KubeWriter({ client, cached: () => current });
    expect(await writer.addFinalizer(ref, uidOf(current))).toBe(true);
    await writer.writeStatus(ref, readyStatus('True', 'new'), uidOf(current));
    const after = await get();
    expect(after.metadata.finalizers).toEqual([FINALIZER]);
    expect(after.status).toMatchObject({ conditions: [{ type: 'Ready', message: 'new' }] });
  });
});
