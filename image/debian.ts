// The image's root filesystem, assembled the way distroless images are: Debian packages
// fetched with `apt-get download`, unpacked with `dpkg-deb -x` (no maintainer scripts
// run, no dpkg database, no shell), then the few files their scripts would have made.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { NONROOT } from './layout.ts';

/**
 * What Node's binary links (libc, libm, libdl, libpthread: libc6; libstdc++6;
 * libgcc-s1), the CA bundle, time zones and /etc/services. The gcc-N-base package
 * they depend on is added for its copyright file.
 */
export const DEBIAN_PACKAGES = [
  'libc6',
  'libgcc-s1',
  'libstdc++6',
  'ca-certificates',
  'tzdata',
  'netbase',
] as const;

export interface DebianPackage {
  name: string;
  version: string;
  architecture: string;
  /** The source package, when it differs from the binary package's name. */
  source: string | undefined;
  maintainer: string | undefined;
  homepage: string | undefined;
  description: string | undefined;
  sha256: string;
  file: string;
  /** The control file, written to /var/lib/dpkg/status.d/ for image scanners. */
  control: string;
}

export interface OsRelease {
  id: string;
  versionId: string;
  text: string;
}

/** The build machine's os-release: the packages come from its apt sources. */
export function osRelease(): OsRelease {
  const path = existsSync('/etc/os-release') ? '/etc/os-release' : '/usr/lib/os-release';
  const text = readFileSync(path, 'utf8');
  const field = (name: string) =>
    new RegExp(`^${name}=(?:"([^"]*)"|(\\S*))`, 'm').exec(text)?.slice(1).find(Boolean) ?? '';
  return { id: field('ID'), versionId: field('VERSION_ID'), text };
}

function aptDownload(dir: string, names: readonly string[]): void {
  const asRoot = process.getuid?.() === 0;
  // As root, apt would hand the download to its unprivileged _apt user, which cannot
  // write into our cache directory (it warns and downloads as root anyway).
  const sandbox = asRoot ? ['-o', 'APT::Sandbox::User=root'] : [];
  const run = () =>
    execFileSync('apt-get', ['-qq', ...sandbox, 'download', ...names], {
      cwd: dir,
      stdio: ['ignore', 'inherit', 'pipe'],
    });
  try {
    run();
  } catch (err) {
    // A fresh machine may have no package lists yet.
    if (!asRoot) throw err;
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
    run();
  }
}

function describe(dir: string, file: string): DebianPackage {
  const path = join(dir, file);
  const control = execFileSync('dpkg-deb', ['-f', path], { encoding: 'utf8' });
  const field = (name: string) => new RegExp(`^${name}: (.*)$`, 'm').exec(control)?.[1];
  const name = field('Package');
  const version = field('Version');
  if (!name || !version) throw new Error(`${file}: no Package or Version in its control file`);
  const source = field('Source')?.split(' ')[0];
  return {
    name,
    version,
    architecture: field('Architecture') ?? 'all',
    source: source && source !== name ? source : undefined,
    maintainer: field('Maintainer'),
    homepage: field('Homepage'),
    description: field('Description'),
    sha256: createHash('sha256').update(readFileSync(path)).digest('hex'),
    file: path,
    control: control.endsWith('\n') ? control : `${control}\n`,
  };
}

/** Downloads the packages (the candidate versions of the machine's apt sources) into dir. */
export function downloadPackages(dir: string): DebianPackage[] {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  aptDownload(dir, DEBIAN_PACKAGES);
  const depends = readdirSync(dir)
    .map((file) => describe(dir, file).control)
    .join('\n');
  const gccBase = /\b(gcc-\d+-base)\b/.exec(depends)?.[1];
  if (gccBase) aptDownload(dir, [gccBase]);
  return readdirSync(dir)
    .filter((file) => file.endsWith('.deb'))
    .sort()
    .map((file) => describe(dir, file));
}

function write(rootfs: string, path: string, content: string, mode = 0o644): void {
  const target = join(rootfs, path);
  mkdirSync(join(target, '..'), { recursive: true });
  writeFileSync(target, content);
  chmodSync(target, mode);
}

/** Removes what nothing in the image reads: manuals, packaging notes, iconv modules. */
function trim(rootfs: string): void {
  const doc = join(rootfs, 'usr/share/doc');
  for (const name of existsSync(doc) ? readdirSync(doc) : []) {
    const dir = join(doc, name);
    // Keep each package's copyright (its licence terms); some are links to gcc-N-base.
    if (lstatSync(dir).isSymbolicLink()) continue;
    for (const entry of readdirSync(dir))
      if (entry !== 'copyright') rmSync(join(dir, entry), { recursive: true, force: true });
  }
  for (const path of [
    'usr/share/man',
    'usr/share/info',
    'usr/share/lintian',
    'usr/share/gdb',
    'usr/share/gcc',
    // iconv modules: Node converts encodings with its own ICU, never with iconv.
    'usr/lib/x86_64-linux-gnu/gconv',
    'usr/sbin/update-ca-certificates',
  ])
    rmSync(join(rootfs, path), { recursive: true, force: true });
}

/**
 * What ca-certificates' postinst does (update-ca-certificates): one PEM bundle of the
 * Mozilla roots. Only the bundle stays.
 */
function certificateBundle(rootfs: string): void {
  const source = join(rootfs, 'usr/share/ca-certificates');
  const pems: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    )) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.crt')) pems.push(readFileSync(path, 'utf8').trim());
    }
  };
  walk(source);
  if (pems.length < 50) throw new Error(`only ${pems.length} certificates in ca-certificates`);
  write(rootfs, 'etc/ssl/certs/ca-certificates.crt', `${pems.join('\n')}\n`);
  rmSync(source, { recursive: true, force: true });
  rmSync(join(rootfs, 'etc/ca-certificates'), { recursive: true, force: true });
}

function systemFiles(rootfs: string, os: OsRelease): void {
  const { uid, gid, name, home } = NONROOT;
  write(
    rootfs,
    'etc/passwd',
    [
      'root:x:0:0:root:/root:/sbin/nologin',
      'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin',
      `${name}:x:${uid}:${gid}:${name}:${home}:/sbin/nologin`,
      '',
    ].join('\n'),
  );
  write(rootfs, 'etc/group', ['root:x:0:', 'nogroup:x:65534:', `${name}:x:${gid}:`, ''].join('\n'));
  write(rootfs, 'etc/nsswitch.conf', 'passwd: files\ngroup: files\nhosts: files dns\n');
  write(rootfs, 'etc/os-release', os.text);
  symlinkSync('/usr/share/zoneinfo/Etc/UTC', join(rootfs, 'etc/localtime'));
  mkdirSync(join(rootfs, 'tmp'));
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  mkdirSync(join(rootfs, 'root'), { mode: 0o700 });
}

/**
 * Unpacks the packages into rootfs (which must not exist yet), trims them, and adds
 * passwd/group, the CA bundle, /tmp and, for scanners, /var/lib/dpkg/status.d/<pkg>.
 */
export function buildRootfs(rootfs: string, packages: DebianPackage[], os: OsRelease): void {
  mkdirSync(rootfs, { recursive: true });
  for (const pkg of packages) {
    execFileSync('dpkg-deb', ['-x', pkg.file, rootfs]);
    write(rootfs, `var/lib/dpkg/status.d/${pkg.name}`, pkg.control);
  }
  certificateBundle(rootfs);
  trim(rootfs);
  systemFiles(rootfs, os);
}
