// Manifest builders for tests: valid defaults, overridable per test.
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';

export const API = 'hookgate.dev/v1alpha1';

export function workflow(
  name: string,
  spec: Record<string, unknown> = {},
  metadata: Record<string, unknown> = {},
) {
  return {
    apiVersion: API,
    kind: 'Workflow',
    metadata: { name, ...metadata },
    spec: {
      application: 'shop',
      environment: 'production',
      nodes: [{ id: 'echo', type: 'transform', expression: '$' }],
      ...spec,
    },
  };
}

export function trigger(
  name: string,
  spec: Record<string, unknown> = {},
  metadata: Record<string, unknown> = {},
) {
  return {
    apiVersion: API,
    kind: 'WebhookTrigger',
    metadata: { name, ...metadata },
    spec: { workflowRef: { name: 'orders' }, response: { mode: 'immediateAck' }, ...spec },
  };
}

export function secret(name: string, stringData: Record<string, string>) {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData };
}

export function toYaml(...docs: object[]): string {
  return docs.map((d) => stringify(d)).join('---\n');
}

/** A temporary manifest directory. */
export async function manifestDir(): Promise<{
  dir: string;
  write(file: string, ...docs: object[]): Promise<void>;
  writeText(file: string, text: string): Promise<void>;
  remove(file: string): Promise<void>;
  cleanup(): Promise<void>;
}> {
  const dir = await mkdtemp(join(tmpdir(), 'hookgate-manifests-'));
  return {
    dir,
    write: (file, ...docs) => writeFile(join(dir, file), toYaml(...docs)),
    writeText: (file, text) => writeFile(join(dir, file), text),
    remove: (file) => rm(join(dir, file), { force: true }),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Hostile YAML: an alias bomb (each of 30 lists holds the one before twice: 2^30 items
 * once expanded) and flow lists nested `depth` deep.
 */
export const HOSTILE_YAML = {
  aliasBomb: [
    'a: &a [x]',
    ...Array.from({ length: 30 }, (_v, i) => {
      const prev = i === 0 ? 'a' : `b${i - 1}`;
      return `b${i}: &b${i} [*${prev}, *${prev}]`;
    }),
  ].join('\n'),
  nested: (depth: number) => `a: ${'['.repeat(depth)}${']'.repeat(depth)}`,
};
