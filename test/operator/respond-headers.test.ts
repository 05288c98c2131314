// A respond node's headers that the gateway leaves out of its answers (a Content-Type,
// a Set-Cookie, a name that is not an HTTP token): the CRD cannot refuse them by name
// (CEL over a map's keys costs what the whole map may hold), so the operator says so in
// the Valid condition, and still publishes the workflow (it ran without them before).
// Against the in-memory API server with the CRDs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../api/v1alpha1/index.ts';
import { createWorkflow, withReconcileLoop } from '../support/namespace-reconcile.ts';
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
    const { client } = cluster;
    const ns = 'respond-headers';
    const path = await createWorkflow(cluster, ns, [
      {
        id: 'reply',
        type: 'respond',
        expression: '$',
        headers: { 'X-Kept': 'yes', 'Content-Type': 'text/html', 'Bad Name': 'x' },
      },
    ]);
    await withReconcileLoop(cluster, ns, 1, async (workflows) => {
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
    });
  });
});
