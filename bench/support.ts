// Small helpers the benchmark scripts share: a free loopback port, waiting for a
// child process to print a line, and helper processes on the load generator's core.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

const hasTaskset = spawnSync('taskset', ['-c', '1', 'true']).status === 0;

/**
 * A helper process (redis-server, a worker) on core 1, the load generator's, when
 * taskset exists, so that the server under test has core 0 to itself; `nice` lowers
 * its priority.
 */
export function onOtherCore(cmd: string, args: string[], nice: number, env = {}): ChildProcess {
  const pinned = hasTaskset ? ['taskset', '-c', '1', cmd, ...args] : [cmd, ...args];
  return spawn('nice', ['-n', String(nice), ...pinned], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
}

/** A redis-server without persistence on core 1, once it accepts connections. */
export async function benchRedis(): Promise<{ server: ChildProcess; url: string }> {
  const port = await freePort();
  const server = onOtherCore(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    0,
  );
  await output(server, /Ready to accept connections/);
  return { server, url: `redis://127.0.0.1:${port}` };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Resolves with the first match of `pattern` in the child's stdout; rejects if it exits first. */
export function output(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = pattern.exec(out);
      if (m) resolve(m[0]);
    });
    child.once('exit', (code) => reject(new Error(`child exited with ${code}: ${out}`)));
  });
}

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}
