// podman for the image tests: whether they run, the hookgate image, containers run the
// way a restricted pod runs them, and what the host sees of them.
//
// The image tests are opt-in on a developer machine (HOOKGATE_IMAGE_TESTS=1; they need
// root, buildah, podman and runc, which `npm run image` installs) and always on under
// CI=true, where a missing tool fails the run. HOOKGATE_IMAGE=<reference> tests that
// image instead of the one built from the working tree.
import { execFile } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { imageRefs, packageJson, ROOT } from '../../image/layout.ts';

const exec = promisify(execFile);

/** What podman needs on this machine kind (docs: toolchain notes, Containers). */
export const PODMAN_RUN = [
  '--runtime',
  'runc',
  '--ulimit',
  'nofile=1024:1024',
  '--ulimit',
  'nproc=1024:1024',
  '--network',
  'host',
];

/**
 * What a restricted pod gets: a read-only root filesystem with only /tmp writable
 * (podman would also mount tmpfs on /run and /var/tmp; a pod gets only what it
 * mounts), uid and gid 65532.
 */
export const RESTRICTED = [
  '--read-only',
  '--read-only-tmpfs=false',
  '--tmpfs',
  '/tmp:rw,mode=1777,size=16m',
  '--user',
  '65532:65532',
];

export function onPath(tool: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * Whether the image tests run here: false (with a loud warning) when not asked for or
 * when a tool is missing; under CI=true a missing tool throws instead.
 */
export function imageTestsEnabled(): boolean {
  const ci = process.env.CI === 'true';
  if (!ci && process.env.HOOKGATE_IMAGE_TESTS !== '1') {
    console.warn('\n!!! image tests are opt-in: HOOKGATE_IMAGE_TESTS=1 runs them; SKIPPED !!!\n');
    return false;
  }
  const missing = ['buildah', 'podman', 'runc'].filter((t) => !onPath(t));
  if (process.getuid?.() !== 0) missing.unshift('root');
  if (missing.length === 0) return true;
  const message = `image tests need ${missing.join(', ')} (as root: bash image/install-tools.sh)`;
  if (ci) throw new Error(message);
  console.warn(`\n!!! ${message}: SKIPPED !!!\n`);
  return false;
}

/** The image under test: HOOKGATE_IMAGE, else localhost/hookgate:<package version>. */
export function imageUnderTest(): string {
  return process.env.HOOKGATE_IMAGE ?? imageRefs(packageJson().version).versioned;
}

export async function podman(...args: string[]): Promise<string> {
  const { stdout } = await exec('podman', args, { maxBuffer: 32 * 1024 * 1024 });
  return stdout.trim();
}

/** Runs image/build.ts (it takes a lock: one build per working tree at a time). */
export async function buildImage(...args: string[]): Promise<string> {
  // Under `npm test`, process.execPath is the devDependency's Node 24.
  const { stdout } = await exec(process.execPath, [join(ROOT, 'image', 'build.ts'), ...args], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/**
 * The image to run: HOOKGATE_IMAGE as given, else the local image of this version,
 * built from the working tree (without the OCI archive) once per test process. The
 * build reuses its cached layers (about 10 s when nothing changed), so a stale image
 * left on the machine by an earlier tree is never what gets tested.
 */
let built: Promise<string> | undefined;
export function ensureImage(): Promise<string> {
  const image = imageUnderTest();
  if (process.env.HOOKGATE_IMAGE) return Promise.resolve(image);
  built ??= buildImage('--no-archive').then(() => image);
  return built;
}

import { freePort } from './ports.ts';

export { freePort };

/** stdout and stderr of a container (empty when it is gone). */
export async function containerLogs(container: string, tail?: number): Promise<string> {
  const args = ['logs', ...(tail ? ['--tail', String(tail)] : []), container];
  try {
    const { stdout, stderr } = await exec('podman', args, { maxBuffer: 32 * 1024 * 1024 });
    return stdout + stderr;
  } catch {
    return '';
  }
}

/** Polls `url` until it answers 200; throws with the container's logs otherwise. */
export async function waitForHealthy(
  url: string,
  timeoutMs: number,
  container: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const logs = await containerLogs(container);
  throw new Error(`${url} not healthy after ${timeoutMs} ms (${last}); logs:\n${logs}`);
}

/** `podman inspect --format <format>` of a container. */
export function inspect(container: string, format: string): Promise<string> {
  return podman('inspect', '--format', format, container);
}

/** /proc/<pid>/status of the container's PID 1, read from the host. */
export async function processStatus(container: string): Promise<string> {
  const pid = await inspect(container, '{{.State.Pid}}');
  return readFileSync(`/proc/${pid}/status`, 'utf8');
}

/** Removes containers, ignoring those already gone. */
export async function removeContainers(...names: string[]): Promise<void> {
  if (names.length === 0) return;
  await podman('rm', '--force', '--ignore', '--time', '0', ...names).catch(() => '');
}
