// A dev runtime over the Kubernetes source (`hookgate dev --source kubernetes`: reconcile
// loop, gateway and engine in one process) against the in-memory API server, with the
// same `apply(file, docs)` as the one over a folder (./gateway.ts). For what a folder
// cannot show: a trigger deleted and created again under its name is another object
// with another `metadata.uid` here, as on a cluster, whereas the directory source gives
// an object the same uid whenever its manifest is read (ADR 0035, amended 2026-11-28).
import { isConflict, isNotFound } from '../../operator/controller/kube-client.ts';
import { CREDENTIALS_LABEL, KubernetesSource } from '../../operator/sources/kubernetes.ts';
import { resourcePath } from '../../operator/sources/kube-resources.ts';
import type { SourceKind } from '../../operator/sources/ports.ts';
import { createDevRuntime, type DevOptions } from '../../roles/dev.ts';
import { eventually } from './eventually.ts';
import { readyTriggers, type ControlRuntime } from './gateway.ts';
import { startTestCluster, type TestCluster } from './test-cluster.ts';

export interface KubeTestRuntime extends ControlRuntime {
  cluster: TestCluster;
}

interface Doc {
  apiVersion: string;
  kind: SourceKind;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: unknown;
  stringData?: Record<string, string>;
}

interface Live {
  metadata: { uid: string; resourceVersion: string; [k: string]: unknown };
  [k: string]: unknown;
}

const NAMESPACE = 'default';

export async function startKubeRuntime(
  options: Partial<DevOptions> = {},
): Promise<KubeTestRuntime> {
  const cluster = await startTestCluster({ crds: true });
  const { client } = cluster;
  const runtime = await createDevRuntime({
    source: new KubernetesSource({ kubeConfig: cluster.kc }),
    baseUrl: 'http://localhost',
    ...options,
  }).catch(async (err: unknown) => {
    await cluster.close();
    throw err;
  });
  /** What each file held at its last apply. */
  const files = new Map<string, Doc[]>();
  const id = (d: Doc) => `${d.kind}/${d.metadata.name}`;
  const path = (d: Doc, name?: string) => resourcePath(d.kind, NAMESPACE, name);

  /** The object as the API server should hold it (Secrets labelled for the operator). */
  function body(doc: Doc, live?: Live): Record<string, unknown> {
    const metadata = { ...live?.metadata, ...doc.metadata, namespace: NAMESPACE };
    // A hookgate kind: its spec replaced (the status goes through its own subresource).
    if (doc.kind !== 'Secret') return { ...live, ...doc, metadata };
    const data = Object.fromEntries(
      Object.entries(doc.stringData ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    );
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { ...metadata, labels: { ...doc.metadata.labels, [CREDENTIALS_LABEL]: 'true' } },
      data,
    };
  }

  /** Create the object, or replace what it holds (its status, uid and finalizers stay). */
  async function put(doc: Doc): Promise<void> {
    for (;;) {
      let live: Live | undefined;
      try {
        live = await client.request<Live>('GET', path(doc, doc.metadata.name));
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      try {
        if (!live) await client.request('POST', path(doc), { body: body(doc) });
        else await client.request('PUT', path(doc, doc.metadata.name), { body: body(doc, live) });
        return;
      } catch (err) {
        // The operator wrote a finalizer or the status in between: read it again.
        if (!isConflict(err)) throw err;
      }
    }
  }

  /** Delete the object and wait until it is gone (the operator's finalizer removed). */
  async function remove(doc: Doc): Promise<void> {
    try {
      await client.request('DELETE', path(doc, doc.metadata.name));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    await eventually(async () => {
      const gone = await client.request('GET', path(doc, doc.metadata.name)).then(
        () => false,
        (err: unknown) => isNotFound(err),
      );
      if (!gone) throw new Error(`${id(doc)} not deleted yet`);
    }, 15_000);
  }

  return {
    ...runtime,
    cluster,
    async apply(file, objects, ready = []) {
      const docs = objects as Doc[];
      const before = files.get(file) ?? [];
      const kept = new Set(docs.map(id));
      for (const doc of before) if (!kept.has(id(doc))) await remove(doc);
      for (const doc of docs) await put(doc);
      files.set(file, docs);
      await readyTriggers(runtime, ready, true);
    },
    async stop() {
      const closing = runtime.close();
      runtime.app.server.closeAllConnections();
      runtime.admin.server.closeAllConnections();
      await closing;
      await cluster.close();
    },
  };
}
