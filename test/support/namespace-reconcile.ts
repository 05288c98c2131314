// One Workflow in a namespace of the in-memory API server, reconciled by a loop over
// that namespace with in-memory stores: for operator tests that look at the status the
// operator writes (test/operator/respond-headers.test.ts, long-messages.test.ts).
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { WorkflowRegistration } from '../../api/records/records.ts';
import { startReconcileLoop } from '../../operator/reconcile/run.ts';
import { KubernetesSource, resourcePath } from '../../operator/sources/kubernetes.ts';
import type { TestCluster } from './test-cluster.ts';

/**
 * Creates the namespace `ns` and in it the Workflow `w` (application a, environment
 * development) with these nodes; its resource path.
 */
export async function createWorkflow(
  { client }: TestCluster,
  ns: string,
  nodes: object[],
): Promise<string> {
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
  await client.request('POST', resourcePath('Workflow', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'w', namespace: ns },
      spec: { application: 'a', environment: 'development', nodes },
    },
  });
  return resourcePath('Workflow', ns, 'w');
}

/**
 * Runs `body` while a reconcile loop with `workers` workers watches the namespace `ns`
 * (in-memory route, workflow and gateway stores; the workflow store handed to `body`),
 * and stops the loop after it, whether it passed or threw.
 */
export async function withReconcileLoop(
  { kc }: TestCluster,
  ns: string,
  workers: number,
  body: (workflows: MemoryRecordStore<WorkflowRegistration>) => Promise<void>,
): Promise<void> {
  const workflows = new MemoryRecordStore<WorkflowRegistration>();
  const loop = await startReconcileLoop({
    source: new KubernetesSource({ kubeConfig: kc, namespace: ns }),
    routes: new MemoryRecordStore(),
    workflows,
    gateways: new MemoryGatewayStore(),
    baseUrl: 'http://hookgate.example',
    controller: { workers },
  });
  try {
    await body(workflows);
  } finally {
    await loop.stop(1000);
  }
}
