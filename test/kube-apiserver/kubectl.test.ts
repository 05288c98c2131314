// kubectl v1.35 (and helm) against the in-memory API server: apply (client-side and
// server-side), get with printer columns, explain, wait (K31), delete with a
// finalizer, and the per-run discovery cache (K32). The request log checks what
// kubectl actually sends (acceptance-rules §1.8).
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';
import {
  startKubeApiServer,
  type KubeApiServer,
  type LoggedRequest,
} from '../../testing/kube-apiserver/index.ts';
import { client, GROUP, sleep, VERSION, WT, type Obj } from './support.ts';

const tools = await kubeToolsOrSkip();
const CRDS = resolve(import.meta.dirname, '../../crds');

let server: KubeApiServer;
let call: ReturnType<typeof client>;
let dir: string;
let env: NodeJS.ProcessEnv;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function kubectl(args: string[], input?: string): Promise<Run> {
  return new Promise((resolveRun) => {
    const child = execFile(
      tools?.kubectl ?? 'missing-kubectl',
      args,
      { env, timeout: 30_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolveRun({ code, stdout, stderr });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

function manifests(mode: string, extra = ''): string {
  return `apiVersion: ${GROUP}/${VERSION}
kind: Workflow
metadata:
  name: orders
spec:
  application: shop
  environment: development
  nodes:
    - id: reply
      type: respond
---
apiVersion: ${GROUP}/${VERSION}
kind: WebhookTrigger
metadata:
  name: orders-hook
spec:
  workflowRef:
    name: orders
  response:
    mode: ${mode}
${extra}`;
}

function writeManifest(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const sent = (pred: (r: LoggedRequest) => boolean): LoggedRequest[] => server.requests.filter(pred);

describe.skipIf(!tools)('kubectl v1.35 against the in-memory API server', () => {
  beforeAll(async () => {
    server = await startKubeApiServer();
    server.applyCrdsFrom(CRDS);
    call = client(server);
    dir = mkdtempSync(join(tmpdir(), 'kubectl-e2e-'));
    env = kubeToolEnv(dir, server.writeKubeconfig(dir));
  });

  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('K28 K29 kubectl apply -f creates a Workflow and a WebhookTrigger (client-side), then patches with merge-patch', async () => {
    server.clearRequests();
    const created = await kubectl([
      'apply',
      '-f',
      writeManifest('m1.yaml', manifests('immediateAck')),
    ]);
    expect(created.stderr).toBe('');
    expect(created.stdout).toContain('workflow.hookgate.dev/orders created');
    expect(created.stdout).toContain('webhooktrigger.hookgate.dev/orders-hook created');
    const paths = server.requests.map((r) => `${r.method} ${r.path}`);
    expect(paths).toEqual(
      expect.arrayContaining([
        'GET /api',
        'GET /apis',
        'GET /openapi/v3',
        `GET /openapi/v3/apis/${GROUP}/${VERSION}`,
      ]),
    );
    expect(sent((r) => r.path === '/apis')[0]?.accept).toContain('as=APIGroupDiscoveryList');
    const post = sent((r) => r.method === 'POST' && r.path === WT)[0];
    expect(post).toMatchObject({
      status: 201,
      query: { fieldManager: 'kubectl-client-side-apply', fieldValidation: 'Strict' },
    });
    expect(post?.body).toContain('kubectl.kubernetes.io/last-applied-configuration');

    server.clearRequests();
    const patched = await kubectl([
      'apply',
      '-f',
      writeManifest('m2.yaml', manifests('waitForCompletion')),
    ]);
    expect(patched.stdout).toContain('workflow.hookgate.dev/orders unchanged');
    expect(patched.stdout).toContain('webhooktrigger.hookgate.dev/orders-hook configured');
    const patch = sent((r) => r.method === 'PATCH');
    expect(patch).toHaveLength(1);
    expect(patch[0]).toMatchObject({
      path: `${WT}/orders-hook`,
      contentType: 'application/merge-patch+json',
      status: 200,
      query: { fieldManager: 'kubectl-client-side-apply', fieldValidation: 'Strict' },
    });
    const live = await call('GET', `${WT}/orders-hook`);
    expect(live.body.spec).toMatchObject({ response: { mode: 'waitForCompletion' } });
    expect(live.body.metadata.generation).toBe(2);
  });

  it('K24 K29 kubectl apply --server-side sends apply-patch+yaml; strict validation rejects unknown fields', async () => {
    server.clearRequests();
    const ssa = await kubectl([
      'apply',
      '--server-side',
      '-f',
      writeManifest('m3.yaml', manifests('asyncCallback')),
    ]);
    expect(ssa.stdout).toContain('webhooktrigger.hookgate.dev/orders-hook serverside-applied');
    const apply = sent((r) => r.method === 'PATCH' && r.path === `${WT}/orders-hook`)[0];
    expect(apply).toMatchObject({
      contentType: 'application/apply-patch+yaml',
      status: 200,
      query: { fieldManager: 'kubectl', fieldValidation: 'Strict', force: 'false' },
    });
    expect((await call('GET', `${WT}/orders-hook`)).body.spec).toMatchObject({
      response: { mode: 'asyncCallback' },
    });
    const fresh = await kubectl(
      ['apply', '--server-side', '-f', '-'],
      manifests('immediateAck').replace(/orders-hook/g, 'ssa-new'),
    );
    expect(fresh.stdout).toContain('webhooktrigger.hookgate.dev/ssa-new serverside-applied');
    expect(sent((r) => r.method === 'PATCH' && r.path === `${WT}/ssa-new`)[0]?.status).toBe(201);
    const bad = await kubectl(
      ['apply', '-f', '-'],
      manifests('immediateAck', '  bogusField: 1\n').replace(/orders-hook/g, 'bad-hook'),
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('unknown field "spec.bogusField"');
  });

  it('kubectl apply --dry-run=server and kubectl diff validate on the server and store nothing', async () => {
    const before = server.resourceVersion();
    const dry = await kubectl(
      ['apply', '--dry-run=server', '-f', '-'],
      manifests('immediateAck').replace(/orders-hook/g, 'dry-hook'),
    );
    expect(dry.stdout).toContain('webhooktrigger.hookgate.dev/dry-hook created (server dry run)');
    expect((await call('GET', `${WT}/dry-hook`)).status).toBe(404);
    const diff = await kubectl(['diff', '-f', '-'], manifests('sseStream'));
    expect(diff.code).toBe(1); // 1: differences found
    expect(diff.stdout).toMatch(/-\s+mode: asyncCallback/);
    expect(diff.stdout).toMatch(/\+\s+mode: sseStream/);
    expect(server.resourceVersion()).toBe(before);
    expect(sent((r) => r.query.dryRun === 'All').length).toBeGreaterThanOrEqual(2);
  });

  it('K30 kubectl get webhooktriggers prints the printer columns (NAME READY STATUS URL AGE)', async () => {
    const st = await call(
      'PATCH',
      `${WT}/orders-hook/status`,
      {
        status: {
          url: 'https://hooks.example/webhook/orders/default',
          conditions: [
            {
              type: 'Ready',
              status: 'False',
              reason: 'Pending',
              message: 'waiting',
              lastTransitionTime: '2026-01-01T00:00:00Z',
              observedGeneration: 1,
            },
          ],
        },
      },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(st.status).toBe(200);
    server.clearRequests();
    const get = await kubectl(['get', 'webhooktriggers']);
    expect(get.code).toBe(0);
    const [header, ...rows] = get.stdout.trim().split('\n');
    expect(header?.split(/\s+/)).toEqual(['NAME', 'READY', 'STATUS', 'URL', 'AGE']);
    const row = rows.find((r) => r.startsWith('orders-hook '))?.split(/\s+/);
    expect(row?.slice(0, 4)).toEqual([
      'orders-hook',
      'False',
      'waiting',
      'https://hooks.example/webhook/orders/default',
    ]);
    expect(row?.[4]).toMatch(/^\d+s$/);
    expect(sent((r) => r.path === WT)[0]?.accept).toContain('as=Table');
    const wide = await kubectl(['get', 'wht', '-o', 'wide']);
    expect(wide.stdout.split('\n')[0]?.split(/\s+/)).toEqual([
      'NAME',
      'READY',
      'STATUS',
      'URL',
      'MODE',
      'AGE',
    ]);
  });

  it('kubectl get -w streams Table rows as the status changes', async () => {
    const child = spawn(tools?.kubectl ?? 'missing-kubectl', ['get', 'webhooktriggers', '-w'], {
      env,
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    try {
      for (let i = 0; i < 500 && !stdout.includes('orders-hook'); i++) await sleep(20);
      const patched = await call(
        'PATCH',
        `${WT}/orders-hook/status`,
        {
          status: {
            conditions: [
              {
                type: 'Ready',
                status: 'Unknown',
                reason: 'Reconciling',
                message: 'watching',
                lastTransitionTime: '2026-01-01T00:00:00Z',
                observedGeneration: 1,
              },
            ],
          },
        },
        { 'Content-Type': 'application/merge-patch+json' },
      );
      expect(patched.status).toBe(200);
      for (let i = 0; i < 500 && !stdout.includes('watching'); i++) await sleep(20);
    } finally {
      child.kill();
    }
    const lines = stdout.trim().split('\n');
    expect(lines[0]?.split(/\s+/)).toEqual(['NAME', 'READY', 'STATUS', 'URL', 'AGE']);
    expect(lines.at(-1)?.split(/\s+/).slice(0, 3)).toEqual(['orders-hook', 'Unknown', 'watching']);
  });

  it('kubectl explain webhooktrigger.spec.auth shows the schema descriptions', async () => {
    const explain = await kubectl(['explain', 'webhooktrigger.spec.auth']);
    expect(explain.code).toBe(0);
    expect(explain.stdout).toContain('KIND:       WebhookTrigger');
    expect(explain.stdout).toContain('Authentication of callers.');
    expect(explain.stdout).toMatch(/method\s+<string> -required-/);
    expect(explain.stdout).toContain('API key authentication.');
  });

  it('K31 kubectl wait --for=condition=Ready: not while observedGeneration < generation, then succeeds', async () => {
    const gen = (await call('GET', `${WT}/orders-hook`)).body.metadata.generation ?? 0;
    const ready = (observedGeneration: number) => ({
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Reconciled',
            message: 'ready',
            lastTransitionTime: '2026-01-01T00:00:00Z',
            observedGeneration,
          },
        ],
      },
    });
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    expect((await call('PATCH', `${WT}/orders-hook/status`, ready(gen - 1), merge)).status).toBe(
      200,
    );
    server.clearRequests();
    const stale = await kubectl([
      'wait',
      '--for=condition=Ready',
      'webhooktrigger/orders-hook',
      '--timeout=1s',
    ]);
    expect(stale.code).not.toBe(0);
    expect(stale.stderr).toContain('timed out waiting for the condition');
    const watch = sent((r) => r.query.watch === '1' || r.query.watch === 'true')[0];
    // client-go 1.35's WatchListClient (K16): served here, so no fallback LIST happens.
    expect(watch?.query).toMatchObject({
      fieldSelector: 'metadata.name=orders-hook',
      sendInitialEvents: 'true',
      resourceVersionMatch: 'NotOlderThan',
      allowWatchBookmarks: 'true',
    });
    expect(watch?.status).toBe(200);

    const started = Date.now();
    const waiting = kubectl([
      'wait',
      '--for=condition=ready',
      'webhooktrigger/orders-hook',
      '--timeout=15s',
    ]);
    await sleep(700);
    expect((await call('PATCH', `${WT}/orders-hook/status`, ready(gen), merge)).status).toBe(200);
    const done = await waiting;
    expect(done.code).toBe(0);
    expect(done.stdout).toContain('webhooktrigger.hookgate.dev/orders-hook condition met');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('K10 K16 kubectl delete with a finalizer hangs until the finalizer is removed, then completes', async () => {
    const fin = await call(
      'PATCH',
      `${WT}/orders-hook`,
      { metadata: { finalizers: ['hookgate.dev/cleanup'] } },
      { 'Content-Type': 'application/merge-patch+json' },
    );
    expect(fin.status).toBe(200);
    server.clearRequests();
    const child = spawn(
      tools?.kubectl ?? 'missing-kubectl',
      ['delete', 'webhooktrigger', 'orders-hook', '--timeout=20s'],
      { env },
    );
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number>((r) => child.on('exit', (code) => r(code ?? -1)));
    let finished = false;
    void exited.then(() => (finished = true));
    await sleep(1500);
    expect(finished).toBe(false);
    const marked = (await call('GET', `${WT}/orders-hook`)).body;
    expect(marked.metadata.deletionTimestamp).toBeTruthy();
    const removed = await call(
      'PATCH',
      `${WT}/orders-hook`,
      [{ op: 'remove', path: '/metadata/finalizers' }],
      { 'Content-Type': 'application/json-patch+json' },
    );
    expect(removed.status).toBe(200);
    expect(await exited).toBe(0);
    expect(stdout).toContain('webhooktrigger.hookgate.dev "orders-hook" deleted');
    expect((await call<Obj>('GET', `${WT}/orders-hook`)).status).toBe(404);
    const del = sent((r) => r.method === 'DELETE')[0];
    expect(del).toMatchObject({ path: `${WT}/orders-hook`, status: 200 });
    expect(del?.body).toContain('"propagationPolicy":"Background"');
    const waitWatch = sent((r) => r.query.watch === 'true' || r.query.watch === '1');
    expect(waitWatch[0]?.query).toMatchObject({
      fieldSelector: 'metadata.name=orders-hook',
      sendInitialEvents: 'true',
      resourceVersionMatch: 'NotOlderThan',
    });
  });

  it('kubectl apply of a built-in (Secret) works and re-applies with a patch; typed create commands get 415 (protobuf)', async () => {
    const secret = (v: string) =>
      `apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-keys\nstringData:\n  consumer-a: ${v}\n`;
    expect((await kubectl(['apply', '-f', '-'], secret('one'))).stdout).toContain(
      'secret/api-keys created',
    );
    const again = await kubectl(['apply', '-f', '-'], secret('two'));
    expect(again.stdout).toContain('secret/api-keys configured');
    expect(again.stderr).toBe('');
    const data = (
      await call<{ data: Record<string, string> }>(
        'GET',
        '/api/v1/namespaces/default/secrets/api-keys',
      )
    ).body.data;
    expect(Buffer.from(data['consumer-a'] ?? '', 'base64').toString()).toBe('two');
    const typed = await kubectl(['create', 'namespace', 'team-a']);
    expect(typed.code).not.toBe(0);
    expect(typed.stderr).toContain('UnsupportedMediaType');
  });

  it('K17 kubectl get --raw reads a list at an exact resourceVersion; --chunk-size pages with continue; bad list options are refused as the API server refuses them', async () => {
    const cms = '/api/v1/namespaces/default/configmaps';
    const cm = (name: string, v: string) => ({
      metadata: { name, labels: { k17: 'y' } },
      data: { v },
    });
    for (const n of ['rv-a', 'rv-b', 'rv-c'])
      expect((await call('POST', cms, cm(n, '1'))).status).toBe(201);
    const at = String(server.resourceVersion());
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    expect((await call('PATCH', `${cms}/rv-a`, { data: { v: '2' } }, merge)).status).toBe(200);
    expect((await call('DELETE', `${cms}/rv-b`)).status).toBe(200);

    const raw = async (query: string) => {
      const run = await kubectl(['get', '--raw', `${cms}?labelSelector=k17&${query}`]);
      expect(run.stderr).toBe('');
      return JSON.parse(run.stdout) as {
        metadata: { resourceVersion: string };
        items: { metadata: { name: string }; data: { v: string } }[];
      };
    };
    const values = (l: Awaited<ReturnType<typeof raw>>) =>
      l.items.map((i) => `${i.metadata.name}=${i.data.v}`);
    const exact = await raw(`resourceVersion=${at}&resourceVersionMatch=Exact`);
    expect(exact.metadata.resourceVersion).toBe(at);
    expect(values(exact)).toEqual(['rv-a=1', 'rv-b=1', 'rv-c=1']);
    const newest = await raw(`resourceVersion=${at}&resourceVersionMatch=NotOlderThan`);
    expect(newest.metadata.resourceVersion).toBe(String(server.resourceVersion()));
    expect(values(newest)).toEqual(['rv-a=2', 'rv-c=1']);

    server.clearRequests();
    const chunked = await kubectl([
      'get',
      'configmaps',
      '-l',
      'k17',
      '--chunk-size=1',
      '-o',
      'name',
    ]);
    expect(chunked.stderr).toBe('');
    expect(chunked.stdout.trim().split('\n')).toEqual(['configmap/rv-a', 'configmap/rv-c']);
    const pages = sent((r) => r.method === 'GET' && r.path === cms);
    expect(pages.map((r) => [r.query.limit, r.query.continue !== undefined, r.status])).toEqual([
      ['1', false, 200],
      ['1', true, 200],
    ]);

    const refused = await kubectl([
      'get',
      '--raw',
      `${cms}?resourceVersion=0&resourceVersionMatch=Exact`,
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr.trim()).toBe(
      'The ListOptions "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
    );
    const bad = await kubectl(['get', '--raw', `${cms}?resourceVersion=abc`]);
    expect(bad.stderr.trim()).toBe(
      'Error from server (BadRequest): invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
    );
  });

  it('K16 kubectl get --raw on a watch: a watch-list without allowWatchBookmarks is served with no end bookmark; bad watch options are refused as the API server refuses them', async () => {
    const cms = '/api/v1/namespaces/default/configmaps';
    expect((await call('POST', cms, { metadata: { name: 'w16' }, data: { v: '1' } })).status).toBe(
      201,
    );
    const watch = (query: string) =>
      kubectl(['get', '--raw', `${cms}?watch=1&fieldSelector=metadata.name%3Dw16&${query}`]);
    // validation.go does not require allowWatchBookmarks; the cacher sends the end
    // bookmark only with it (isListWatchRequest). timeoutSeconds ends the stream.
    const served = await watch(
      'sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1',
    );
    expect(served.stderr).toBe('');
    const events = served.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; object: { metadata: { name: string } } });
    expect(events.map((e) => [e.type, e.object.metadata.name])).toEqual([['ADDED', 'w16']]);

    const requires = await watch('sendInitialEvents=true');
    expect(requires.code).not.toBe(0);
    expect(requires.stderr.trim()).toBe(
      'The ListOptions "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
    );
    // A plain watch from "" is defaulted to a watch-list (SetListOptionsDefaults), which
    // continue is forbidden with.
    const defaulted = await watch('continue=abc');
    expect(defaulted.stderr.trim()).toBe(
      'The ListOptions "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided',
    );
    const both = await watch(
      `resourceVersion=${server.resourceVersion()}&resourceVersionMatch=Exact`,
    );
    expect(both.stderr.trim()).toBe(
      [
        'The ListOptions "" is invalid: ',
        '* resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
        '* resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"',
      ].join('\n'),
    );
    const bad = await watch('resourceVersion=abc');
    expect(bad.stderr.trim()).toBe(
      'Error from server: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
    );
  });

  it('K27 K28 kubectl apply -f crds/ establishes the CRDs and kubectl finds the new types at once', async () => {
    const fresh = await startKubeApiServer();
    const freshDir = mkdtempSync(join(tmpdir(), 'kubectl-crds-'));
    const saved = env;
    try {
      env = kubeToolEnv(freshDir, fresh.writeKubeconfig(freshDir));
      expect((await kubectl(['get', 'namespaces'])).stdout).toContain('default');
      const applied = await kubectl(['apply', '-f', CRDS]);
      expect(applied.stdout).toContain(
        'customresourcedefinition.apiextensions.k8s.io/webhooktriggers.hookgate.dev created',
      );
      const established = await kubectl([
        'wait',
        '--for=condition=Established',
        'crd/webhooktriggers.hookgate.dev',
        '--timeout=5s',
      ]);
      expect(established.code).toBe(0);
      const none = await kubectl(['get', 'webhooktriggers']);
      expect(none.code).toBe(0);
      expect(none.stderr).toContain('No resources found in default namespace.');
    } finally {
      env = saved;
      await fresh.close();
      rmSync(freshDir, { recursive: true, force: true });
    }
  });

  it('K32 kubectl caches discovery in the per-run KUBECACHEDIR, not in the real HOME', () => {
    const cache = env.KUBECACHEDIR ?? '';
    expect(cache.startsWith(dir)).toBe(true);
    expect(existsSync(join(cache, 'discovery'))).toBe(true);
    const hosts = readdirSync(join(cache, 'discovery'));
    expect(hosts.some((h) => h.includes(String(server.port)))).toBe(true);
  });

  it('helm runs with its homes in temp dirs', async () => {
    const out = await new Promise<string>((resolveOut, reject) =>
      execFile(tools?.helm ?? 'missing-helm', ['version', '--short'], { env }, (err, stdout) =>
        err ? reject(new Error(err.message)) : resolveOut(stdout),
      ),
    );
    expect(out).toMatch(/^v4\./);
  });
});
