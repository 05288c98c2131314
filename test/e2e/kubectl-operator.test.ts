// The platform engineer's path, end to end: a real kubectl v1.35 applies the shipped
// examples to a Kubernetes-compatible API server; one hookgate process (operator +
// gateway + engine, resources from the Kubernetes API) reconciles them; kubectl sees
// the printer columns and waits for Ready; requests are served by the gateway the
// operator configured; kubectl delete runs the finalizer.
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../operator/controller/kube-client.ts';
import { KubernetesSource } from '../../operator/sources/kubernetes.ts';
import { kubernetesEvents } from '../../operator/controller/kube-events.ts';
import { createDevRuntime, type DevRuntime } from '../../roles/dev.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { eventually } from '../support/eventually.ts';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';

const tools = await kubeToolsOrSkip();
const root = resolve(import.meta.dirname, '..', '..');

let server: KubeApiServer;
let runtime: DevRuntime;
let gateway: string;
let dir: string;
let env: NodeJS.ProcessEnv;

function kubectl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      tools?.kubectl ?? 'kubectl-missing',
      args,
      { env, timeout: 60_000 },
      (err, stdout, stderr) => {
        done({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

describe.skipIf(!tools)('kubectl → operator → gateway', () => {
  beforeAll(async () => {
    server = await startKubeApiServer();
    dir = mkdtempSync(join(tmpdir(), 'hookgate-e2e-'));
    const kubeconfig = server.writeKubeconfig(dir);
    env = kubeToolEnv(dir, kubeconfig);
    const crds = await kubectl('apply', '-f', join(root, 'crds'));
    expect(crds.code, crds.stderr).toBe(0);
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    runtime = await createDevRuntime({
      source: new KubernetesSource({ kubeConfig: kc }),
      recordEvent: kubernetesEvents(new KubeClient(kc), 'hookgate'),
      baseUrl: 'http://hooks.test',
    });
    gateway = await runtime.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    const closing = runtime?.close();
    runtime?.app.server.closeAllConnections();
    await closing;
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('kubectl apply -f examples/ creates everything, and kubectl wait sees every trigger Ready', async () => {
    const applied = await kubectl('apply', '-f', join(root, 'examples'));
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('webhooktrigger.hookgate.dev/orders-ingest created');
    const waited = await kubectl(
      'wait',
      '--for=condition=Ready',
      'webhooktriggers',
      '--all',
      '--timeout=60s',
    );
    expect(waited.code, waited.stderr).toBe(0);
    const wf = await kubectl(
      'wait',
      '--for=condition=Ready',
      'workflows',
      '--all',
      '--timeout=30s',
    );
    expect(wf.code, wf.stderr).toBe(0);
  });

  it('kubectl get shows the printer columns with the URL', async () => {
    const got = await kubectl('get', 'webhooktriggers');
    expect(got.code, got.stderr).toBe(0);
    const [header, ...rows] = got.stdout.trim().split('\n');
    expect(header?.split(/\s{2,}/)).toEqual(['NAME', 'READY', 'STATUS', 'URL', 'AGE']);
    const orders = rows.find((r) => r.startsWith('orders-ingest'));
    expect(orders).toMatch(
      /True\s+Ready at http:\/\/hooks\.test\/webhook\/default_production_orders\/ingest\s+http:\/\/hooks\.test\/webhook\/default_production_orders\/ingest/,
    );
    const short = await kubectl('get', 'wht', '-o', 'name');
    expect(short.stdout).toContain('webhooktrigger.hookgate.dev/orders-ingest');
  });

  it('the gateway serves what the operator configured', async () => {
    const res = await fetch(`${gateway}/webhook/default_production_orders/ingest`, {
      method: 'POST',
      headers: { 'x-api-key': 'demo-key-acme-0001', 'content-type': 'application/json' },
      body: '{"orderId":"A-1","total":10,"currency":"EUR"}',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      orderId: 'A-1',
      decision: 'accepted',
      customer: 'acme',
    });
  });

  it('a Secret rotated with kubectl takes effect without touching the trigger', async () => {
    const patched = await kubectl(
      'patch',
      'secret',
      'orders-api-keys',
      '--type=merge',
      '-p',
      '{"stringData":{"acme":"rotated-key-0003"}}',
    );
    expect(patched.code, patched.stderr).toBe(0);
    const call = (key: string) =>
      fetch(`${gateway}/webhook/default_production_orders/ingest`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: '{"orderId":"A-2","total":1}',
      });
    await eventually(async () => {
      expect((await call('rotated-key-0003')).status).toBe(200);
      expect((await call('demo-key-acme-0001')).status).toBe(401);
    }, 10_000);
  });

  it('a server-side apply that changes the path moves the endpoint', async () => {
    const manifest = join(dir, 'hello.yaml');
    writeFileSync(
      manifest,
      `apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata:
  name: hello
spec:
  workflowRef: { name: hello }
  pathSegment: notify
  methods: [GET, POST]
  response: { mode: immediateAck }
`,
    );
    const applied = await kubectl('apply', '--server-side', '--force-conflicts', '-f', manifest);
    expect(applied.code, applied.stderr).toBe(0);
    await eventually(async () => {
      expect(
        (await fetch(`${gateway}/webhook/default_development_hello/notify`, { method: 'POST' }))
          .status,
      ).toBe(202);
      expect(
        (await fetch(`${gateway}/webhook/default_development_hello/default`, { method: 'POST' }))
          .status,
      ).toBe(404);
    }, 10_000);
    const waited = await kubectl(
      'wait',
      '--for=condition=Ready',
      'webhooktrigger/hello',
      '--timeout=30s',
    );
    expect(waited.code, waited.stderr).toBe(0);
  });

  it('a manifest that breaks a CEL rule is refused by the API server with the rule message', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      `apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata: { name: bad }
spec:
  workflowRef: { name: hello }
  auth: { method: apiKey }
  response: { mode: immediateAck }
`,
    );
    const applied = await kubectl('apply', '-f', bad);
    expect(applied.code).not.toBe(0);
    expect(applied.stderr).toContain('auth.apiKey is required when auth.method is apiKey');
    const unknown = join(dir, 'unknown.yaml');
    writeFileSync(
      unknown,
      `apiVersion: hookgate.dev/v1alpha1\nkind: WebhookTrigger\nmetadata: { name: typo }\nspec:\n  workflowRef: { name: hello }\n  pathSegmnt: x\n  response: { mode: immediateAck }\n`,
    );
    const typo = await kubectl('apply', '-f', unknown);
    expect(typo.code).not.toBe(0);
    expect(typo.stderr).toMatch(/unknown field "spec.pathSegmnt"/);
  });

  it('a missing Secret shows as Ready=False with reason SecretNotFound', async () => {
    const file = join(dir, 'nosecret.yaml');
    writeFileSync(
      file,
      `apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata: { name: no-secret }
spec:
  workflowRef: { name: hello }
  pathSegment: locked
  auth: { method: apiKey, apiKey: { secretRef: { name: does-not-exist } } }
  response: { mode: immediateAck }
`,
    );
    expect((await kubectl('apply', '-f', file)).code).toBe(0);
    await eventually(async () => {
      const r = await kubectl(
        'get',
        'wht',
        'no-secret',
        '-o',
        'jsonpath={.status.conditions[?(@.type=="Ready")].reason}',
      );
      expect(r.stdout).toBe('SecretNotFound');
    }, 10_000);
    await eventually(async () => {
      const events = await kubectl('get', 'events', '-o', 'json');
      const items = (
        JSON.parse(events.stdout) as {
          items: { type: string; reason: string; involvedObject: { name: string } }[];
        }
      ).items;
      expect(items).toContainEqual(
        expect.objectContaining({
          type: 'Warning',
          reason: 'SecretNotFound',
          involvedObject: expect.objectContaining({ name: 'no-secret' }),
        }),
      );
      expect(items).toContainEqual(
        expect.objectContaining({
          type: 'Normal',
          reason: 'Ready',
          involvedObject: expect.objectContaining({ name: 'orders-ingest' }),
        }),
      );
    }, 10_000);
  });

  it('signed deliveries: the GitHub example is served; a Secret without the listed key is SecretInvalid', async () => {
    const body = '{"zen":"Design for failure.","hook_id":1}';
    const sign = (secret: string) =>
      `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    const url = `${gateway}/webhook/default_production_github-events/github`;
    const post = (signature: string) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature },
        body,
      });
    expect((await post(sign('demo-github-secret-0001'))).status).toBe(202);
    const forged = await post(sign('guessed'));
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as { type: string }).type).toBe(
      'https://hookgate.dev/problems/signature-mismatch',
    );

    const file = join(dir, 'nokey.yaml');
    writeFileSync(
      file,
      `apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata: { name: signed-no-key }
spec:
  workflowRef: { name: github-events }
  pathSegment: nokey
  auth:
    method: signature
    signature: { preset: github, secretRef: { name: github-webhook, keys: [next] } }
  response: { mode: immediateAck }
`,
    );
    expect((await kubectl('apply', '-f', file)).code).toBe(0);
    await eventually(async () => {
      const r = await kubectl(
        'get',
        'wht',
        'signed-no-key',
        '-o',
        'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}',
      );
      expect(r.stdout).toBe('False/SecretInvalid');
    }, 10_000);
  });

  it('kubectl delete runs the finalizer: the route goes away and the object is gone', async () => {
    const deleted = await kubectl('delete', 'webhooktrigger', 'orders-ingest', '--timeout=30s');
    expect(deleted.code, deleted.stderr).toBe(0);
    const res = await fetch(`${gateway}/webhook/default_production_orders/ingest`, {
      method: 'POST',
    });
    expect(res.status).toBe(404);
    const gone = await kubectl('get', 'webhooktrigger', 'orders-ingest');
    expect(gone.stderr).toMatch(/NotFound/);
  });
});
