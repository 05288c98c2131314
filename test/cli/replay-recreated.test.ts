// `hookgate replay` of an execution whose trigger was deleted and created again under
// its name (another metadata.uid): refused (exit 1, 409 HG_ERR_REPLAY_TRIGGER_RECREATED)
// unless `--allow-recreated`. Against `hookgate dev --source kubernetes` over the
// in-memory API server, where a delete and a create make another object as on a
// cluster; the directory source keeps an object's uid however its manifest comes and
// goes (test/cli/server.test.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNotFound } from '../../operator/controller/kube-client.ts';
import { resourcePath } from '../../operator/sources/kube-resources.ts';
import { eventually } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import { hookgate, ROOT } from './run.ts';

let cluster: TestCluster;
let child: ChildProcess;
const port = await freePortRun(2);
const server = `http://127.0.0.1:${port + 1}`;
const endpoint = `http://127.0.0.1:${port}/webhook/default_production_hello/default`;
const env = { HOOKGATE_SERVER: server };

const hello = trigger('hello', { workflowRef: { name: 'hello' }, pathSegment: 'default' });
const createTrigger = () =>
  cluster.client.request('POST', resourcePath('WebhookTrigger', 'default'), { body: hello });
const served = async () => (await fetch(endpoint, { method: 'POST' })).status;

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  await cluster.client.request('POST', resourcePath('Workflow', 'default'), {
    body: workflow('hello'),
  });
  await createTrigger();
  child = spawn(
    process.execPath,
    [
      'roles/cli.ts',
      'dev',
      '--source',
      'kubernetes',
      '--port',
      String(port),
      '--admin-port',
      String(port + 1),
    ],
    {
      cwd: ROOT,
      env: { ...process.env, KUBECONFIG: cluster.kubeconfig, LOG_LEVEL: 'warn' },
      stdio: 'ignore',
    },
  );
  await eventually(async () => expect(await served()).toBe(202), 60_000, 200);
}, 90_000);
afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  await cluster?.close();
});

describe('hookgate replay of a request whose trigger was re-created', { timeout: 120_000 }, () => {
  it('is refused (exit 1, 409) unless --allow-recreated', async () => {
    const res = await fetch(endpoint, { method: 'POST' });
    expect(res.status).toBe(202);
    const { executionId: id } = (await res.json()) as { executionId: string };
    const before = await hookgate(['replay', id], { env });
    expect(before.stderr).toBe('');
    expect(before.code).toBe(0);

    // kubectl delete, then kubectl create: the same name, another uid.
    const path = resourcePath('WebhookTrigger', 'default', 'hello');
    await cluster.client.request('DELETE', path);
    await eventually(
      async () => {
        const gone = await cluster.client.request('GET', path).then(
          () => false,
          (err: unknown) => isNotFound(err),
        );
        expect(gone).toBe(true);
      },
      20_000,
      100,
    );
    await createTrigger();
    await eventually(async () => expect(await served()).toBe(202), 20_000, 100);

    const refused = await hookgate(['replay', id], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('(409 HG_ERR_REPLAY_TRIGGER_RECREATED)');
    const allowed = await hookgate(['replay', id, '--allow-recreated'], { env });
    expect(allowed.stderr).toBe('');
    expect(allowed.code).toBe(0);
    expect(allowed.stdout.trim()).not.toBe(id);
  });
});
