// `node bench/engine.ts`: CPU time and allocated bytes per execution of the bare
// in-process engine (what `npm start` runs behind every accepted request), without
// HTTP: the bench workflow, a memory store at its default (10,000 executions kept, so
// retention costs what it costs a server), 50 started at once, a no-op observer.
//
//   BENCH_ROUNDS=7 BENCH_ENGINE_N=10000 node bench/engine.ts     (Node 24 first on PATH)
//   BENCH_COMPARE=/tmp/exp/base node bench/engine.ts             (another checkout, alternating)
//   BENCH_ENGINE_INSTRUCTIONS=1 BENCH_ROUNDS=1 BENCH_ENGINE_N=1000 node bench/engine.ts
//       (instructions per execution under valgrind's callgrind, counted over the measured
//       rounds only: the same to a few percent from run to run on a loaded machine)
//
// CPU swings with the machine as much as any figure here (±2 µs between runs of one
// tree); allocated bytes do not (within 1 %): V8's sampling heap profiler, objects
// collected since included, over one extra round (sampling slows the round, so its CPU
// is not counted). Each tree runs in its own process, pinned to core 0 when taskset
// exists; with BENCH_COMPARE the trees alternate, BENCH_RUNS processes each.
import { spawnSync } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createDevRuntime } from '../roles/dev.ts';
import type { InProcessEngine } from '../runtime/engine/engine.ts';
import type { WorkflowRegistration } from '../api/records/records.ts';
import type { TriggerOutput } from '../runtime/engine/ports.ts';
import { triggerRef } from '../runtime/engine/trigger-ref.ts';
import { triggerOutput } from './queued-executions.ts';
import { requireValgrind } from './callgrind.ts';

const here = import.meta.dirname;
const ROUTE = '/webhook/default_production_bench/ack';

interface ChildResult {
  tree: string;
  cpuUs: number[];
  allocatedBytes: number;
  /** Under callgrind (BENCH_ENGINE_INSTRUCTIONS): instructions per execution. */
  instructions?: number;
}

/** Counting instructions: the child runs under callgrind, measured rounds only. */
const COUNTING = process.env.BENCH_ENGINE_INSTRUCTIONS === '1';

