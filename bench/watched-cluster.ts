// `node bench/watched-cluster.ts`: what Redis spends per WATCHED execution (one a
// gateway relays events of: Wait for Completion, SSE, a respond node) on a Redis
// Cluster of three masters, and how many messages cross the cluster bus for it
// (execution events over shard channels, ADR 0028).
//
//   BENCH_RUNS=3 BENCH_WATCHED_N=3000 node bench/watched-cluster.ts
//   BENCH_COMPARE=/tmp/exp/base node bench/watched-cluster.ts   (another checkout, alternating)
//
// Each run: a fresh cluster (test/support/redis-cluster.ts), 12 queue shards, N
// executions of the bench workflow queued by the checkout's QueuedEngine and each
// subscribed to (its events relayed to this process), then two `hookgate worker`
// processes of the checkout drain the queue. Measured from the workers' start until
// every execution's `completed` event arrived: the redis-servers' CPU (schedstat) per
// execution, and `cluster_stats_messages_publish_sent` summed over the nodes. Nothing
// is pinned: three masters, two workers and this process share the machine's cores, so
// the CPU figure swings by a third from run to run; the message count does not.
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import type { RedisClient } from '../api/records/redis-client.ts';
import type { RedisExecutionEvents } from '../runtime/engine/execution-events-redis.ts';
import type { ExecutionLayout } from '../runtime/engine/execution-keys.ts';
import type { RedisExecutionStore } from '../runtime/engine/execution-store-redis.ts';
import type { QueuedEngine } from '../runtime/engine/queued-engine.ts';
import { startRedisCluster } from '../test/support/redis-cluster.ts';
import { cpuNs, redisServerPids } from './cpu.ts';
import type { deploy as Deploy, triggerOutput as TriggerOutput } from './queued-executions.ts';
import { freePort, median } from './support.ts';

const n = Number(process.env.BENCH_WATCHED_N ?? 3000);
const runs = Number(process.env.BENCH_RUNS ?? 3);
const SHARDS = 12;

interface Result {
  redisUs: number;
  busMessages: number;
}

/** The checkout's own modules: each tree is measured with its code. */
async function modules(tree: string) {
  const load = <T>(path: string) => import(pathToFileURL(join(tree, path)).href) as Promise<T>;
  return {
    client: await load<{ shardedSubscriberClient?: (c: RedisClient) => RedisClient }>(
      'api/records/redis-client.ts',
    ),
    store: await load<{ RedisExecutionStore: typeof RedisExecutionStore }>(
      'runtime/engine/execution-store-redis.ts',
    ),
    events: await load<{ RedisExecutionEvents: typeof RedisExecutionEvents }>(
      'runtime/engine/execution-events-redis.ts',
    ),
    keys: await load<{ ExecutionLayout: typeof ExecutionLayout }>(
      'runtime/engine/execution-keys.ts',
    ),
    queue: await load<{ QueuedEngine: typeof QueuedEngine }>('runtime/engine/queued-engine.ts'),
    bench: await load<{ deploy: typeof Deploy; triggerOutput: typeof TriggerOutput }>(
      'bench/queued-executions.ts',
    ),
  };
}

async function run(tree: string): Promise<Result> {
  const m = await modules(tree);
  const cluster = await startRedisCluster();
  const client = cluster.client();
  // Before shard channels a plain cluster client subscribed (classic pub/sub).
  const subscriber = m.client.shardedSubscriberClient?.(client) ?? cluster.client();
  const layout = new m.keys.ExecutionLayout({ shards: SHARDS, cluster: true });
  const store = new m.store.RedisExecutionStore({ redis: client, layout });
  const events = new m.events.RedisExecutionEvents({ subscriber, store });
  const queue = new m.queue.QueuedEngine({ redis: client, store, events, maxQueued: 1e9 });
  const workers: ReturnType<typeof spawn>[] = [];
  try {
    const request = await m.bench.deploy(client);
    const ids: string[] = [];
    for (let at = 0; at < n; at += 500) {
      const batch = Array.from({ length: Math.min(500, n - at) }, (_, k) =>
        queue.start({ ...request, input: m.bench.triggerOutput(request.trigger, at + k) }),
      );
      for (const execution of await Promise.all(batch)) ids.push(execution.id);
    }
    let completed = 0;
    for (const id of ids) {
      events.subscribe(id, 0, (event) => {
        if (event.type === 'completed') completed++;
      });
    }
    // Every subscription made (and each execution marked watched) before the run.
    while (events.listenerCount < n) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 500));
    const pids = redisServerPids(cluster.nodes.map((node) => node.port));
    const cpu = () => pids.reduce((sum, pid) => sum + cpuNs(pid), 0);
    const before = cpu();
    for (let i = 0; i < 2; i++) {
      workers.push(
        spawn(
          process.execPath,
          [join(tree, 'roles', 'cli.ts'), 'worker', '--port', String(await freePort())],
          {
            stdio: ['ignore', 'ignore', 'inherit'],
            env: {
              ...process.env,
              REDIS_URL: cluster.url,
              HOOKGATE_QUEUE_SHARDS: String(SHARDS),
              LOG_LEVEL: 'error',
            },
          },
        ),
      );
    }
    const deadline = Date.now() + 180_000;
    while (completed < n) {
      if (Date.now() > deadline) throw new Error(`${tree}: ${completed}/${n} completed`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const redisUs = (cpu() - before) / 1e3 / n;
    let busMessages = 0;
    for (const node of cluster.nodes) {
      const redis = new Redis(node.url);
      const info = String(await redis.cluster('INFO'));
      redis.disconnect();
      busMessages += Number(/cluster_stats_messages_publish_sent:(\d+)/.exec(info)?.[1] ?? 0);
    }
    return { redisUs, busMessages };
  } finally {
    const exited = workers.map((w) => new Promise((r) => w.once('exit', r)));
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(exited);
    events.close();
    queue.close();
    subscriber.disconnect();
    client.disconnect();
    await cluster.stop();
  }
}

const trees = [resolve(import.meta.dirname, '..')];
if (process.env.BENCH_COMPARE) trees.push(resolve(process.env.BENCH_COMPARE));
const results = new Map<string, Result[]>(trees.map((t) => [t, []]));
for (let r = 1; r <= runs; r++) {
  for (const tree of r % 2 ? trees : [...trees].reverse()) {
    const result = await run(tree);
    results.get(tree)?.push(result);
    console.error(
      `run ${r}/${runs} ${tree}: redis-servers ${result.redisUs.toFixed(1)} µs CPU per watched execution, ${result.busMessages} bus publish messages`,
    );
  }
}
console.log(`\n${runs} runs, ${n} watched executions each, 3 masters, ${SHARDS} shards\n`);
console.log(
  '| tree | redis-servers, µs CPU per watched execution | median | bus publish messages |',
);
console.log('|---|---|---:|---:|');
for (const [tree, rs] of results) {
  const us = rs.map((x) => x.redisUs);
  console.log(
    `| ${tree} | ${us.map((x) => x.toFixed(1)).join(', ')} | ${median(us).toFixed(1)} | ${median(rs.map((x) => x.busMessages))} |`,
  );
}
process.exit(0);
