// hookgate get against the test API server (testing/kube-apiserver) through a
// kubeconfig, and kubectl-hookgate as a kubectl plugin: a real kubectl
// (test/support/kube-tools.ts) finds it on PATH and runs `kubectl hookgate ...`.
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeToolEnv, kubeToolsOrSkip, type KubeTools } from '../support/kube-tools.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { hookgate, ROOT } from './run.ts';

let cluster: TestCluster;
let tools: KubeTools | undefined;

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  const api = cluster.kc.makeApiClient(CustomObjectsApi);
  const create = (plural: string, namespace: string, body: object) =>
    api.createNamespacedCustomObject({
      group: 'hookgate.dev',
      version: 'v1alpha1',
      namespace,
      plural,
      body,
    });
  const core = cluster.kc.makeApiClient(CoreV1Api);
  for (const namespace of ['shop', 'ops']) {
    await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(() => undefined);
    await create('workflows', namespace, workflow('orders', {}, { namespace }));
    await create(
      'webhooktriggers',
      namespace,
      trigger('ingest', { pathSegment: 'ingest', methods: ['POST', 'PUT'] }, { namespace }),
    );
  }
  tools = await kubeToolsOrSkip();
}, 300_000);
afterAll(async () => {
  await cluster?.close();
});

describe('hookgate get from a cluster', { timeout: 180_000 }, () => {
  it('lists triggers of every namespace, or one, as a table or YAML', async () => {
    const [all, shop, yaml] = await Promise.all([
      hookgate(['get', 'triggers', '--kubeconfig', cluster.kubeconfig]),
      hookgate(['get', 'triggers', '-n', 'shop'], { env: { KUBECONFIG: cluster.kubeconfig } }),
      hookgate(['get', 'workflows', '--kubeconfig', cluster.kubeconfig, '-o', 'yaml']),
    ]);
    expect(all.stderr).toBe('');
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAMESPACE\s+NAME\s+WORKFLOW\s+METHODS\s+MODE\s+READY\s+URL\s+AGE$/);
    // No operator runs here: no status yet, shown as <none>.
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(
        /^ops\s+ingest\s+orders\s+POST,PUT\s+immediateAck\s+<none>\s+<none>\s+\d+s$/,
      ),
      expect.stringMatching(
        /^shop\s+ingest\s+orders\s+POST,PUT\s+immediateAck\s+<none>\s+<none>\s+\d+s$/,
      ),
    ]);
    expect(shop.stdout.trim().split('\n')).toHaveLength(2);
    expect(yaml.code).toBe(0);
    expect(yaml.stdout).toContain('application: shop');
  });

  it('executions need a server; a kubeconfig that is not there is bad usage', async () => {
    const [executions, down] = await Promise.all([
      hookgate(['get', 'executions', '--kubeconfig', cluster.kubeconfig]),
      hookgate([
        'get',
        'triggers',
        '--kubeconfig',
        join(ROOT, 'test', 'cli', 'no-such-kubeconfig'),
      ]),
    ]);
    expect(executions.code).toBe(2);
    expect(executions.stderr).toContain('executions are kept by the gateways');
    expect(down.code).toBe(2);
  });
});

describe('kubectl hookgate (the kubectl plugin)', { timeout: 240_000 }, () => {
  const kubectl = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const dir = join(cluster.dir, 'plugin');
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    try {
      // The plugin as an install puts it: an executable named kubectl-hookgate on PATH,
      // with Node 24 as `node`.
      symlinkSync(join(ROOT, 'cli', 'kubectl-hookgate'), join(bin, 'kubectl-hookgate'));
      symlinkSync(process.execPath, join(bin, 'node'));
    } catch {
      // Already linked by an earlier call.
    }
    const env = kubeToolEnv(dir, cluster.kubeconfig);
    env.PATH = `${bin}:${env.PATH ?? ''}`;
    return new Promise((resolve) => {
      execFile(
        tools?.kubectl ?? 'kubectl',
        args,
        { env, cwd: ROOT, timeout: 180_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? -1) : 0, stdout, stderr }),
      );
    });
  };

  it('kubectl finds it and runs `kubectl hookgate version`', async ({ skip }) => {
    if (!tools) return skip();
    const list = await kubectl(['plugin', 'list']);
    expect(list.stdout).toContain('kubectl-hookgate');
    const run = await kubectl(['hookgate', 'version']);
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^hookgate \d+\.\d+\.\d+ \(hookgate\.dev\/v1alpha1, node v24\./);
  });

  it('kubectl hookgate validate: the examples pass, a broken manifest exits 1', async ({
    skip,
  }) => {
    if (!tools) return skip();
    const ok = await kubectl(['hookgate', 'validate', 'examples']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/0 invalid, \d+ skipped, 0 error\(s\)/);
    const bad = await kubectl(['hookgate', 'validate', 'test/cli/no-such-dir']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(
      'kubectl hookgate validate: test/cli/no-such-dir: no such file or directory',
    );
  });

  it('kubectl hookgate get triggers uses the same kubeconfig as kubectl', async ({ skip }) => {
    if (!tools) return skip();
    const run = await kubectl(['hookgate', 'get', 'triggers', '-n', 'ops']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^ops\s+ingest\s+orders/m);
  });
});
