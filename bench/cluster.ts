// `node bench/cluster.ts`: the execution queue on one Redis against a Redis Cluster of
// three masters with HOOKGATE_QUEUE_SHARDS (ADR 0021), in the same run.
//
//   BENCH_ROUNDS=3 BENCH_CLUSTER_N=10000 BENCH_CLUSTER_WORKERS=2 node bench/cluster.ts
//
// Targets, each its own Redis (started once) with the bench workflow deployed:
//   - one Redis, 1 shard (today's layout: the baseline);
//   - one Redis, 12 shards (what sharding itself costs: 12 streams, 12 loops a worker);
//   - a cluster of 3 masters, 12 shards (4 a master).
// Each round, for each target in turn: the queue is filled with N executions of the
// bench workflow (the gateway's QueuedEngine), then BENCH_CLUSTER_WORKERS real worker
// processes (`roles/cli.ts worker`, default settings) drain it while this process polls
// the depth. The rate is taken between 10 % and 90 % drained, with the CPU time of the
// workers and of the redis-servers over the same span (bench/cpu.ts). Nothing is pinned:
// three masters and the workers share the machine's cores. Every execution is checked
// to have succeeded.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { shardedSubscriberClient, type RedisClient } from '../api/records/redis-client.ts';
import { RedisExecutionEvents } from '../runtime/engine/execution-events-redis.ts';
import { ExecutionLayout } from '../runtime/engine/execution-keys.ts';
import { RedisExecutionStore } from '../runtime/engine/execution-store-redis.ts';
import type { StartRequest } from '../runtime/engine/ports.ts';
import { QueuedEngine } from '../runtime/engine/queued-engine.ts';
import { readQueueState } from '../runtime/engine/queue-state.ts';
import { startRedisCluster } from '../test/support/redis-cluster.ts';
import { startRedis } from '../test/support/redis.ts';
import { cpuNs, redisServerPids } from './cpu.ts';
import { deploy, triggerOutput } from './queued-executions.ts';
import { freePort, median } from './support.ts';

const here = import.meta.dirname;
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const n = Number(process.env.BENCH_CLUSTER_N ?? 10_000);
const workers = Number(process.env.BENCH_CLUSTER_WORKERS ?? 2);

interface Sample {
  rate: number;
  /** CPU µs per execution: the workers, the redis-servers. */
  workerUs: number;
  redisUs: number;
}

