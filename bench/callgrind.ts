// redis-server under valgrind's callgrind (Debian `valgrind`), for instruction counts:
// some 50 times slower than running it plainly, but the same to a percent or two from
// run to run, where time swings ±15 % on a shared machine (bench/redis-scripts.ts,
// bench/redis-command-costs.ts).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Throws when valgrind is not installed; `why` names what needs it. */
export function requireValgrind(why: string): void {
  if (spawnSync('valgrind', ['--version']).status !== 0)
    throw new Error(`${why} needs valgrind (apt-get install valgrind)`);
}

/** The command that runs redis-server under callgrind, dumping into `dir`. */
export function callgrindCommand(dir: string): string[] {
  return ['valgrind', '--tool=callgrind', `--callgrind-out-file=${dir}/cg.%p`, 'redis-server'];
}

/**
 * Instructions redis-server (under callgrind, pid `pid`, dumping into `dir`) executed
 * since the last call: dumps its counters, reads the dump's summary, zeroes them.
 */
export function instructionsSinceLast(pid: number, dir: string): number {
  for (const command of ['--dump', '--zero']) {
    const run = spawnSync('callgrind_control', [command, String(pid)], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`callgrind_control ${command}: ${run.stderr}`);
  }
  // cg.<pid> is the final dump (at exit); cg.<pid>.<k> the k-th one asked for.
  const dumps = readdirSync(dir).filter((f) => /^cg\.\d+\.\d+$/.test(f));
  const last = dumps.sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop())).pop();
  const summary = last && /^summary: (\d+)/m.exec(readFileSync(join(dir, last), 'utf8'));
  if (!summary) throw new Error(`no callgrind summary in ${dir}`);
  return Number(summary[1]);
}
