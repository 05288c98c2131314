// `node bench/expression-isolation.ts`: what one JSONata evaluation costs in-process
// (`inline`) and in the expression pool (runtime/engine/expression-pool.ts) over worker
// threads and over child processes, for every expression of examples/ and of the bench
// workflow that does NOT take the fast path (ADR 0025), on trigger records of 1 KB and
// 64 KB (ADR 0048).
//
//   BENCH_EXPR_N=400 BENCH_EXPR_SIZES=1024,65536 node bench/expression-isolation.ts
//
// Per expression, input size and mode: the median wall time of one evaluation awaited
// alone (the latency an execution sees), and the engine's own CPU per evaluation
// (process.cpuUsage of this process over BENCH_EXPR_N evaluations, 8 in flight: what the
// event loop that serves every namespace pays; a worker thread's CPU counts here too, a
// child process' does not). Workers are warmed (started, expression compiled) first.
//
// Each twice (since 2026-11-28 (night), when the pool began to send a worker an
// execution's trigger record once): `first`, every evaluation the first of its
// execution (a context opened and ended around it, so the record, or the part of it the
// expression reads, goes each time: an execution with one expression), and `again`,
// every evaluation one more of a single execution (the record already in the worker
// once an expression read all of it: the second expression of an execution and after).
// BENCH_EXPR_KINDS=first,again chooses.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import jsonata from 'jsonata';
import { parseAllDocuments } from 'yaml';
import { fastPathOf } from '../runtime/engine/expression-fast-path.ts';
import { ExpressionCache } from '../runtime/engine/expressions.ts';
import { median } from './support.ts';

const root = join(import.meta.dirname, '..');
const N = Number(process.env.BENCH_EXPR_N ?? 400);
const SIZES = (process.env.BENCH_EXPR_SIZES ?? '1024,65536').split(',').map(Number);
const KINDS = (process.env.BENCH_EXPR_KINDS ?? 'first,again').split(',') as Kind[];

/** `first`: each evaluation opens its own execution; `again`: all are of one execution. */
type Kind = 'first' | 'again';

/** Every expression, condition and output of the workflows in a folder. */
function expressionsIn(dir: string): string[] {
  const found: string[] = [];
  const visit = (value: unknown, key: string): void => {
    if (typeof value === 'string') {
      if (['expression', 'condition', 'output'].includes(key)) found.push(value);
    } else if (Array.isArray(value)) {
      for (const item of value) visit(item, key);
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) visit(v, k);
    }
  };
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      const manifest = doc.toJS() as { kind?: string; spec?: unknown } | null;
      if (manifest?.kind === 'Workflow') visit(manifest.spec, '');
    }
  }
  return found;
}

/** A trigger record as the gateway makes it, its body padded to about `bytes`. */
function record(bytes: number): Record<string, unknown> {
  const body: Record<string, unknown> = {
    orderId: 'A-1001',
    total: 1250,
    currency: 'eur',
    name: 'Ada',
    report: 'daily',
    paymentId: 'p-77',
    sku: 'sku-1',
    delta: 3,
    items: [] as unknown[],
  };
  const items = body.items as unknown[];
  while (JSON.stringify(body).length < bytes - 300) {
    items.push({ sku: `sku-${items.length}`, qty: items.length % 7, note: 'x'.repeat(40) });
  }
  return {
    body,
    headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'webhook-id': 'w1' },
    params: { provider: 'psp-1' },
    query: {},
    metadata: { consumer: 'acme', executionId: '00000000-0000-4000-8000-000000000000' },
  };
}

interface Row {
  expression: string;
  bytes: number;
  mode: string;
  kind: Kind;
  latencyUs: number;
  cpuUs: number;
}

async function measure(
  cache: ExpressionCache,
  mode: string,
  kind: Kind,
  source: string,
  bytes: number,
): Promise<Row> {
  const input = record(bytes);
  const bindings = { trigger: input, nodes: { collect: { report: 'daily', rows: 42 } } };
  const execution = cache.forExecution(input);
  const evaluate = async (): Promise<unknown> => {
    if (kind === 'again') return execution.evaluate('bench@1', source, input, bindings);
    const own = cache.forExecution(input);
    try {
      return await own.evaluate('bench@1', source, input, bindings);
    } finally {
      own.end();
    }
  };
  // Warm-up: every worker started and the expression compiled in each.
  await Promise.all(Array.from({ length: 16 }, evaluate));
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    const started = performance.now();
    await evaluate();
    times.push((performance.now() - started) * 1000);
  }
  const cpu = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next++ < N) await evaluate();
    }),
  );
  const used = process.cpuUsage(cpu);
  execution.end();
  return {
    expression: source,
    bytes,
    mode,
    kind,
    latencyUs: median(times),
    cpuUs: (used.user + used.system) / N,
  };
}

const sources = [
  ...new Set([
    ...expressionsIn(join(root, 'examples')),
    ...expressionsIn(join(root, 'bench', 'servers', 'manifests')),
  ]),
];
const slow = sources.filter((s) => !fastPathOf(jsonata(s)));
console.log(`${sources.length} expressions, ${slow.length} not on the fast path:`);
for (const s of sources) console.log(`  ${fastPathOf(jsonata(s)) ? 'fast' : 'JSONata'}  ${s}`);

const modes: [string, ExpressionCache][] = [
  ['inline', new ExpressionCache({ isolation: 'inline' })],
  ['thread', new ExpressionCache({ isolation: 'worker', pool: { transport: 'thread' } })],
  ['process', new ExpressionCache({ isolation: 'worker', pool: { transport: 'process' } })],
];
const rows: Row[] = [];
for (const source of slow) {
  for (const bytes of SIZES) {
    for (const kind of KINDS) {
      for (const [mode, cache] of modes) rows.push(await measure(cache, mode, kind, source, bytes));
    }
  }
}
await Promise.all(modes.map(([, cache]) => cache.close()));

console.log(
  '\n| expression | input | evaluation | mode | median µs (latency) | engine CPU µs / evaluation |',
);
console.log('| --- | ---: | --- | --- | ---: | ---: |');
for (const r of rows) {
  const text = r.expression.length > 60 ? `${r.expression.slice(0, 59)}…` : r.expression;
  console.log(
    `| \`${text.replaceAll('|', '\\|')}\` | ${r.bytes / 1024} KB | ${r.kind} | ${r.mode} | ${r.latencyUs.toFixed(0)} | ${r.cpuUs.toFixed(0)} |`,
  );
}
for (const bytes of SIZES) {
  for (const kind of KINDS) {
    for (const [mode] of modes) {
      const of = rows.filter((r) => r.bytes === bytes && r.kind === kind && r.mode === mode);
      console.log(
        `median over expressions, ${bytes / 1024} KB, ${kind}, ${mode}: latency ${median(of.map((r) => r.latencyUs)).toFixed(0)} µs, engine CPU ${median(of.map((r) => r.cpuUs)).toFixed(0)} µs`,
      );
    }
  }
}
