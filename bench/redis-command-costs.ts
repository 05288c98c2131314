// `node bench/redis-command-costs.ts`: what redis-server spends on one script call, in
// instructions (callgrind: exact to a percent, where time swings on a shared machine),
// taken apart: the call itself, each key, each argument, each byte of an argument, each
// redis.call, and the commands the least queued design would send (the floor of issue
// 14's redis-server target; bench/README.md "what a Redis script costs").
//
//   BENCH_COST_CALLS=1000 node bench/redis-command-costs.ts     (Node 24 first on PATH)
//
// One redis-server under callgrind (Debian `valgrind`); each variant is loaded, called 50
// times to warm up, then BENCH_COST_CALLS times pipelined (as ioredis' auto-pipelining
// sends a busy process's calls), and its instructions per call printed. Keys and
// arguments marked with `#` get the call's number, so that each call writes a key of its
// own where the variant writes.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { callgrindCommand, instructionsSinceLast, requireValgrind } from './callgrind.ts';
import { freePort, output } from './support.ts';

const calls = Number(process.env.BENCH_COST_CALLS ?? 1_000);
requireValgrind('bench/redis-command-costs.ts');

const bytes = (n: number) => 'x'.repeat(n);
/** A finished record and an event of the bench workflow's size (bench/redis-scripts.ts). */
const RECORD = `{"id":"#","status":"succeeded","pad":"${bytes(660)}"}`;
const EVENT = `{"type":"node.started","nodeId":"shape","executionId":"#","pad":"${bytes(80)}"}`;
const ID = 'e8c94c88-fbe5-4143-8de2-1297bc53c0e1#';

interface Variant {
  name: string;
  lua: string;
  keys: string[];
  args: string[];
}

const variant = (name: string, lua: string, keys: string[] = [], args: string[] = []) => ({
  name,
  lua,
  keys,
  args,
});

const VARIANTS: Variant[] = [
  variant('EVALSHA `return 0`', 'return 0'),
  variant('… with 1 key', 'return 0', ['k#']),
  variant('… with 6 keys', 'return 0', ['k#', 'k2', 'k3', 'k4', 'k5', 'k6']),
  variant('… with 26 one-byte arguments', 'return 0', [], [...'abcdefghijklmnopqrstuvwxyz']),
  variant('… with one 100-byte argument', 'return 0', [], [bytes(100)]),
  variant('… with one 700-byte argument', 'return 0', [], [bytes(700)]),
  variant('… with one 7,000-byte argument', 'return 0', [], [bytes(7000)]),
  variant(
    "… with the finishing write's 6 keys and 26 arguments",
    'return 0',
    ['e:#', 'index', 'finished', 'sizes', 'bytes', 'stream'],
    [
      RECORD,
      '86400000',
      '1795868066555',
      ID,
      '1795868066555',
      '536870912',
      '',
      'hookgate:execution:',
      '0',
      '86520000',
      'workers',
      '1795868066556-0',
      '5000',
      'events',
      '',
      '641',
      '0',
      ...['2', '3', '4'].flatMap((seq) => [seq, EVENT, '']),
    ],
  ),
  variant('1 redis.call (PEXPIRE of a missing key)', "redis.call('PEXPIRE', KEYS[1], 1000)", [
    'k#',
  ]),
  variant(
    '2 redis.calls (PEXPIRE twice)',
    "redis.call('PEXPIRE', KEYS[1], 1000) redis.call('PEXPIRE', KEYS[1], 1000)",
    ['k#'],
  ),
  variant(
    'HSET of a 700-byte field into a new hash',
    "redis.call('HSET', KEYS[1], 'r', ARGV[1])",
    ['h#'],
    [RECORD],
  ),
  variant(
    "the queued floor's enqueue (XADD MAXLEN ~, id and a 35-byte body)",
    "return redis.call('XADD', KEYS[1], 'MAXLEN', '~', '100000', '*', 'id', ARGV[1], 'body', ARGV[2])",
    ['floor'],
    [ID, '{"orderId":"A-1001","total":1250}'],
  ),
  variant(
    'XADD of a 1,000-byte job',
    "return redis.call('XADD', KEYS[1], '*', 'job', ARGV[1])",
    ['jobs'],
    [bytes(1000)],
  ),
  variant(
    'least finish: SET the 700-byte record PX, XACK, XDEL',
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', 86400000) redis.call('XACK', KEYS[2], 'g', ARGV[2]) redis.call('XDEL', KEYS[2], ARGV[2])",
    ['r#', 'acks'],
    [RECORD, '1-#'],
  ),
];

const numbered = (values: string[], k: number) => values.map((v) => v.replace('#', String(k)));

async function main(): Promise<void> {
  const port = await freePort();
  const dumps = mkdtempSync(join(tmpdir(), 'hookgate-callgrind-'));
  const [command, ...rest] = callgrindCommand(dumps) as [string, ...string[]];
  const server = spawn(
    command,
    [...rest, '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const redis = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true });
  try {
    await output(server, /Ready to accept connections/);
    await redis.connect();
    const pid = server.pid as number;
    console.log(`| script call | thousand instructions per call (${calls} calls) |`);
    console.log('| --- | ---: |');
    for (const { name, lua, keys, args } of VARIANTS) {
      const sha = String(await redis.script('LOAD', lua));
      const call = (k: number) =>
        redis.evalsha(sha, keys.length, ...numbered(keys, k), ...numbered(args, k));
      for (let k = 0; k < 50; k++) await call(-1 - k);
      instructionsSinceLast(pid, dumps);
      await Promise.all(Array.from({ length: calls }, (_v, k) => call(k)));
      const perCall = instructionsSinceLast(pid, dumps) / calls / 1e3;
      console.log(`| ${name} | ${perCall.toFixed(1)} |`);
    }
  } finally {
    redis.disconnect();
    server.kill('SIGKILL');
    rmSync(dumps, { recursive: true, force: true });
  }
}

await main();
