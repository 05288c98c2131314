// CPU time of a process, and of it with every process below it, from /proc: the sum of
// each thread's on-CPU nanoseconds (/proc/<pid>/task/<tid>/schedstat, first field).
// Nanosecond resolution, unlike utime/stime's 10 ms ticks. Linux only.
import { readdirSync, readFileSync } from 'node:fs';

/** On-CPU nanoseconds of every thread of `pid` so far (0 when it is gone). */
export function cpuNs(pid: number): number {
  let total = 0;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const tid of tasks) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return total;
}

/** Child processes of `pid` (of all its threads). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return children;
  }
  for (const tid of tasks) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (text) children.push(...text.split(' ').map(Number));
    } catch {
      // the thread ended meanwhile
    }
  }
  return children;
}

/** What a helper process is, from its command line: redis-server, worker, control plane. */
function helperName(pid: number): string {
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return 'gone';
  }
  if (cmdline.includes('redis-server')) return 'redis-server';
  if (/\bworker\b/.test(cmdline)) return 'worker';
  if (cmdline.includes('control-plane')) return 'control plane';
  return cmdline.split(' ')[0] ?? 'unknown';
}

/** On-CPU nanoseconds of each process below `pid`, summed per helper name. */
export function helpersCpuNs(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  const visit = (parent: number) => {
    for (const child of childrenOf(parent)) {
      const name = helperName(child);
      byName.set(name, (byName.get(name) ?? 0) + cpuNs(child));
      visit(child);
    }
  };
  visit(pid);
  return byName;
}

/** On-CPU nanoseconds of `pid` and every process below it (helpers such as redis-server). */
export function treeCpuNs(pid: number): number {
  return cpuNs(pid) + childrenOf(pid).reduce((sum, child) => sum + treeCpuNs(child), 0);
}

/** `pid` and every process below it. */
export function treePids(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(treePids)];
}

/** The pids of the redis-servers listening on `ports` (from their process titles). */
export function redisServerPids(ports: number[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // redis-server sets its title to `redis-server 127.0.0.1:<port> [cluster]`.
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const port = /^\S*redis-server \S*:(\d+)/.exec(title)?.[1];
      if (port && ports.includes(Number(port))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}
