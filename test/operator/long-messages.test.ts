// Condition messages within the API server's 32768-character limit: a Workflow with
// hundreds of mistakes used to be reported in one message per mistake joined, which
// the API server refused (422 on every status write), so the status froze at its last
// good state (Ready=True) while the registration was already gone. Against the
// in-memory API server, which enforces the CRD's maxLength as a real one does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../api/v1alpha1/index.ts';
import { boundedMessage, problemsMessage } from '../../operator/reconcile/conditions.ts';
import { createWorkflow, withReconcileLoop } from '../support/namespace-reconcile.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { eventually } from '../support/eventually.ts';

interface Workflow {
  metadata: { generation: number; resourceVersion: string };
  spec: { nodes: unknown[] };
  status?: { observedGeneration?: number; conditions?: Condition[] };
}

describe('condition messages', () => {
  it('are cut to the limit, not across a surrogate pair', () => {
    expect(boundedMessage('short')).toBe('short');
    const long = boundedMessage('x'.repeat(40_000));
    expect(long).toHaveLength(32768);
    expect(long.endsWith('…')).toBe(true);
    const emoji = boundedMessage(`${'a'.repeat(8)}😀😀`, 10); // the pair at 8-9 would be cut at 9
    expect(emoji).toBe(`${'a'.repeat(8)}…`);
  });

  it('list the first 20 problems and say how many more', () => {
    const problems = Array.from({ length: 25 }, (_, i) => `problem ${i}`);
    const message = problemsMessage(problems);
    expect(message).toContain('problem 19; and 5 more');
    expect(message).not.toContain('problem 20');
    expect(problemsMessage(['a', 'b'])).toBe('a; b');
  });

  describe('against the in-memory API server', () => {
    let cluster: TestCluster;
    beforeAll(async () => {
      cluster = await startTestCluster({ crds: true });
    });
    afterAll(() => cluster.close());

    it('a Workflow with 512 mistakes gets Valid=False written, with a message the server takes', async () => {
      const { server, client } = cluster;
      const ns = 'long-messages';
      const path = await createWorkflow(cluster, ns, [
        { id: 'greet', type: 'transform', expression: '1' },
      ]);
      await withReconcileLoop(cluster, ns, 2, async () => {
        const ready = (w: Workflow) =>
          w.status?.conditions?.find((c) => c.type === 'Ready')?.status;
        await eventually(async () =>
          expect(ready(await client.request<Workflow>('GET', path))).toBe('True'),
        );
        // 8 switch nodes of 64 cases, each naming a node that does not exist.
        const missing = 'n'.repeat(63);
        const current = await client.request<Workflow>('GET', path);
        current.spec.nodes = Array.from({ length: 8 }, (_, i) => ({
          id: `s${i}`,
          type: 'switch',
          cases: Array.from({ length: 64 }, () => ({ condition: 'true', next: missing })),
        }));
        await client.request('PUT', path, { body: current });
        await eventually(async () => {
          const w = await client.request<Workflow>('GET', path);
          expect(w.status?.observedGeneration).toBe(w.metadata.generation);
          const valid = w.status?.conditions?.find((c) => c.type === 'Valid');
          expect(valid).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
          expect(valid?.message).toMatch(/; and \d+ more$/);
          expect(ready(w)).toBe('False');
        }, 5_000);
        const refused = server.requests.filter(
          (r) => r.method === 'PUT' && r.path.endsWith('/status') && r.status === 422,
        );
        expect(refused).toEqual([]);
      });
    });
  });
});
