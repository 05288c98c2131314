// `node bench/redis-scripts.ts`: redis-server's cost of one execution's scripts, phase by
// phase, without a worker process in the way (issue 14's redis-server target).
//
//   BENCH_ROUNDS=3 BENCH_SCRIPTS_N=20000 node bench/redis-scripts.ts   (Node 24 first on PATH)
//
// Each round, on a fresh redis-server pinned to core 0 (this process on core 1 when
// taskset works): N executions of the bench workflow are enqueued as a gateway does
// (QueuedEngine.start, 500 at once), taken as a worker does (RedisExecutionStore.take,
// batches of 32), then finished as a worker does (saveWithEvents with the succeeded
// record, three events and the acknowledgement, 32 at once). For each phase: the time
// inside the scripts (`INFO commandstats`, evalsha) and redis-server's CPU time
// (/proc), per execution. Medians of the rounds. Compare two trees by running it in
// each, alternating (`git worktree add /tmp/base <rev>`): the figures are absolute.
//
// Then (phase `discard`, ADR 0041) N more executions are enqueued and taken the same way,
// not measured, and finished as a worker finishes those of a workflow that discards the
// records of its succeeded executions (RedisExecutionStore.discard with the same three
// events and the acknowledgement, nobody watching, 32 at once): the finishing write with
// Discard against `finish`, the one with Keep. `all` sums enqueue, take and finish;
// `all (Discard)` enqueue, take and discard.
//
// BENCH_SCRIPTS_BODY_BYTES=8000 pads each request body by that many bytes.
//
// With BENCH_SCRIPTS_INSTRUCTIONS=1 redis-server runs under valgrind's callgrind
// (Debian `valgrind`) and each phase also reports the instructions it executed per
// execution: some 50 times slower (use N = 2000), but the same to a percent or two from
// run to run, where time swings ±15 % on a shared machine. The way to tell a change
// of a few µs from noise.
import { callgrindCommand, instructionsSinceLast, requireValgrind } from './callgrind.ts';
import { cpuNs } from './cpu.ts';
import { deploy, triggerOutput } from './queued-executions.ts';
import { freePort, output } from './support.ts';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RedisExecutionEvents } from '../runtime/engine/execution-events-redis.ts';
import { RedisExecutionStore, type TakenJob } from '../runtime/engine/execution-store-redis.ts';
import { WORKER_GROUP } from '../runtime/engine/execution-keys.ts';
import type { Execution, SequencedEvent } from '../runtime/engine/ports.ts';
import { QueuedEngine } from '../runtime/engine/queued-engine.ts';
import { finishRun, startedRun } from '../runtime/engine/run-log.ts';

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const n = Number(process.env.BENCH_SCRIPTS_N ?? 20_000);
/** Bytes added to each request body (a `note`), for payloads larger than the bench's 37. */
const padBytes = Number(process.env.BENCH_SCRIPTS_BODY_BYTES ?? 0);
const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
const counting = process.env.BENCH_SCRIPTS_INSTRUCTIONS === '1';
if (counting) requireValgrind('BENCH_SCRIPTS_INSTRUCTIONS=1');
const PHASES = ['enqueue', 'take', 'finish', 'discard'] as const;
type Phase = (typeof PHASES)[number];
/**
 * Per execution: µs inside the scripts, µs of redis-server's CPU, µs of this process's
 * CPU (the client's side: what a gateway or worker spends on it), thousands of
 * instructions (0 when not counted).
 */
type Cost = Record<Phase, { scripts: number; cpu: number; client: number; kInstructions: number }>;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/**
 * What a worker writes when the bench workflow's run succeeded: its log line made as
 * the engine makes it (run-log.ts: the node got the execution's input).
 */
function finished(e: Execution): [Execution, SequencedEvent[]] {
  const at = new Date().toISOString();
  const output = { ok: true, order: e.input.body };
  const run = startedRun({ id: 'map', type: 'transform' }, at, e.input, undefined, 1024);
  finishRun(run, 1, at, 'succeeded', JSON.stringify(output), undefined);
  const done: Execution = { ...e, status: 'succeeded', output, log: [run] };
  const id = e.id;
  return [
    done,
    [
      { type: 'node.started', nodeId: 'map', executionId: id, seq: 2, at },
      { type: 'node.finished', nodeId: 'map', status: 'succeeded', executionId: id, seq: 3, at },
      { type: 'completed', output, executionId: id, seq: 4, at },
    ] as SequencedEvent[],
  ];
}

