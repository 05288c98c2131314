// Names and paths of the image build, shared by image/build.ts and its tests.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '..');
/** Everything the build downloads or stages; under .cache/, never committed. */
export const CACHE = join(ROOT, '.cache', 'image');
export const STAGE = join(CACHE, 'stage');
export const REPOSITORY = 'localhost/hookgate';
/** The chart's `sources` (charts/hookgate/Chart.yaml); override with HOOKGATE_IMAGE_SOURCE. */
export const DEFAULT_SOURCE = 'https://github.com/hookgate/hookgate';

/** Folders of the product that the image carries (what runs, and the manifests it reads). */
export const PRODUCT_DIRS = [
  'api',
  'operator',
  'runtime',
  'roles',
  'cli',
  'crds',
  'examples',
] as const;
/** The folders holding code that runs in the image: they may import only `dependencies`. */
export const CODE_DIRS = ['api', 'operator', 'runtime', 'roles', 'cli'] as const;

/** The non-root user of the image, as in distroless images. */
export const NONROOT = { uid: 65532, gid: 65532, name: 'nonroot', home: '/home/nonroot' } as const;

export interface PackageJson {
  name: string;
  version: string;
  description?: string;
  license?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  overrides?: Record<string, unknown>;
}

export function packageJson(): PackageJson {
  return JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
}

export function imageRefs(version: string): { versioned: string; dev: string } {
  return { versioned: `${REPOSITORY}:${version}`, dev: `${REPOSITORY}:dev` };
}

export function outputs(version: string): { archive: string; sbom: string } {
  return {
    archive: join(CACHE, `hookgate-${version}.oci.tar`),
    sbom: join(CACHE, `hookgate-${version}.sbom.cdx.json`),
  };
}
