// `node bench/worker.ts`: how fast one `hookgate worker` process drains the execution
// queue, against the bare engine doing the same runs in memory, in the same run.
//
//   BENCH_ROUNDS=5 BENCH_WORKER_N=20000 node bench/worker.ts   (Node 24 first on PATH)
//
// The bench manifests are reconciled once into a redis-server this script starts on
// core 0. Each round: the queue is filled with N executions of the bench workflow
// (enqueued with the gateway's QueuedEngine), then the real CLI (`roles/cli.ts
// worker`, default settings) starts on core 1 and drains it while this process only
// polls the queue length. The rate is taken between 10 % and 90 % drained (start-up
// and JIT warm-up left out), with the worker's CPU time over the same span, and
// redis-server's (schedstat), as well as redis-server's while the queue was filled
// (the gateway's enqueue script). Then the baseline, also on core 1: the same N executions, their queued records given to a
// bare InProcessEngine (memory store, 32 at once, like the worker) with `resume`,
// after a warm-up.
import { cpuNs } from './cpu.ts';
import { deploy, triggerOutput } from './queued-executions.ts';
import { freePort, output } from './support.ts';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { InProcessEngine } from '../runtime/engine/engine.ts';
import { RedisExecutionEvents } from '../runtime/engine/execution-events-redis.ts';
import { EXECUTION_FIELDS as F } from '../runtime/engine/execution-keys.ts';
import { EXECUTION_KEYS, RedisExecutionStore } from '../runtime/engine/execution-store-redis.ts';
import type { Execution, StartRequest } from '../runtime/engine/ports.ts';
import { QUEUE, QueuedEngine } from '../runtime/engine/queued-engine.ts';

const here = import.meta.dirname;
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const n = Number(process.env.BENCH_WORKER_N ?? 20_000);
const concurrency = Number(process.env.HOOKGATE_WORKER_CONCURRENCY ?? 32);
const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

interface Sample {
  /** Executions per second. */
  rate: number;
  /** CPU time of the process per execution, µs. */
  cpuUs: number;
  /** Worker only: redis-server's CPU time per execution while it drained, µs. */
  redisUs?: number;
  /** Worker only: Redis commands per execution (a transaction counts once; others: queue reads). */
  redis?: {
    scripts: number;
    transactions: number;
    others: number;
    /** redis-server's time inside the worker's scripts per execution (commandstats), µs. */
    scriptUs: number;
  };
}

function pinned(core: number, cmd: string, args: string[]): [string, string[]] {
  return hasTaskset ? ['taskset', ['-c', String(core), cmd, ...args]] : [cmd, args];
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function fill(queue: QueuedEngine, request: Omit<StartRequest, 'input'>): Promise<string[]> {
  const ids: string[] = [];
  for (let at = 0; at < n; at += 500) {
    const batch = Array.from({ length: Math.min(500, n - at) }, (_, k) =>
      queue.start({ ...request, input: triggerOutput(request.trigger, at + k) }),
    );
    for (const execution of await Promise.all(batch)) ids.push(execution.id);
  }
  return ids;
}

/**
 * Calls and time (µs) per command since the last CONFIG RESETSTAT (Lua's own calls
 * included; a script's time includes theirs).
 */
function commandCalls(info: string): Map<string, { calls: number; usec: number }> {
  const calls = new Map<string, { calls: number; usec: number }>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    calls.set(m[1] as string, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return calls;
}

/** Commands the worker sent per execution: scripts, transactions, the others. */
function perExecution(calls: Map<string, { calls: number; usec: number }>): Sample['redis'] {
  const count = (name: string) => (calls.get(name)?.calls ?? 0) / n;
  const scripts = count('evalsha') + count('eval');
  const transactions = count('multi');
  // The queue reads outside scripts (blocking reads and claims). Jobs are taken with
  // their records in one script, and commandstats also counts what scripts call
  // inside, so GET, LLEN and XREADGROUP no longer tell direct commands apart; routes
  // and workflows come from memory (api/records/cached-reader.ts) after the first job.
  const others = count('xreadgroup') + count('xautoclaim') + count('xclaim');
  // A script's time includes the commands it calls.
  const usec = (calls.get('evalsha')?.usec ?? 0) + (calls.get('eval')?.usec ?? 0);
  return { scripts, transactions, others, scriptUs: usec / n };
}

/** Starts the worker CLI and samples the queue until it is empty. */
async function drain(redis: Redis, url: string, redisPid: number): Promise<Sample> {
  const [cmd, args] = pinned(1, process.execPath, [join(here, '..', 'roles', 'cli.ts'), 'worker']);
  const worker = spawn(cmd, [...args, '--port', String(await freePort())], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, REDIS_URL: url },
  });
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  await redis.config('RESETSTAT');
  try {
    type Point = { left: number; t: bigint; cpu: number; redisCpu: number };
    let from: Point | undefined;
    let to: Point | undefined;
    for (;;) {
      const left = await redis.xlen(QUEUE.stream);
      const now = {
        left,
        t: process.hrtime.bigint(),
        cpu: cpuNs(worker.pid as number),
        redisCpu: cpuNs(redisPid),
      };
      if (!from && left <= n * 0.9) from = now;
      if (!to && left <= n * 0.1) to = now;
      if (left === 0) break;
      await sleep(20);
    }
    if (!from || !to) throw new Error('the queue was not sampled while draining');
    const statsText = await redis.info('commandstats');
    if (process.env.BENCH_SHOW_STATS) console.error(statsText);
    const calls = commandCalls(statsText);
    const done = from.left - to.left;
    const seconds = Number(to.t - from.t) / 1e9;
    return {
      rate: done / seconds,
      cpuUs: (to.cpu - from.cpu) / 1e3 / done,
      redisUs: (to.redisCpu - from.redisCpu) / 1e3 / done,
      redis: perExecution(calls),
    };
  } finally {
    worker.kill('SIGTERM');
    await exited;
  }
}