async function round(): Promise<Cost> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const dumps = counting ? mkdtempSync(join(tmpdir(), 'hookgate-callgrind-')) : '';
  const command = counting ? callgrindCommand(dumps) : ['redis-server'];
  // valgrind runs redis-server in its own process: the pid is redis-server's.
  const server = spawn(
    hasTaskset ? 'taskset' : (command[0] as string),
    [...(hasTaskset ? ['-c', '0', ...command] : command.slice(1)), ...args],
    { stdio: ['ignore', 'pipe', counting ? 'ignore' : 'inherit'] },
  );
  const url = `redis://127.0.0.1:${port}`;
  const redis = new Redis(url, { lazyConnect: true });
  const subscriber = new Redis(url, { lazyConnect: true });
  try {
    await output(server, /Ready to accept connections/);
    await Promise.all([redis.connect(), subscriber.connect()]);
    const pid = server.pid as number;
    const request = await deploy(redis);
    const store = new RedisExecutionStore({ redis });
    const events = new RedisExecutionEvents({ subscriber, store });
    const queue = new QueuedEngine({ redis, store, events, maxQueued: Number.MAX_SAFE_INTEGER });
    const shard = store.layout.shards[0];
    if (!shard) throw new Error('no shard');
    await redis.xgroup('CREATE', shard.stream, WORKER_GROUP, '0', 'MKSTREAM');
    const cost = {} as Cost;
    const measure = async (phase: Phase, work: () => Promise<void>) => {
      await redis.config('RESETSTAT');
      if (counting) instructionsSinceLast(pid, dumps);
      const before = cpuNs(pid);
      const clientBefore = process.cpuUsage();
      await work();
      const cpu = (cpuNs(pid) - before) / 1e3 / n;
      const used = process.cpuUsage(clientBefore);
      const client = (used.user + used.system) / n;
      const instructions = counting ? instructionsSinceLast(pid, dumps) : 0;
      const info = await redis.info('commandstats');
      const usec = Number(/^cmdstat_evalsha:calls=\d+,usec=(\d+)/m.exec(info)?.[1] ?? 0);
      cost[phase] = { scripts: usec / n, cpu, client, kInstructions: instructions / 1e3 / n };
    };
    /** Enqueues N executions (numbered from `from`), as gateways do. */
    const enqueue = async (from: number) => {
      for (let at = 0; at < n; at += 500)
        await Promise.all(
          Array.from({ length: Math.min(500, n - at) }, (_v, k) =>
            queue.start({
              ...request,
              input: triggerOutput(request.trigger, from + at + k, padBytes),
            }),
          ),
        );
    };
    /** Takes every job waiting, as a worker does. */
    const takeAll = async (): Promise<TakenJob[]> => {
      const taken: TakenJob[] = [];
      for (let batch = await store.take(shard, 'bench', 32); batch.length > 0;) {
        taken.push(...batch);
        batch = await store.take(shard, 'bench', 32);
      }
      if (taken.length !== n) throw new Error(`took ${taken.length} of ${n} jobs`);
      return taken;
    };
    /** Finishes the jobs 32 at once with `write` (the succeeded record and three events). */
    const finishAll = async (
      taken: TakenJob[],
      write: (done: Execution, evs: SequencedEvent[], entryId: string) => Promise<void>,
    ) => {
      for (let at = 0; at < n; at += 32)
        await Promise.all(
          taken.slice(at, at + 32).map((job) => {
            if (!job.execution) throw new Error(`job ${job.entryId} without its record`);
            const [done, evs] = finished(job.execution);
            return write(done, evs, job.entryId);
          }),
        );
      if ((await redis.xlen(shard.stream)) !== 0) throw new Error('jobs left unacknowledged');
    };
    await measure('enqueue', () => enqueue(0));
    let taken: TakenJob[] = [];
    await measure('take', async () => {
      taken = await takeAll();
    });
    await measure('finish', () =>
      finishAll(taken, (done, evs, entryId) => store.saveWithEvents(done, evs, entryId)),
    );
    // The same again, finished by discarding (ADR 0041): only the finish is measured.
    await enqueue(n);
    taken = await takeAll();
    await measure('discard', () =>
      finishAll(taken, (done, evs, entryId) => store.discard(done, evs, { acknowledge: entryId })),
    );
    if ((await redis.zcard(shard.index)) !== n)
      throw new Error('discarded executions still listed');
    queue.close();
    return cost;
  } finally {
    redis.disconnect();
    subscriber.disconnect();
    server.kill('SIGKILL');
    if (dumps) rmSync(dumps, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const costs: Cost[] = [];
  const kI = (x: number) => (counting ? ` / ${x.toFixed(1)}k instructions` : '');
  for (let r = 1; r <= rounds; r++) {
    const cost = await round();
    costs.push(cost);
    const line = PHASES.map(
      (p) =>
        `${p} ${cost[p].scripts.toFixed(1)} in scripts / ${cost[p].cpu.toFixed(1)} CPU / ${cost[p].client.toFixed(1)} client${kI(cost[p].kInstructions)}`,
    );
    console.log(`round ${r}/${rounds}: ${line.join(', ')} (µs per execution)`);
  }
  console.log(`\n${rounds} rounds, ${n} executions each; per execution, medians\n`);
  const extra = counting ? ' thousand instructions |' : '';
  console.log(
    `| phase | µs inside the scripts | µs redis-server CPU | µs client CPU |${extra}\n|---|---:|---:|---:|${counting ? '---:|' : ''}`,
  );
  type Measure = 'scripts' | 'cpu' | 'client' | 'kInstructions';
  const measures: Measure[] = [
    'scripts',
    'cpu',
    'client',
    ...(counting ? ['kInstructions' as const] : []),
  ];
  const row = (name: string, of: (c: Cost, m: Measure) => number) =>
    console.log(
      `| ${name} | ${measures.map((m) => median(costs.map((c) => of(c, m))).toFixed(1)).join(' | ')} |`,
    );
  for (const p of PHASES) row(p, (c, m) => c[p][m]);
  row('all', (c, m) => c.enqueue[m] + c.take[m] + c.finish[m]);
  row('all (Discard)', (c, m) => c.enqueue[m] + c.take[m] + c.discard[m]);
  process.exit(0);
}

await main();
