// A real redis-server for tests: a free loopback port, no persistence, a temp dir (or,
// asked for, an append-only file in a dir of the caller's that outlives a restart).
//
// When the binary is missing, suites are skipped loudly; under CI=true a missing
// binary fails instead (CI installs the Debian package redis-server).
import { Redis } from 'ioredis';
import { freePort } from './ports.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface RedisServer {
  port: number;
  url: string;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its temp dir. Idempotent. */
  stop(): Promise<void>;
  /** Freezes (SIGSTOP) or thaws (SIGCONT) the process: connections stay up, answers stop. */
  pause(): void;
  resume(): void;
  /** Kills the process (SIGKILL: no shutdown, no final save) and waits for its exit. */
  kill(): Promise<void>;
}

export interface RedisStartOptions {
  /** Listen here (to restart one that was stopped). */
  port?: number;
  /**
   * Keep the data in this directory with the append-only file, every write fsynced
   * before it is answered (appendfsync always): a restart on the same dir (even after
   * kill()) has every write a client saw acknowledged. The dir is not removed on stop.
   */
  appendOnlyDir?: string;
}

/** Path of redis-server: $REDIS_SERVER_BIN, else the first on PATH, else /usr/bin. */
export function redisServerPath(): string | undefined {
  const candidates = [
    process.env.REDIS_SERVER_BIN,
    ...(process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'redis-server')),
    '/usr/bin/redis-server',
  ];
  for (const candidate of candidates) {
    if (!candidate) continue;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Whether Redis tests can run. Throws under CI when the binary is missing; elsewhere
 * prints a loud warning and returns false (use with describe.skipIf).
 */
export function redisAvailable(): boolean {
  if (redisServerPath()) return true;
  const message =
    'redis-server not found (apt-get install redis-server, or set REDIS_SERVER_BIN): Redis tests are SKIPPED';
  if (process.env.CI === 'true') throw new Error(message);
  console.warn(`\n!!! ${message} !!!\n`);
  return false;
}

function waitForReady(child: ChildProcess, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`redis-server not ready after ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('Ready to accept connections')) {
        cleanup();
        resolve();
      }
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
    };
    child.stdout?.on('data', onData);
    child.on('exit', onExit);
  });
}

async function startOnce(
  bin: string,
  options: RedisStartOptions,
  extraArgs: string[],
): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const ownDir = options.appendOnlyDir === undefined;
  const dir = options.appendOnlyDir ?? (await mkdtemp(join(tmpdir(), 'hookgate-redis-')));
  const persistence = ownDir
    ? ['--appendonly', 'no']
    : ['--appendonly', 'yes', '--appendfsync', 'always'];
  const child = spawn(
    bin,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      ...persistence,
      '--dir',
      dir,
      '--daemonize',
      'no',
      '--loglevel',
      'notice',
      ...extraArgs,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stderr?.resume();
  try {
    await waitForReady(child, 10_000);
  } catch (error) {
    child.kill('SIGKILL');
    if (ownDir) await rm(dir, { recursive: true, force: true });
    throw error;
  }
  child.stdout?.resume();
  let stopped: Promise<void> | undefined;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await exited;
    },
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
          child.kill('SIGCONT');
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
          await exited;
          clearTimeout(timer);
        }
        if (ownDir) await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/**
 * Starts a redis-server on a free port, or on `port` (to restart one that was stopped);
 * retries on a port race (another process took the port). `args` are appended to the
 * command line (e.g. cluster mode).
 */
export async function startRedis(
  options: RedisStartOptions & { args?: string[] } = {},
): Promise<RedisServer> {
  const bin = redisServerPath();
  if (!bin) throw new Error('redis-server not found');
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(bin, options, options.args ?? []);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}

/**
 * A master and one replica of it, the replica synced and acknowledging: WAIT 1 answers 1
 * (a replica just synced answers its first WAIT late, and a master waits for its
 * diskless-sync delay, 5 s, before it sends the first copy).
 */
export async function startReplicated(): Promise<{ master: RedisServer; replica: RedisServer }> {
  const master = await startRedis();
  const replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
  const probe = new Redis(master.url);
  try {
    await probe.set('replica-check', '1');
    for (let i = 0; (await probe.wait(1, 1_000)) < 1; i++) {
      if (i > 20) throw new Error('the replica did not come up within 20 s');
    }
    return { master, replica };
  } catch (error) {
    await replica.stop();
    await master.stop();
    throw error;
  } finally {
    probe.disconnect();
  }
}
