// `node bench/operator-scale.ts [count]`: apply N WebhookTriggers at once (default 2000)
// to the in-memory Kubernetes API server and time until the real `hookgate operator`
// process (a child, leader election on) has brought every one to Ready. Reports the
// time and the operator's memory (VmRSS now and peak VmHWM, from /proc).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startKubeApiServer } from '../testing/kube-apiserver/index.ts';

const count = Number(process.argv[2] ?? 2000);
const root = join(import.meta.dirname, '..');
const server = await startKubeApiServer({ historyWindow: count * 20 });
server.applyCrdsFrom(join(root, 'crds'));
const dir = mkdtempSync(join(tmpdir(), 'hookgate-scale-'));
const kubeconfig = server.writeKubeconfig(dir);
const port = 20_000 + Math.floor(Math.random() * 10_000);
const operator = spawn(
  process.execPath,
  [join(root, 'roles/cli.ts'), 'operator', '--port', String(port)],
  {
    env: { ...process.env, KUBECONFIG: kubeconfig, POD_NAMESPACE: 'default' },
    stdio: ['ignore', process.env.BENCH_OPERATOR_LOG ? 'inherit' : 'ignore', 'inherit'],
  },
);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const memory = () => {
  const status = readFileSync(`/proc/${operator.pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMiB: kb('VmRSS') / 1024, peakMiB: kb('VmHWM') / 1024 };
};

try {
  for (;;) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`)
      .then((r) => r.json() as Promise<{ status: string }>)
      .catch(() => undefined);
    if (ready?.status === 'leading') break;
    await sleep(50);
  }
  const idle = memory();
  const base = `${server.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;
  const post = (plural: string, body: object) =>
    fetch(`${base}/${plural}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const started = Date.now();
  await post('workflows', {
    apiVersion: 'hookgate.dev/v1alpha1',
    kind: 'Workflow',
    metadata: { name: 'scale' },
    spec: {
      application: 'scale',
      environment: 'production',
      nodes: [{ id: 'a', type: 'transform', expression: '$' }],
    },
  });
  for (let i = 0; i < count; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, count - i) }, (_v, j) =>
        post('webhooktriggers', {
          apiVersion: 'hookgate.dev/v1alpha1',
          kind: 'WebhookTrigger',
          metadata: { name: `t-${i + j}` },
          spec: {
            workflowRef: { name: 'scale' },
            pathSegment: `t-${i + j}`,
            response: { mode: 'immediateAck' },
          },
        }).then((r) => {
          if (r.status !== 201) throw new Error(`create t-${i + j}: ${r.status}`);
        }),
      ),
    );
  }
  const applied = Date.now();
  let ready = 0;
  while (ready < count) {
    await sleep(250);
    const list = (await (await fetch(`${base}/webhooktriggers`)).json()) as {
      items: { status?: { conditions?: { type: string; status: string }[] } }[];
    };
    ready = list.items.filter((t) =>
      t.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    ).length;
    if (Date.now() - started > 600_000)
      throw new Error(`only ${ready}/${count} Ready after 10 minutes`);
  }
  const done = Date.now();
  const loaded = memory();
  console.log(
    `${count} WebhookTriggers: applied in ${((applied - started) / 1000).toFixed(1)} s, all Ready ${((done - started) / 1000).toFixed(1)} s after the first write`,
  );
  console.log(
    `operator memory: idle ${idle.rssMiB.toFixed(0)} MiB RSS; after ${loaded.rssMiB.toFixed(0)} MiB RSS, peak ${loaded.peakMiB.toFixed(0)} MiB`,
  );
  console.log(`API server writes: resourceVersion ${server.resourceVersion()}`);
} finally {
  operator.kill('SIGTERM');
  await server.close();
  rmSync(dir, { recursive: true, force: true });
}
