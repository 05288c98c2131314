// The whole system in containers: the hookgate image run by podman as 2 operators
// (leader election), 2 gateways and 2 workers, each container wired from the chart's
// own Deployments (`helm template charts/hookgate`: args, env, named ports, probes,
// terminationGracePeriodSeconds) and restricted the way the chart's securityContext
// restricts a pod (uid 65532, read-only root filesystem, only /tmp writable). Against
// the in-memory Kubernetes API server and a redis-server, both on loopback in this
// process's machine, reached through the host network.
//
// No Redis image can be pulled here (no registry is reachable), so Redis is a
// redis-server process started by the test, not a container.
//
// Opt-in like test/image/image.test.ts (HOOKGATE_IMAGE_TESTS=1, always on under
// CI=true); uses HOOKGATE_IMAGE or the local image of this version, built when absent.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { QUEUE } from '../../runtime/engine/queued-engine.ts';
import { eventually, sleep } from '../support/eventually.ts';
import { kubeToolEnv, kubeToolsOrSkip } from '../support/kube-tools.ts';
import {
  containerLogs,
  ensureImage,
  freePort,
  imageTestsEnabled,
  inspect,
  PODMAN_RUN,
  podman,
  processStatus,
  RESTRICTED,
  removeContainers,
} from '../support/podman.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

const exec = promisify(execFile);
const root = resolve(import.meta.dirname, '..', '..');
const enabled = imageTestsEnabled() && redisAvailable();
const tools = enabled ? await kubeToolsOrSkip() : undefined;

type RoleName = 'operator' | 'gateway' | 'worker';

/** A container spec of the chart, as far as podman can run it. */
interface ChartContainer {
  args: string[];
  env: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  ports: { name: string; containerPort: number }[];
  readinessProbe: { httpGet: { path: string; port: string } };
  livenessProbe: {
    httpGet: { path: string; port: string };
    periodSeconds: number;
    failureThreshold: number;
  };
}

interface ChartRole {
  container: ChartContainer;
  terminationGracePeriodSeconds: number;
}

/** One container standing for one pod. */
interface Pod {
  /** Pod name: the container's name and host name, and POD_NAME. */
  name: string;
  role: RoleName;
  /** Host port of each of the chart's named container ports (host network: all differ). */
  ports: Record<string, number>;
  env: Record<string, string>;
  readiness: string;
  liveness: string;
  /** How long a liveness failure may last before the kubelet restarts the container. */
  livenessWindowMs: number;
  graceSeconds: number;
}

interface Shot {
  path: string;
  sentAt: number;
  endedAt: number;
  status?: number;
  /** The body of a 5xx answer. */
  body?: string;
  error?: string;
}

/** How a request on a closed listener or closed keep-alive connection fails in undici. */
const CONNECTION_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

const NAMESPACE = 'default';
const ADMIN_TOKEN_FILE = '/etc/hookgate/admin-token';
const HELLO = '/webhook/default_development_hello/default';
const ORDERS = '/webhook/default_production_orders/ingest';
const BRIEF = '/webhook/default_staging_brief/brief';
const PAUSE = '/webhook/default_staging_pause/pause';
const LATE = '/webhook/default_development_hello/late';

/** The test's own resources: a short wait-for-completion and a 3 s run to interrupt. */
const OWN_MANIFESTS = `apiVersion: hookgate.dev/v1alpha1
kind: Workflow
metadata:
  name: brief
spec:
  application: system
  environment: staging
  nodes:
    - id: wait
      type: delay
      duration: 300ms
    - id: done
      type: transform
      expression: '{ "n": body.n }'
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata:
  name: brief
spec:
  workflowRef:
    name: brief
  pathSegment: brief
  methods: [POST]
  timeout: 20s
  response:
    mode: waitForCompletion
---
apiVersion: hookgate.dev/v1alpha1
kind: Workflow
metadata:
  name: pause
spec:
  application: system
  environment: staging
  nodes:
    - id: pause
      type: delay
      duration: 3s
    - id: done
      type: transform
      expression: '{ "done": body.n }'
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata:
  name: pause
spec:
  workflowRef:
    name: pause
  pathSegment: pause
  methods: [POST]
  response:
    mode: immediateAck
`;

