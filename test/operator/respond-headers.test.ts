// A respond node's headers that the gateway leaves out of its answers (a Content-Type,
// a Set-Cookie, a name that is not an HTTP token): the CRD cannot refuse them by name
// (CEL over a map's keys costs what the whole map may hold), so the operator says so in
// the Valid condition, and still publishes the workflow (it ran without them before).
// Against the in-memory API server with the CRDs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../api/v1alpha1/index.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { WorkflowRegistration } from '../../api/records/records.ts';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { startReconcileLoop } from '../../operator/reconcile/run.ts';
import { KubernetesSource, resourcePath } from '../../operator/sources/kubernetes.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually } from '../support/eventually.ts';

interface Workflow {
  metadata: { generation: number };
  status?: { observedGeneration?: number; conditions?: Condition[] };
}

describe("a respond node's headers the gateway leaves out", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
  });
  afterAll(() => cluster.close());

  it('are named in Valid=True; the workflow is published', async () => {
    const { client, kc } = cluster;
    const ns = 'respond-headers';
    await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
    await client.request('POST', resourcePath('Workflow', ns), {
      body: {
        apiVersion: 'hookgate.dev/v1alpha1',
        kind: 'Workflow',
        metadata: { name: 'w', namespace: ns },
        spec: {
          application: 'a',
          environment: 'development',
          nodes: [
            {
              id: 'reply',
              type: 'respond',
              expression: '$',
              headers: { 'X-Kept': 'yes', 'Content-Type': 'text/html', 'Bad Name': 'x' },
            },
          ],
        },
      },
    });
    const workflows = new MemoryRecordStore<WorkflowRegistration>();
    const loop = await startReconcileLoop({
      source: new KubernetesSource({ kubeConfig: kc, namespace: ns }),
      routes: new MemoryRecordStore(),
      workflows,
      gateways: new MemoryGatewayStore(),
      baseUrl: 'http://hookgate.example',
      controller: { workers: 1 },
    });
    try {
      const path = resourcePath('Workflow', ns, 'w');
      await eventually(async () => {
        const w = await client.request<Workflow>('GET', path);
        expect(w.status?.observedGeneration).toBe(w.metadata.generation);
        const byType = (t: string) => w.status?.conditions?.find((c) => c.type === t);
        expect(byType('Ready')?.status).toBe('True');
        expect(byType('Valid')).toMatchObject({ status: 'True', reason: 'Succeeded' });
        expect(byType('Valid')?.message).toBe(
          'All nodes and expressions are valid; ' +
            "spec.nodes[0].headers[Content-Type]: left out of the answer: the trigger's response.contentType sets the content type; " +
            'spec.nodes[0].headers[Bad Name]: left out of the answer: the name is not an HTTP token',
        );
      });
      expect((await workflows.list()).length).toBe(1);
    } finally {
      await loop.stop(1000);
    }
  });
});
