// The chart README's way out when the release was uninstalled before its Workflows and
// WebhookTriggers: nobody removes the operator's finalizer, and the objects (their
// namespace, the CRDs) stay Terminating. The README's loop, run as written with a real
// kubectl against the in-memory API server, takes the finalizers off in every
// namespace, and the object being deleted goes.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINALIZER } from '../../api/v1alpha1/index.ts';
import { resourcePath } from '../../operator/sources/kubernetes.ts';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

const tools = await kubeToolsOrSkip();
const README = join(import.meta.dirname, '..', '..', 'charts', 'hookgate', 'README.md');

/** The shell block of the README's "Uninstalling" section that patches the finalizers. */
function finalizerLoop(): string {
  const text = readFileSync(README, 'utf8');
  const section = text.slice(text.indexOf('### Uninstalling'));
  const block = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((m) => m[1] as string)
    .find((b) => b.includes('finalizers":null'));
  if (!block) throw new Error('no finalizer loop in the README');
  return block;
}

interface Obj {
  metadata: { finalizers?: string[]; deletionTimestamp?: string };
}

describe.skipIf(!tools)("the chart README's finalizer loop", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startTestCluster({ crds: true });
  });
  afterAll(() => cluster.close());

  it('takes the finalizers off every Workflow and WebhookTrigger; one being deleted goes', async () => {
    const { client } = cluster;
    for (const ns of ['team-a', 'team-b']) {
      await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name: ns } } });
      await client.request('POST', resourcePath('Workflow', ns), {
        body: {
          apiVersion: 'hookgate.dev/v1alpha1',
          kind: 'Workflow',
          metadata: { name: 'orders', namespace: ns, finalizers: [FINALIZER] },
          spec: {
            application: 'shop',
            environment: 'development',
            nodes: [{ id: 'a', type: 'transform', expression: '$' }],
          },
        },
      });
      await client.request('POST', resourcePath('WebhookTrigger', ns), {
        body: {
          apiVersion: 'hookgate.dev/v1alpha1',
          kind: 'WebhookTrigger',
          metadata: { name: 'orders', namespace: ns, finalizers: [FINALIZER] },
          spec: { workflowRef: { name: 'orders' }, response: { mode: 'immediateAck' } },
        },
      });
    }
    // Deleted with no operator to clean up: it waits for its finalizer.
    await client.request('DELETE', resourcePath('WebhookTrigger', 'team-b', 'orders'));
    const waiting = await client.request<Obj>(
      'GET',
      resourcePath('WebhookTrigger', 'team-b', 'orders'),
    );
    expect(waiting.metadata.deletionTimestamp).toBeTruthy();

    const env = kubeToolEnv(cluster.dir, cluster.kubeconfig);
    env.PATH = `${join(tools?.kubectl ?? '', '..')}:${env.PATH ?? ''}`;
    const run = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        'bash',
        ['--norc', '--noprofile', '-eo', 'pipefail', '-c', finalizerLoop()],
        { env, timeout: 60_000 },
        (err, _out, stderr) => resolve({ code: err ? 1 : 0, stderr }),
      );
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);

    for (const ns of ['team-a', 'team-b']) {
      const wf = await client.request<Obj>('GET', resourcePath('Workflow', ns, 'orders'));
      expect(wf.metadata.finalizers ?? []).toEqual([]);
    }
    const trigger = await client.request<Obj>(
      'GET',
      resourcePath('WebhookTrigger', 'team-a', 'orders'),
    );
    expect(trigger.metadata.finalizers ?? []).toEqual([]);
    await expect(
      client.request('GET', resourcePath('WebhookTrigger', 'team-b', 'orders')),
    ).rejects.toThrow(/404|not found/i);
  });
});