const LATE_MANIFEST = `apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata:
  name: late
spec:
  workflowRef:
    name: hello
  pathSegment: late
  methods: [POST]
  response:
    mode: immediateAck
`;

describe.skipIf(!enabled || !tools)('the system in containers', { timeout: 90_000 }, () => {
  const run = `${process.pid}`;
  const adminToken = randomBytes(24).toString('hex');
  let image = '';
  let dir = '';
  let cluster: TestCluster;
  let redis: RedisServer;
  let redisClient: Redis | undefined;
  let kubeEnv: NodeJS.ProcessEnv = {};
  let chart: Record<RoleName, ChartRole>;
  const pods: Pod[] = [];
  const started: string[] = [];
  const prober = new Prober();

  function kubectl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((done) => {
      execFile(
        tools?.kubectl ?? 'kubectl-missing',
        args,
        { env: kubeEnv, timeout: 90_000 },
        (err, stdout, stderr) =>
          done({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
    });
  }

  /** Each trigger's and workflow's Ready condition, for failure messages. */
  async function readyConditions(): Promise<string> {
    const got = await kubectl(
      'get',
      'wht,workflows',
      '-o',
      'jsonpath={range .items[*]}{.kind}/{.metadata.name} gen={.metadata.generation} {.status.conditions[?(@.type=="Ready")]}{"\\n"}{end}',
    );
    return `\n${got.stdout}${got.stderr}`;
  }

  /** `helm template` of the chart: the three Deployments' pod specs. */
  async function renderChart(redisUrl: string): Promise<Record<RoleName, ChartRole>> {
    const { stdout } = await exec(
      tools?.helm ?? 'helm-missing',
      [
        'template',
        'hookgate',
        join(root, 'charts', 'hookgate'),
        '--namespace',
        NAMESPACE,
        '--set',
        'redis.enabled=false',
        '--set',
        `externalRedis.url=${redisUrl}`,
        // The worker's claim timeout (60 s by default) shortened so that a job of a
        // killed worker is taken over within the test.
        '--set',
        'worker.claimIdleMs=2000',
        '--set',
        'operator.replicas=2',
      ],
      { env: kubeEnv, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
    );
    const found: Partial<Record<RoleName, ChartRole>> = {};
    for (const doc of parseAllDocuments(stdout)) {
      const object = doc.toJS() as {
        kind?: string;
        spec?: {
          template: {
            spec: { containers: ChartContainer[]; terminationGracePeriodSeconds: number };
          };
        };
      } | null;
      if (object?.kind !== 'Deployment' || !object.spec) continue;
      const podSpec = object.spec.template.spec;
      const container = podSpec.containers[0];
      const role = container?.args[0] as RoleName | undefined;
      if (!container || !role) continue;
      found[role] = {
        container,
        terminationGracePeriodSeconds: podSpec.terminationGracePeriodSeconds,
      };
    }
    const { operator, gateway, worker } = found;
    if (!operator || !gateway || !worker) throw new Error('the chart renders no role Deployments');
    return { operator, gateway, worker };
  }

  /**
   * A pod of `role` as the kubelet would start it: the chart's env (fieldRefs resolved,
   * $(VAR) expanded), except that on the host network every named port gets a free
   * host port (the env variable holding the container port is rewritten) and HOST is
   * loopback instead of every interface.
   */
  async function podOf(role: RoleName, suffix: string): Promise<Pod> {
    const { container, terminationGracePeriodSeconds } = chart[role];
    const name = `hookgate-${role}-${suffix}-${run}`;
    const env: Record<string, string> = {};
    for (const e of container.env) {
      const field = e.valueFrom?.fieldRef?.fieldPath;
      const raw =
        field === 'metadata.name' ? name : field === 'metadata.namespace' ? NAMESPACE : e.value;
      if (raw === undefined) throw new Error(`${role}: env ${e.name} has no value the test knows`);
      env[e.name] = raw.replace(/\$\(([A-Z0-9_]+)\)/g, (whole, v: string) => env[v] ?? whole);
    }
    const ports: Record<string, number> = {};
    for (const p of container.ports) {
      const variable = Object.keys(env).find((k) => env[k] === String(p.containerPort));
      if (!variable) throw new Error(`${role}: no env variable sets port ${p.name}`);
      ports[p.name] = await freePort();
      env[variable] = String(ports[p.name]);
    }
    env.HOST = '127.0.0.1';
    if (role === 'gateway') {
      // The admin listener (read API): its port, unless the chart names one, would be
      // the default 8081 in both gateways on the host network. Its authentication is
      // by a static token: in a pod the default is a TokenReview with the service
      // account, which the in-memory API server does not answer.
      env.ADMIN_PORT ??= String(await freePort());
      if (env.ADMIN_HOST !== undefined) env.ADMIN_HOST = '127.0.0.1';
      env.HOOKGATE_ADMIN_AUTH = 'token';
      env.HOOKGATE_ADMIN_TOKEN_FILE = ADMIN_TOKEN_FILE;
    }
    const url = (probe: { path: string; port: string }) =>
      `http://127.0.0.1:${ports[probe.port]}${probe.path}`;
    const live = container.livenessProbe;
    return {
      name,
      role,
      ports,
      env,
      readiness: url(container.readinessProbe.httpGet),
      liveness: url(live.httpGet),
      livenessWindowMs: live.periodSeconds * live.failureThreshold * 1000,
      graceSeconds: terminationGracePeriodSeconds,
    };
  }

  async function startPod(pod: Pod): Promise<void> {
    const mounts =
      pod.role === 'operator'
        ? ['--volume', `${cluster.kubeconfig}:/etc/hookgate/kubeconfig:ro`]
        : pod.role === 'gateway'
          ? ['--volume', `${join(dir, 'admin-token')}:${ADMIN_TOKEN_FILE}:ro`]
          : [];
    const env = {
      ...pod.env,
      ...(pod.role === 'operator' ? { KUBECONFIG: '/etc/hookgate/kubeconfig' } : {}),
    };
    started.push(pod.name);
    await podman(
      'run',
      '--detach',
      '--name',
      pod.name,
      // A pod's host name is its name (the worker's consumer name derives from it).
      '--hostname',
      pod.name,
      ...PODMAN_RUN,
      ...RESTRICTED,
      ...mounts,
      ...Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
      image,
      ...chart[pod.role].container.args,
    );
  }

  /** Polls the readiness probe until it answers 200, as the kubelet would (faster). */
  async function ready(pod: Pod, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = await probe(pod.readiness);
      if (last.startsWith('200')) return;
      await sleep(250);
    }
    const logs = await containerLogs(pod.name, 40);
    throw new Error(`${pod.name} not ready after ${timeoutMs} ms (${last}); logs:\n${logs}`);
  }

  const pod = (role: RoleName, suffix: string): Pod => {
    const found = pods.find((p) => p.role === role && p.name.includes(`-${suffix}-`));
    if (!found) throw new Error(`no ${role} ${suffix}`);
    return found;
  };
  const gatewayUrl = (suffix: string) => `http://127.0.0.1:${pod('gateway', suffix).ports.http}`;
  /** GET from the read API on a gateway's admin listener. */
  const readApi = async <T>(suffix: string, path: string): Promise<T> => {
    const url = `http://127.0.0.1:${pod('gateway', suffix).env.ADMIN_PORT}${path}`;
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${adminToken}` },
      signal: AbortSignal.timeout(10_000),
    });
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  };
  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hookgate-system-'));
    writeFileSync(join(dir, 'admin-token'), adminToken, { mode: 0o644 });
    const [built, testCluster, redisServer] = await Promise.all([
      ensureImage(),
      startTestCluster(),
      startRedis(),
    ]);
    image = built;
    cluster = testCluster;
    redis = redisServer;
    kubeEnv = kubeToolEnv(join(dir, 'kube'), cluster.kubeconfig);
    chart = await renderChart(redis.url);
    for (const role of ['operator', 'gateway', 'worker'] as const)
      for (const suffix of ['a', 'b']) pods.push(await podOf(role, suffix));
    await Promise.all(pods.map((p) => startPod(p)));
    await Promise.all(pods.map((p) => ready(p)));
    for (const p of pods) prober.watch(p);
  }, 240_000);

  afterAll(async () => {
    prober.stop();
    redisClient?.disconnect();
    await removeContainers(...started);
    await redis?.stop();
    await cluster?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  beforeEach((context) => {
    context.onTestFailed(async () => {
      for (const p of pods) console.error(`--- ${p.name}\n${await containerLogs(p.name, 60)}`);
    });
  });

  it('kubectl applies the CRDs and examples/, and every trigger gets Ready', async () => {
    const crds = await kubectl('apply', '-f', join(root, 'crds'));
    expect(crds.code, crds.stderr).toBe(0);
    const own = join(dir, 'system.yaml');
    writeFileSync(own, OWN_MANIFESTS);
    for (const manifests of [join(root, 'examples'), own]) {
      const applied = await kubectl('apply', '-f', manifests);
      expect(applied.code, applied.stderr).toBe(0);
    }
    const waited = await kubectl('wait', '--for=condition=Ready', 'wht', '--all', '--timeout=60s');
    expect(waited.code, waited.stderr + (await readyConditions())).toBe(0);
    expect(waited.stdout).toContain('webhooktrigger.hookgate.dev/orders-ingest condition met');
    // Exactly one operator leads; the other stands by (ready as well).
    const statuses = await Promise.all(
      ['a', 'b'].map(async (s) => (await probe(pod('operator', s).readiness)).split(' ')[1]),
    );
    expect(statuses.sort()).toEqual(['leading', 'standby']);
  });

  it('both gateways answer the webhooks (hello 202, orders 200 with the output from a worker)', async () => {
    for (const g of ['a', 'b']) {
      await eventually(
        async () =>
          expect((await post(`${gatewayUrl(g)}${HELLO}`, { name: 'Ada' })).status).toBe(202),
        10_000,
        100,
      );
      const orders = await post(
        `${gatewayUrl(g)}${ORDERS}`,
        { orderId: `A-${g}`, total: 10, currency: 'eur' },
        { 'x-api-key': 'demo-key-acme-0001' },
      );
      expect(orders.status).toBe(200);
      expect(await orders.json()).toMatchObject({
        orderId: `A-${g}`,
        currency: 'EUR',
        decision: 'accepted',
        customer: 'acme',
      });
    }
  });

  it('every container runs as uid 65532 with a read-only root filesystem', async () => {
    for (const p of pods) {
      expect(await inspect(p.name, '{{.HostConfig.ReadonlyRootfs}}'), p.name).toBe('true');
      const status = await processStatus(p.name);
      expect(status, p.name).toMatch(/^Uid:\s+65532\s+65532\s+65532\s+65532$/m);
      expect(status, p.name).toMatch(/^Gid:\s+65532\s+65532\s+65532\s+65532$/m);
      // Node itself is PID 1 of the container (no init, no shell).
      expect(status, p.name).toMatch(/^NSpid:\s+\d+\s+1$/m);
    }
  });

  it('a gateway stopped (SIGTERM) under load finishes what it took, answers no 5xx, exits 0', async () => {
    const gateway = pod('gateway', 'a');
    const origin = gatewayUrl('a');
    await eventually(
      async () => expect((await post(`${origin}${BRIEF}`, { n: 0 })).status).toBe(200),
      10_000,
      100,
    );
    const pool = new Pool(origin, { connections: 8, keepAliveTimeout: 60_000 });
    const shots: Shot[] = [];
    const loadFor = 4_000;
    const loadStart = Date.now();
    const until = loadStart + loadFor;
    // Eight clients on kept-alive connections: six immediate-ACK requests (fast), two
    // wait-for-completion requests of a 300 ms workflow (in flight when the signal comes).
    const client = async (path: string) => {
      let n = 0;
      while (Date.now() < until) {
        const sentAt = Date.now();
        try {
          const res = await pool.request({
            path,
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ n: n++ }),
            headersTimeout: 20_000,
            bodyTimeout: 20_000,
          });
          const text = await res.body.text();
          shots.push({
            path,
            sentAt,
            endedAt: Date.now(),
            status: res.statusCode,
            ...(res.statusCode >= 500 ? { body: text.slice(0, 300) } : {}),
          });
        } catch (err) {
          const code = (err as { code?: string }).code ?? String(err);
          shots.push({ path, sentAt, endedAt: Date.now(), error: code });
          await sleep(100); // the listener is gone: no busy loop of refused connections
        }
      }
    };
    const clients = [
      ...Array.from({ length: 6 }, () => client(HELLO)),
      ...Array.from({ length: 2 }, () => client(BRIEF)),
    ];
    await sleep(1_500);
    prober.forget(gateway);
    const stopAt = Date.now();
    const stopping = podman('stop', '--time', String(gateway.graceSeconds), gateway.name);
    await Promise.all(clients);
    await stopping;
    const stopMs = Date.now() - stopAt;
    await pool.close();

    const exitCode = await inspect(gateway.name, '{{.State.ExitCode}}');
    const logs = await containerLogs(gateway.name);
    const closingAt = logTime(logs, 'shutting down');
    const before = shots.filter((s) => s.sentAt < stopAt);
    const after = shots.filter((s) => s.sentAt >= stopAt);
    const inFlight = shots.filter(
      (s) =>
        s.status !== undefined &&
        closingAt !== undefined &&
        s.sentAt < closingAt &&
        s.endedAt > closingAt,
    );
    const summary = {
      requests: shots.length,
      sentBeforeStop: before.length,
      sentAfterStop: after.length,
      inFlightAtSignal: inFlight.length,
      statuses: count(shots.map((s) => String(s.status ?? s.error))),
      afterStop: count(after.map((s) => String(s.status ?? s.error))),
      signalAfterStopMs: closingAt === undefined ? undefined : closingAt - stopAt,
      stopMs,
      exitCode,
    };
    console.info('gateway stop under load:', JSON.stringify(summary));
    const fivexx = shots.filter((s) => s.status !== undefined && s.status >= 500);

    expect(closingAt, 'the gateway logged its SIGTERM').toBeDefined();
    // Load on both sides of the signal, and requests in flight when it came.
    expect(before.length).toBeGreaterThan(20);
    expect(inFlight.length).toBeGreaterThan(0);
    // No answer is a 5xx, whenever the request was sent.
    expect(
      fivexx,
      JSON.stringify({
        ...summary,
        fivexx: fivexx.map((s) => ({
          ...s,
          sentAt: s.sentAt - stopAt,
          endedAt: s.endedAt - stopAt,
        })),
      }),
    ).toEqual([]);
    // Every request sent before the stop began was answered (none lost).
    expect(before.filter((s) => s.error !== undefined)).toEqual([]);
    // Requests sent after it may find the connection or the listener closed, nothing else.
    expect(after.filter((s) => s.error !== undefined && !CONNECTION_ERRORS.has(s.error))).toEqual(
      [],
    );
    expect(logs).not.toMatch(/EROFS|read-only file system/i);
    expect({ exitCode, withinGrace: stopMs < gateway.graceSeconds * 1000 }).toEqual({
      exitCode: '0',
      withinGrace: true,
    });
  });

  it('the leader operator killed (SIGKILL): the other takes over and a new trigger gets Ready', async () => {
    const operators = [pod('operator', 'a'), pod('operator', 'b')];
    const statuses = await Promise.all(operators.map(async (o) => probe(o.readiness)));
    const leader = operators[statuses.findIndex((s) => s === '200 leading')];
    const standby = operators.find((o) => o !== leader);
    if (!leader || !standby) throw new Error(`no single leader: ${statuses.join(', ')}`);
    prober.forget(leader);
    await podman('kill', leader.name);
    const killedAt = Date.now();
    // The Lease is not released: the standby waits for it to expire (15 s by default).
    await eventually(
      async () => expect(await probe(standby.readiness)).toBe('200 leading'),
      45_000,
      250,
    );
    console.info(`operator takeover after ${Date.now() - killedAt} ms`);
    const late = join(dir, 'late.yaml');
    writeFileSync(late, LATE_MANIFEST);
    const applied = await kubectl('apply', '-f', late);
    expect(applied.code, applied.stderr).toBe(0);
    const waited = await kubectl('wait', '--for=condition=Ready', 'wht/late', '--timeout=60s');
    expect(waited.code, waited.stderr).toBe(0);
    await eventually(
      async () => expect((await post(`${gatewayUrl('b')}${LATE}`, {})).status).toBe(202),
      10_000,
      100,
    );
  });

  it('a worker killed mid-execution: the other runs it again and it completes once', async () => {
    const base = gatewayUrl('b');
    const res = await post(`${base}${PAUSE}`, { n: 7 });
    expect(res.status).toBe(202);
    const { executionId } = (await res.json()) as { executionId: string };
    const record = () =>
      readApi<{ status: string; output?: unknown; finishedAt?: string }>(
        'b',
        `/api/executions/${executionId}`,
      );
    await eventually(async () => expect((await record()).status).toBe('running'), 15_000, 50);
    // Into the delay node (its start event stored), well before its 3 s are up.
    await sleep(500);
    // Which worker holds the job: its consumer name is "<host name>-<pid>-<random>", pid 1.
    redisClient = new Redis(redis.url);
    const consumer = await holderOf(redisClient, executionId);
    const doomed = pods.find(
      (p) => p.role === 'worker' && consumer?.startsWith(`${p.name}-1-`) === true,
    );
    if (!doomed) throw new Error(`no worker container holds ${executionId} (consumer ${consumer})`);
    prober.forget(doomed);
    await podman('kill', doomed.name);
    await eventually(
      async () =>
        expect(await record()).toMatchObject({ status: 'succeeded', output: { done: 7 } }),
      30_000,
      100,
    );
    // Once: one record for the trigger, acknowledged, not finished again later.
    const first = await record();
    const list = await readApi<{ items: { id: string }[] }>(
      'b',
      `/api/executions?trigger=${NAMESPACE}/pause`,
    );
    expect(list.items.map((e) => e.id)).toEqual([executionId]);
    await eventually(
      async () => expect(await holderOf(redisClient!, executionId)).toBeUndefined(),
      5_000,
      100,
    );
    // The events show the run that was cut off, the second run, and one completion.
    const events = await eventTypes(
      `http://127.0.0.1:${pod('gateway', 'b').env.ADMIN_PORT}/api/executions/${executionId}/events`,
      adminToken,
    );
    expect(events.filter((e) => e === 'node.started:pause')).toHaveLength(2);
    expect(events.filter((e) => e === 'completed')).toHaveLength(1);
    expect(events).not.toContain('failed');
    await sleep(2_500);
    expect((await record()).finishedAt).toBe(first.finishedAt);
  });

  // A gateway or a worker started while Redis is down listens at once, is live and
  // reports not-ready, and turns ready when Redis answers (no restart).
  it('Redis unreachable at start-up: gateway and worker are live but not ready, then ready once it is up', async () => {
    const port = await freePort();
    const late = [await podOf('gateway', 'c'), await podOf('worker', 'c')];
    for (const p of late) {
      p.env.REDIS_URL = `redis://127.0.0.1:${port}`;
      pods.push(p);
      await startPod(p);
    }
    // As the kubelet sees them: a listener that is live, and not ready.
    for (const p of late)
      await eventually(
        async () => {
          expect(await probe(p.liveness), p.name).toMatch(/^200/);
          expect(await probe(p.readiness), p.name).toMatch(/^503/);
        },
        20_000,
        250,
      );
    const lateRedis = await startRedis({ port });
    try {
      for (const p of late) await ready(p, 30_000);
    } finally {
      await removeContainers(...late.map((p) => p.name));
      await lateRedis.stop();
    }
  });

  it('no container still running failed its liveness probe long enough to be restarted', async () => {
    for (const p of pods.filter((x) => prober.watching(x))) {
      expect(await probe(p.liveness), p.name).toMatch(/^200/);
      expect(prober.longestFailureMs(p), p.name).toBeLessThan(p.livenessWindowMs);
    }
  });
});