interface Target {
  name: string;
  url: string;
  shards: number;
  client: RedisClient;
  redisPids: number[];
  queue: QueuedEngine;
  store: RedisExecutionStore;
  layout: ExecutionLayout;
  request: Omit<StartRequest, 'input'>;
  samples: Sample[];
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function target(name: string, shards: number, cluster: boolean): Promise<Target> {
  let url: string;
  let client: RedisClient;
  let subscriber: RedisClient;
  let pids: number[];
  let stop: () => Promise<void>;
  if (cluster) {
    const c = await startRedisCluster();
    url = c.url;
    client = c.client();
    subscriber = shardedSubscriberClient(client);
    pids = redisServerPids(c.nodes.map((node) => node.port));
    stop = () => c.stop();
  } else {
    const server = await startRedis();
    url = server.url;
    client = new Redis(url);
    subscriber = new Redis(url);
    pids = redisServerPids([server.port]);
    stop = () => server.stop();
  }
  const layout = new ExecutionLayout({ shards, cluster });
  const store = new RedisExecutionStore({ redis: client, layout });
  const events = new RedisExecutionEvents({ subscriber, store });
  const queue = new QueuedEngine({
    redis: client,
    store,
    events,
    maxQueued: Number.MAX_SAFE_INTEGER,
  });
  const request = await deploy(client);
  return {
    name,
    url,
    shards,
    client,
    redisPids: pids,
    queue,
    store,
    layout,
    request,
    samples: [],
    async stop() {
      queue.close();
      client.disconnect();
      subscriber.disconnect();
      await stop();
    },
  };
}

async function fill(t: Target): Promise<string[]> {
  const ids: string[] = [];
  for (let at = 0; at < n; at += 500) {
    const batch = Array.from({ length: Math.min(500, n - at) }, (_, k) =>
      t.queue.start({ ...t.request, input: triggerOutput(t.request.trigger, at + k) }),
    );
    for (const execution of await Promise.all(batch)) ids.push(execution.id);
  }
  return ids;
}

/** Starts the workers and samples the queue until it is empty. */
async function drain(t: Target): Promise<Sample> {
  const procs = await Promise.all(
    Array.from({ length: workers }, async () =>
      spawn(
        process.execPath,
        [join(here, '..', 'roles', 'cli.ts'), 'worker', '--port', String(await freePort())],
        {
          stdio: ['ignore', 'ignore', 'inherit'],
          env: {
            ...process.env,
            REDIS_URL: t.url,
            HOOKGATE_QUEUE_SHARDS: String(t.shards),
            LOG_LEVEL: 'error',
          },
        },
      ),
    ),
  );
  const exited = procs.map((p) => new Promise((resolve) => p.once('exit', resolve)));
  const cpu = () => ({
    workers: procs.reduce((s, p) => s + cpuNs(p.pid as number), 0),
    redis: t.redisPids.reduce((s, pid) => s + cpuNs(pid), 0),
  });
  try {
    type Point = { left: number; t: bigint; cpu: ReturnType<typeof cpu> };
    let from: Point | undefined;
    let to: Point | undefined;
    for (;;) {
      const left = (await readQueueState(t.client, t.layout.streams)).depth;
      const now = { left, t: process.hrtime.bigint(), cpu: cpu() };
      if (!from && left <= n * 0.9) from = now;
      if (!to && left <= n * 0.1) to = now;
      if (left === 0) break;
      await sleep(50);
    }
    if (!from || !to) throw new Error('the queue was not sampled while draining');
    const done = from.left - to.left;
    const seconds = Number(to.t - from.t) / 1e9;
    return {
      rate: done / seconds,
      workerUs: (to.cpu.workers - from.cpu.workers) / 1e3 / done,
      redisUs: (to.cpu.redis - from.cpu.redis) / 1e3 / done,
    };
  } finally {
    for (const p of procs) p.kill('SIGTERM');
    await Promise.all(exited);
  }
}

async function verify(t: Target, ids: string[]): Promise<void> {
  for (let at = 0; at < ids.length; at += 500) {
    const batch = ids.slice(at, at + 500);
    const records = await Promise.all(batch.map((id) => t.store.get(id)));
    records.forEach((e, k) => {
      if (e?.status !== 'succeeded') throw new Error(`${t.name}: ${batch[k]} ${e?.status}`);
    });
  }
}

async function main(): Promise<void> {
  const targets: Target[] = [];
  try {
    targets.push(await target('one Redis, 1 shard (baseline)', 1, false));
    targets.push(await target('one Redis, 12 shards', 12, false));
    targets.push(await target('Redis Cluster, 3 masters, 12 shards', 12, true));
    for (let round = 1; round <= rounds; round++) {
      for (const t of targets) {
        const ids = await fill(t);
        const s = await drain(t);
        await verify(t, ids);
        t.samples.push(s);
        console.error(
          `round ${round}/${rounds} ${t.name}: ${s.rate.toFixed(0)}/s, CPU µs each: ` +
            `workers ${s.workerUs.toFixed(0)}, redis ${s.redisUs.toFixed(0)}`,
        );
      }
    }
    const base = targets[0] as Target;
    const rateOf = (t: Target) => median(t.samples.map((s) => s.rate));
    const cpuOf = (t: Target) => median(t.samples.map((s) => s.workerUs + s.redisUs));
    console.log(
      `\n${rounds} rounds, ${n} executions each, ${workers} worker processes (concurrency 32 ` +
        'each), nothing pinned\n',
    );
    console.log(
      '| target | executions/s (median) | vs baseline | CPU µs per execution: workers | redis-servers | total vs baseline |',
    );
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const t of targets) {
      const w = median(t.samples.map((s) => s.workerUs));
      const r = median(t.samples.map((s) => s.redisUs));
      console.log(
        `| ${t.name} | ${rateOf(t).toFixed(0)} | ${((rateOf(t) / rateOf(base)) * 100).toFixed(0)}% ` +
          `| ${w.toFixed(0)} | ${r.toFixed(0)} | ${((cpuOf(t) / cpuOf(base)) * 100).toFixed(0)}% |`,
      );
    }
  } finally {
    for (const t of targets) await t.stop();
  }
}

await main();