/** Every execution succeeded, with its four events; then their keys are dropped. */
async function verifyAndClear(redis: Redis, ids: string[]): Promise<void> {
  for (let at = 0; at < ids.length; at += 1000) {
    const batch = ids.slice(at, at + 1000);
    const stored = await Promise.all(
      batch.map((id) => redis.hmget(EXECUTION_KEYS.execution(id), F.record, F.eventCount)),
    );
    stored.forEach(([json, count], k) => {
      const status = json ? (JSON.parse(json) as Execution).status : 'missing';
      if (status !== 'succeeded' || count !== '4')
        throw new Error(`${batch[k]}: ${status}, ${count} events`);
    });
    await redis.unlink(...batch.map((id) => EXECUTION_KEYS.execution(id)));
  }
  await redis.unlink(EXECUTION_KEYS.index);
}

/** Child mode: the bare engine runs what the worker runs, in memory. */
async function baseline(request: Omit<StartRequest, 'input'>): Promise<void> {
  const engine = new InProcessEngine({ concurrency, onInternalError: (e) => console.error(e) });
  const record = (i: number): Execution => {
    const input = triggerOutput(request.trigger, i);
    input.metadata.executionId = `exec_${i}_${process.pid}`;
    return {
      id: input.metadata.executionId,
      workflowId: request.workflow.workflowId,
      triggerKey: request.trigger.key,
      status: 'queued',
      createdAt: new Date().toISOString(),
      input,
      log: [],
    };
  };
  let next = 0;
  const run = async (count: number) => {
    const end = next + count;
    const lane = async () => {
      while (next < end) {
        const execution = record(next++);
        await engine.resume({ ...request, input: execution.input }, execution, 1);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
  };
  await run(Math.ceil(n * 0.1)); // warm-up
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  await run(n);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const sample: Sample = { rate: n / seconds, cpuUs: (cpu.user + cpu.system) / n };
  console.log(`RESULT ${JSON.stringify(sample)}`);
  await engine.close(1_000);
}

async function measureBaseline(request: Omit<StartRequest, 'input'>): Promise<Sample> {
  const [cmd, args] = pinned(1, process.execPath, [import.meta.filename, '--baseline']);
  const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin?.end(JSON.stringify(request));
  const line = await output(child, /RESULT (.*)\n/);
  child.kill('SIGTERM');
  return JSON.parse(line.slice('RESULT '.length)) as Sample;
}

async function main(): Promise<void> {
  const redisPort = await freePort();
  const [redisCmd, redisArgs] = pinned(0, 'redis-server', [
    ...['--port', String(redisPort), '--bind', '127.0.0.1'],
    ...['--save', '', '--appendonly', 'no'],
  ]);
  const redisServer = spawn(redisCmd, redisArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = `redis://127.0.0.1:${redisPort}`;
  const clients: Redis[] = [];
  try {
    await output(redisServer, /Ready to accept connections/);
    const client = () => {
      const c = new Redis(url);
      clients.push(c);
      return c;
    };
    const redis = client();
    const target = await deploy(redis);
    const store = new RedisExecutionStore({ redis });
    const events = new RedisExecutionEvents({ subscriber: client(), store });
    const queue = new QueuedEngine({ redis, store, events, maxQueued: Number.MAX_SAFE_INTEGER });
    const worker: Sample[] = [];
    const bare: Sample[] = [];
    /** redis-server's CPU per execution while the queue was filled (the gateway's enqueue). */
    const enqueueUs: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      const redisPid = redisServer.pid as number;
      const beforeFill = cpuNs(redisPid);
      const ids = await fill(queue, target);
      enqueueUs.push((cpuNs(redisPid) - beforeFill) / 1e3 / n);
      const w = await drain(redis, url, redisPid);
      await verifyAndClear(redis, ids);
      const b = await measureBaseline(target);
      worker.push(w);
      bare.push(b);
      console.error(
        `round ${round}/${rounds}: worker ${w.rate.toFixed(0)}/s (${w.cpuUs.toFixed(0)} µs CPU each, ` +
          `redis-server ${w.redisUs?.toFixed(0)} µs + ${enqueueUs.at(-1)?.toFixed(0)} µs enqueuing), ` +
          `bare engine ${b.rate.toFixed(0)}/s (${b.cpuUs.toFixed(0)} µs)`,
      );
    }
    queue.close();
    const row = (name: string, ss: Sample[], base: number) => {
      const rate = median(ss.map((s) => s.rate));
      const cpu = median(ss.map((s) => s.cpuUs));
      return `| ${name} | ${rate.toFixed(0)} | ${cpu.toFixed(0)} | ${((rate / base) * 100).toFixed(0)}% |`;
    };
    const base = median(bare.map((s) => s.rate));
    console.log(
      `\n${rounds} rounds, ${n} executions each, concurrency ${concurrency}` +
        `${hasTaskset ? ', worker / bare engine on core 1, redis-server on core 0' : ''}\n`,
    );
    console.log('| process | executions/s (median) | CPU µs per execution | vs bare engine |');
    console.log('|---|---:|---:|---:|');
    console.log(row('bare InProcessEngine, memory store (baseline)', bare, base));
    console.log(row('hookgate worker (Redis queue and store)', worker, base));
    const redisDrain = median(worker.map((s) => s.redisUs ?? 0));
    const redisEnqueue = median(enqueueUs);
    console.log(
      `\nredis-server CPU per execution (median): ${redisDrain.toFixed(1)} µs while the worker ` +
        `drained, ${redisEnqueue.toFixed(1)} µs while the queue was filled (the enqueue script), ` +
        `${(redisDrain + redisEnqueue).toFixed(1)} µs in all`,
    );
    const r = worker.at(-1)?.redis;
    if (r) {
      console.log(
        `\nRedis commands the worker sent per execution: ${r.scripts.toFixed(2)} scripts ` +
          `(jobs taken with their records, records saved with their events and the ` +
          `acknowledgement), ${r.transactions.toFixed(2)} MULTI…EXEC ` +
          `transactions, ${r.others.toFixed(2)} queue reads; redis-server spent ` +
          `${r.scriptUs.toFixed(1)} µs per execution inside the scripts (commandstats: ` +
          `the rest of its CPU is reading, writing and waking up)`,
      );
    }
  } finally {
    for (const c of clients) c.disconnect();
    redisServer.kill('SIGTERM');
  }
}

if (process.argv.includes('--baseline')) {
  const request = JSON.parse(readFileSync(0, 'utf8')) as Omit<StartRequest, 'input'>;
  await baseline(request);
} else {
  await main();
}