/** `<status> <body.status>` of a probe, or the error; 1 s timeout like the kubelet's. */
async function probe(url: string): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    const text = await res.text();
    let status = '';
    try {
      const body = JSON.parse(text) as { status?: unknown };
      if (typeof body.status === 'string') status = body.status;
    } catch {
      // not JSON
    }
    return `${res.status} ${status}`.trim();
  } catch (err) {
    return String((err as { cause?: { code?: string } }).cause?.code ?? err);
  }
}

/**
 * The kubelet's liveness probing, in the background: every second each watched pod's
 * liveness URL; the longest run of failures is kept per pod.
 */
class Prober {
  readonly #pods = new Map<string, { pod: Pod; failingSince?: number; longest: number }>();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  watch(pod: Pod): void {
    this.#pods.set(pod.name, { pod, longest: 0 });
    this.#timer ??= setInterval(() => void this.#tick(), 1_000);
  }

  /** Stop probing a pod that is about to be stopped or killed. */
  forget(pod: Pod): void {
    this.#pods.delete(pod.name);
  }

  watching(pod: Pod): boolean {
    return this.#pods.has(pod.name);
  }

  longestFailureMs(pod: Pod): number {
    const state = this.#pods.get(pod.name);
    if (!state) return 0;
    return Math.max(state.longest, state.failingSince ? Date.now() - state.failingSince : 0);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      await Promise.all(
        [...this.#pods.values()].map(async (state) => {
          const ok = (await probe(state.pod.liveness)).startsWith('200');
          const now = Date.now();
          if (ok && state.failingSince !== undefined) {
            state.longest = Math.max(state.longest, now - state.failingSince);
            delete state.failingSince;
          } else if (!ok) state.failingSince ??= now;
        }),
      );
    } finally {
      this.#busy = false;
    }
  }
}