/** Turns callgrind's instrumentation of this process on or off. */
function instrument(on: boolean): void {
  const run = spawnSync('callgrind_control', [`--instr=${on ? 'on' : 'off'}`, String(process.pid)]);
  if (run.status !== 0) throw new Error(`callgrind_control: ${String(run.stderr)}`);
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** One tree, in this process: warm-up, measured rounds, one sampled round. */
async function child(tree: string): Promise<ChildResult> {
  const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
  const n = Number(process.env.BENCH_ENGINE_N ?? 10_000);
  const dev = await createDevRuntime({
    dir: join(here, 'servers', 'manifests'),
    baseUrl: 'http://127.0.0.1',
  });
  for (let i = 0; i < 200 && dev.table.size < 2; i++) await new Promise((r) => setTimeout(r, 25));
  const route = dev.table.match(ROUTE)?.route;
  const workflow = route ? dev.table.workflow(route.workflowId) : undefined;
  await dev.close();
  if (!route || !workflow) throw new Error(`bench manifests: no route at ${ROUTE}`);
  const { InProcessEngine: Engine } = (await import(
    pathToFileURL(join(tree, 'runtime', 'engine', 'engine.ts')).href
  )) as { InProcessEngine: typeof InProcessEngine };
  // Counted as they finish: between start() and its next turn an execution is neither
  // running nor queued (ADR 0042), so running + queued says nothing of what is left.
  let finished = 0;
  const engine = new Engine({
    observer: {
      executionFinished() {
        finished++;
      },
      callbackDelivered() {},
    },
  });
  const trigger = triggerRef(route);
  let i = 0;
  // As the gateway makes it: the execution id is in it already.
  const input = (): TriggerOutput => {
    const output = triggerOutput(trigger, i);
    output.metadata.executionId = crypto.randomUUID();
    return output;
  };
  const run = async (count: number, registration: WorkflowRegistration) => {
    for (let k = 0; k < count; k += 50) {
      await Promise.all(
        Array.from({ length: 50 }, () => {
          i++;
          return engine.start({ workflow: registration, trigger, input: input() });
        }),
      );
      while (finished < i) await new Promise((r) => setImmediate(r));
    }
  };
  await run(3 * n, workflow);
  const cpuUs: number[] = [];
  if (COUNTING) instrument(true);
  for (let r = 0; r < rounds; r++) {
    const before = process.cpuUsage();
    await run(n, workflow);
    const used = process.cpuUsage(before);
    cpuUs.push((used.user + used.system) / n);
  }
  if (COUNTING) {
    instrument(false);
    await engine.close();
    return { tree, cpuUs, allocatedBytes: 0 };
  }
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await run(n, workflow);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  await engine.close();
  let bytes = 0;
  const stack = [profile.head];
  for (let node = stack.pop(); node; node = stack.pop()) {
    bytes += node.selfSize;
    stack.push(...node.children);
  }
  return { tree, cpuUs, allocatedBytes: bytes / n };
}

function spawnChild(tree: string): ChildResult {
  const args = [join(here, 'engine.ts'), '--child', tree];
  if (COUNTING) {
    const run = spawnSync(
      'valgrind',
      ['--tool=callgrind', '--instr-atstart=no', '--callgrind-out-file=/dev/null'].concat(
        process.execPath,
        args,
      ),
      { encoding: 'utf8' },
    );
    if (run.status !== 0) throw new Error(`bench child for ${tree} failed:\n${run.stderr}`);
    const collected = /Collected : (\d+)/.exec(run.stderr);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as ChildResult;
    const executions = result.cpuUs.length * Number(process.env.BENCH_ENGINE_N ?? 10_000);
    return { ...result, instructions: Number(collected?.[1]) / executions };
  }
  const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  const run = pinned
    ? spawnSync('taskset', ['-c', '0', process.execPath, ...args], { encoding: 'utf8' })
    : spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`bench child for ${tree} failed:\n${run.stderr}`);
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  return JSON.parse(line) as ChildResult;
}

if (process.argv[2] === '--child') {
  console.log(JSON.stringify(await child(resolve(process.argv[3] ?? join(here, '..')))));
} else {
  if (COUNTING) requireValgrind('BENCH_ENGINE_INSTRUCTIONS');
  const trees = [resolve(join(here, '..'))];
  if (process.env.BENCH_COMPARE) trees.push(resolve(process.env.BENCH_COMPARE));
  const runs = Number(process.env.BENCH_RUNS ?? (trees.length > 1 ? 3 : 1));
  const results = new Map<string, ChildResult[]>(trees.map((t) => [t, []]));
  for (let r = 0; r < runs; r++) {
    for (const tree of trees) {
      const result = spawnChild(tree);
      results.get(tree)?.push(result);
      console.error(
        result.instructions === undefined
          ? `${tree}: CPU µs per execution ${result.cpuUs.map((x) => x.toFixed(1)).join(' ')}; ` +
              `${(result.allocatedBytes / 1024).toFixed(1)} KiB allocated`
          : `${tree}: ${(result.instructions / 1000).toFixed(1)} thousand instructions per execution`,
      );
    }
  }
  if (COUNTING) {
    console.log('\n| tree | thousand instructions per execution (each run) |');
    console.log('|---|---|');
    for (const [tree, list] of results)
      console.log(
        `| ${tree} | ${list.map((x) => ((x.instructions ?? 0) / 1000).toFixed(1)).join(', ')} |`,
      );
  } else {
    console.log(
      '\n| tree | CPU µs per execution (median of rounds, each run) | KiB allocated per execution |',
    );
    console.log('|---|---|---:|');
    for (const [tree, list] of results) {
      const cpu = list.map((x) => median(x.cpuUs).toFixed(1)).join(', ');
      const kib = median(list.map((x) => x.allocatedBytes)) / 1024;
      console.log(`| ${tree} | ${cpu} | ${kib.toFixed(1)} |`);
    }
  }
}
