// `node bench/operator-scale.ts [--redis] [--runs n] [N ...]`: apply N WebhookTriggers
// (default 2000; BENCH_N="2000 10000" works too) and their Workflow at once to the
// in-memory Kubernetes API server, and time until the real `hookgate operator` process
// has reconciled every one. The operator is a child process, as in a pod (leader
// election on); the API server runs in this process and its memory is not counted.
//
//   --redis     as deployed: routes and registrations in a real redis-server this
//               script starts (REDIS_URL; or the one REDIS_URL names), and one
//               `hookgate gateway` process serving them. Done when every trigger is
//               Ready=True (Ready means a gateway serves it).
//               Without it the operator keeps routes in its own memory, no gateway can
//               serve them, and the trigger's status says so (Ready=False/NoGateway):
//               done when every trigger's Ready is no longer Unknown for its
//               generation, i.e. it has been reconciled.
//   --runs n    repeat each N n times (fresh API server, Redis and processes each
//               time) and print the medians as well.
//   --snapshot  once done, send the operator SIGUSR2 and wait for its heap snapshot
//               (with BENCH_OPERATOR_NODE_ARGS=--heapsnapshot-signal=SIGUSR2).
//
// Reported per run: the time from the first write until done (counted from the status
// writes the API server accepted, then confirmed with one list), the operator's memory sampled every 100 ms from
// /proc/<pid>/status (VmRSS; VmHWM, the kernel's own peak, at the end), the API
// requests per trigger, and the operator's reconcile counters. BENCH_OPERATOR_LOG=1
// shows the operator's log, BENCH_PROGRESS=1 the count every 5 s,
// BENCH_OPERATOR_NODE_ARGS passes Node flags to the operator (e.g. the heap limits the
// chart sets: --max-old-space-size=160 --max-semi-space-size=2).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startKubeApiServer, type KubeApiServer } from '../testing/kube-apiserver/index.ts';
import { startRedis, type RedisServer } from '../test/support/redis.ts';
import { freePort } from './support.ts';

const root = join(import.meta.dirname, '..');
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    redis: { type: 'boolean', default: false },
    runs: { type: 'string', default: '1' },
    snapshot: { type: 'boolean', default: false },
  },
});
const counts = (positionals.length ? positionals : (process.env.BENCH_N ?? '2000').split(/\s+/))
  .filter(Boolean)
  .map(Number);
const runs = Number(values.runs);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Result {
  count: number;
  appliedS: number;
  doneS: number;
  idleMiB: number;
  afterMiB: number;
  peakMiB: number;
  load: string;
  /** API requests the operator made, by verb, kind of path and status code, per trigger. */
  requests: string;
  /** From the operator's /metrics: reconciles, errors, rate-limited requeues. */
  reconciles: string;
  /** CPU seconds from the first write until done: operator, API server (this process), gateway. */
  cpu: string;
}

/** `PUT status 409: 0.9` per trigger: what the operator asked of the API server. */
function requestSummary(server: KubeApiServer, count: number, since: number): string {
  const tally = new Map<string, number>();
  for (const r of server.requests.slice(since)) {
    if (r.query.watch === '1' || r.query.watch === 'true') continue;
    const what = r.path.endsWith('/status')
      ? 'status'
      : r.path.includes('/events')
        ? 'events'
        : r.path.includes('/leases')
          ? 'lease'
          : 'object';
    if (what === 'lease') continue;
    const key = `${r.method} ${what} ${r.status}`;
    tally.set(key, (tally.get(key) ?? 0) + 1);
  }
  return [...tally]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k}: ${(n / count).toFixed(2)}`)
    .join(', ');
}

const ticksPerSecond =
  Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

function memory(pid: number): { rssMiB: number; hwmMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMiB: kb('VmRSS') / 1024, hwmMiB: kb('VmHWM') / 1024 };
}

interface TriggerObject {
  metadata: { name: string; generation?: number };
  status?: {
    observedGeneration?: number;
    conditions?: { type: string; status: string; observedGeneration?: number }[];
  };
}

/**
 * Whether a trigger is done: Ready=True with a gateway; without one, reconciled (its
 * Ready condition is no longer Unknown for its current generation).
 */
function isDone(t: TriggerObject): boolean {
  const ready = t.status?.conditions?.find((c) => c.type === 'Ready');
  if (!ready) return false;
  if (values.redis) return ready.status === 'True';
  const generation = t.metadata.generation ?? 1;
  return ready.status !== 'Unknown' && (ready.observedGeneration ?? 0) >= generation;
}

/**
 * Counts the triggers that are done from the status writes the API server answered
 * 200 (its request log keeps each body), so counting adds no watch of its own: a
 * watch would make the in-process API server serialise and send every event twice.
 */
function statusWrites(server: KubeApiServer) {
  const done = new Set<string>();
  let cursor = server.requests.length;
  let writes = 0;
  const path = /\/webhooktriggers\/([^/]+)\/status$/;
  return {
    done,
    writes: () => writes,
    /** Read the requests logged since the last call (stops at one still in progress). */
    poll(): void {
      const log = server.requests;
      for (; cursor < log.length; cursor++) {
        const r = log[cursor] as (typeof log)[number];
        const name = r.method === 'PUT' ? path.exec(r.path)?.[1] : undefined;
        if (name === undefined) continue;
        if (r.status === 0) return;
        if (r.status !== 200 || !r.body) continue;
        writes++;
        const written = JSON.parse(r.body) as TriggerObject;
        if (isDone(written)) done.add(name);
        else done.delete(name);
      }
    },
  };
}

/** Resolves once `url` answers 200 with a body `accept` takes; rejects if `child` exits. */
async function waitFor(
  url: string,
  child: ChildProcess,
  accept: (body: { status?: string }) => boolean = () => true,
): Promise<void> {
  for (;;) {
    const res = await fetch(url)
      .then(async (r) => (r.ok ? ((await r.json()) as { status?: string }) : undefined))
      .catch(() => undefined);
    if (res && accept(res)) return;
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${url}: process exited (${child.exitCode ?? child.signalCode})`);
    await sleep(50);
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** The processes of one run: the operator (and, with --redis, Redis and one gateway). */
interface Processes {
  operator: ChildProcess;
  operatorPort: number;
  gateway: ChildProcess | undefined;
  redis: RedisServer | undefined;
}