/** The consumer in the workers' group that holds the job of an execution, if any. */
async function holderOf(redis: Redis, executionId: string): Promise<string | undefined> {
  const pending = (await redis.xpending(QUEUE.stream, QUEUE.group, '-', '+', 1000)) as [
    string,
    string,
    number,
    number,
  ][];
  for (const [entryId, consumer] of pending) {
    const entries = (await redis.xrange(QUEUE.stream, entryId, entryId)) as [string, string[]][];
    const fields = entries[0]?.[1] ?? [];
    const job = fields[fields.indexOf('job') + 1];
    if (job && (JSON.parse(job) as { id: string }).id === executionId) return consumer;
  }
  return undefined;
}

/** The event types of an execution's event stream (SSE), `node.started:<node>` for nodes. */
async function eventTypes(url: string, token: string): Promise<string[]> {
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  const types: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const event = JSON.parse(line.slice(5)) as { type: string; nodeId?: string };
    types.push(event.type === 'node.started' ? `${event.type}:${event.nodeId}` : event.type);
  }
  return types;
}

/** The time (ms) of the first JSON log line with this message. */
function logTime(logs: string, message: string): number | undefined {
  for (const line of logs.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { msg?: string; time?: number };
      if (entry.msg === message) return entry.time;
    } catch {
      // not a log line
    }
  }
  return undefined;
}

function count(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}