async function startProcesses(kubeconfig: string): Promise<Processes> {
  let redis: RedisServer | undefined;
  let redisUrl = process.env.REDIS_URL;
  if (values.redis && !redisUrl) {
    redis = await startRedis();
    redisUrl = redis.url;
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBECONFIG: kubeconfig,
    POD_NAMESPACE: 'default',
  };
  if (values.redis && redisUrl) env.REDIS_URL = redisUrl;
  else delete env.REDIS_URL;
  const cli = join(root, 'roles/cli.ts');
  const operatorPort = await freePort();
  const nodeArgs = (process.env.BENCH_OPERATOR_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const operator = spawn(
    process.execPath,
    [...nodeArgs, cli, 'operator', '--port', String(operatorPort)],
    {
      env,
      stdio: ['ignore', process.env.BENCH_OPERATOR_LOG ? 'inherit' : 'ignore', 'inherit'],
    },
  );
  // As deployed: one gateway serving what the operator writes to Redis, reporting
  // what it serves (the operator's Deployed condition reads the reports).
  let gateway: ChildProcess | undefined;
  const gatewayPort = await freePort();
  if (values.redis) {
    const adminPort = await freePort();
    gateway = spawn(
      process.execPath,
      [cli, 'gateway', '--port', String(gatewayPort), '--admin-port', String(adminPort)],
      {
        env: { ...env, HOOKGATE_ADMIN_AUTH: 'none', LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
  }
  const processes = { operator, operatorPort, gateway, redis };
  try {
    if (gateway) await waitFor(`http://127.0.0.1:${gatewayPort}/readyz`, gateway);
    await waitFor(
      `http://127.0.0.1:${operatorPort}/readyz`,
      operator,
      (b) => b.status === 'leading',
    );
  } catch (err) {
    // Leave nothing running behind a failed start.
    await stopProcesses(processes);
    throw err;
  }
  return processes;
}

async function stopProcesses(p: Processes): Promise<void> {
  p.operator.kill('SIGTERM');
  p.gateway?.kill('SIGTERM');
  await Promise.all([exited(p.operator), p.gateway ? exited(p.gateway) : undefined]);
  await p.redis?.stop();
}

/** Create the Workflow, then the N triggers, 100 POSTs at a time. */
async function applyTriggers(base: string, count: number): Promise<void> {
  const post = async (plural: string, body: object) => {
    const r = await fetch(`${base}/${plural}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    await r.body?.cancel();
    if (r.status !== 201) throw new Error(`create ${plural}: ${r.status}`);
  };
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
        }),
      ),
    );
  }
}

/** Wait until every trigger is done; fail if the operator dies. */
async function untilDone(
  counter: ReturnType<typeof statusWrites>,
  count: number,
  operator: ChildProcess,
  started: number,
): Promise<void> {
  const pid = operator.pid as number;
  let reported = Date.now();
  while (counter.done.size < count) {
    await sleep(50);
    counter.poll();
    if (process.env.BENCH_PROGRESS && Date.now() - reported >= 5000) {
      reported = Date.now();
      console.error(
        `  ${((reported - started) / 1000).toFixed(0)} s: ${counter.done.size}/${count} done, ` +
          `${counter.writes()} status writes, operator RSS ${memory(pid).rssMiB.toFixed(0)} MiB`,
      );
    }
    if (operator.exitCode !== null || operator.signalCode !== null)
      throw new Error(`operator exited (${operator.exitCode ?? operator.signalCode})`);
    if (Date.now() - started > 600_000)
      throw new Error(`only ${counter.done.size}/${count} done after 10 minutes`);
  }
}

/** Reconciles, errors and rate-limited requeues, from the operator's /metrics. */
async function reconcileCounts(port: number): Promise<string> {
  const metrics = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
  const sum = (name: string) =>
    [...metrics.matchAll(new RegExp(`^hookgate_operator_${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);
  return `${sum('reconcile_total')} reconciles, ${sum('reconcile_errors_total')} errors, ${sum('workqueue_retries_total')} rate-limited requeues`;
}

function cpuNow(p: Processes): { operator: number; server: number; gateway: number } {
  const own = process.cpuUsage();
  return {
    operator: cpuSeconds(p.operator.pid as number),
    server: (own.user + own.system) / 1e6,
    gateway: p.gateway ? cpuSeconds(p.gateway.pid as number) : 0,
  };
}

async function runOnce(count: number): Promise<Result> {
  const server = await startKubeApiServer({ historyWindow: count * 20 });
  server.applyCrdsFrom(join(root, 'crds'));
  const dir = mkdtempSync(join(tmpdir(), 'hookgate-scale-'));
  const processes = await startProcesses(server.writeKubeconfig(dir));
  const { operator } = processes;
  const pid = operator.pid as number;
  let peakMiB = 0;
  const sampler = setInterval(() => {
    try {
      peakMiB = Math.max(peakMiB, memory(pid).rssMiB);
    } catch {
      // exited
    }
  }, 100);
  try {
    await sleep(500);
    const idle = memory(pid);
    const base = `${server.url}/apis/hookgate.dev/v1alpha1/namespaces/default`;
    const counter = statusWrites(server);
    const cpuBefore = cpuNow(processes);
    const started = Date.now();
    const firstRequest = server.requests.length;
    await applyTriggers(base, count);
    const applied = Date.now();
    await untilDone(counter, count, operator, started);
    const done = Date.now();
    const cpuAfter = cpuNow(processes);
    // Confirm with the API server's own list.
    const list = (await (await fetch(`${base}/webhooktriggers`)).json()) as {
      items: TriggerObject[];
    };
    const listed = list.items.filter(isDone).length;
    if (listed !== count)
      throw new Error(`the status writes said ${count} done, the list ${listed}`);
    await sleep(1000);
    const after = memory(pid);
    clearInterval(sampler);
    const result: Result = {
      count,
      appliedS: (applied - started) / 1000,
      doneS: (done - started) / 1000,
      idleMiB: idle.rssMiB,
      afterMiB: after.rssMiB,
      peakMiB: Math.max(peakMiB, after.hwmMiB),
      load: loadavg()
        .map((l) => l.toFixed(2))
        .join(' '),
      requests: requestSummary(server, count, firstRequest),
      reconciles: await reconcileCounts(processes.operatorPort),
      cpu: `operator ${(cpuAfter.operator - cpuBefore.operator).toFixed(1)} s, API server ${(cpuAfter.server - cpuBefore.server).toFixed(1)} s, gateway ${(cpuAfter.gateway - cpuBefore.gateway).toFixed(1)} s`,
    };
    if (values.snapshot) {
      // Needs BENCH_OPERATOR_NODE_ARGS=--heapsnapshot-signal=SIGUSR2; written to the cwd.
      operator.kill('SIGUSR2');
      await sleep(Number(process.env.BENCH_SNAPSHOT_WAIT_MS ?? 20_000));
    }
    return result;
  } finally {
    clearInterval(sampler);
    await stopProcesses(processes);
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const store = values.redis ? 'Redis + 1 gateway' : 'memory, no gateway';
const goal = values.redis ? 'all Ready' : 'all reconciled';
console.log(
  `operator scale: stores in ${store}, Node ${process.version}, ${new Date().toISOString()}, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
for (const count of counts) {
  const results: Result[] = [];
  for (let i = 0; i < runs; i++) {
    const r = await runOnce(count);
    results.push(r);
    console.log(
      `${count} triggers (${store}): applied ${r.appliedS.toFixed(1)} s, ${goal} ${r.doneS.toFixed(1)} s; ` +
        `operator RSS idle ${r.idleMiB.toFixed(0)} MiB, after ${r.afterMiB.toFixed(0)} MiB, peak ${r.peakMiB.toFixed(0)} MiB; load ${r.load}`,
    );
    console.log(`  requests per trigger (bench's own POSTs and lists included): ${r.requests}`);
    console.log(`  operator: ${r.reconciles}; CPU: ${r.cpu}`);
  }
  if (runs > 1) {
    console.log(
      `${count} triggers (${store}) median of ${runs}: ${goal} ${median(results.map((r) => r.doneS)).toFixed(1)} s, ` +
        `peak RSS ${median(results.map((r) => r.peakMiB)).toFixed(0)} MiB`,
    );
  }
}
