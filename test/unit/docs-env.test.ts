// The environment variables and the documentation agree: every variable the product
// reads is named where a user looks (README, docs/, the chart's and the image's
// READMEs, values.yaml), every HOOKGATE_* variable the documentation names is read by
// something (the product, a test or a bench), and the chart's README names every
// variable its templates give the roles. A setting renamed, added or dropped on one
// side only fails here.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

/** Files under `dir` (relative to the root) whose names end with one of `ends`. */
function filesUnder(dir: string, ends: string[]): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && ends.some((end) => e.name.endsWith(end)))
    .map((e) => join(e.parentPath, e.name))
    .filter((path) => !path.includes(`${join('/', 'node_modules', '/')}`));
}

const read = (path: string) => readFileSync(path.startsWith('/') ? path : join(root, path), 'utf8');

const PRODUCT = ['api', 'operator', 'runtime', 'roles', 'cli', 'image'].flatMap((dir) =>
  filesUnder(dir, ['.ts']),
);
const ELSEWHERE = [
  ...['test', 'bench'].flatMap((dir) => filesUnder(dir, ['.ts', '.sh'])),
  '.ci/run',
  'vitest.config.ts',
];
const USER_DOCS = [
  'README.md',
  ...filesUnder('docs', ['.md']),
  'charts/hookgate/README.md',
  'charts/hookgate/values.yaml',
  'infra/README.md',
  'image/README.md',
];
/** Named in the docs but read by no hookgate code: a callback receiver's own variable. */
const NOT_OURS = new Set(['HOOKGATE_CALLBACK_SECRET']);

const HOOKGATE_NAME = /\bHOOKGATE_[A-Z0-9_]*[A-Z0-9]\b/g;
const ENV_READ = /\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\])/g;
const SHELL_READ = /\$\{?(HOOKGATE_[A-Z0-9_]*[A-Z0-9])\b/g;
/** Constants spelt like variables (HOOKGATE_KINDS), not environment variables. */
const DECLARED = /\b(?:const|let|var)\s+(HOOKGATE_[A-Z0-9_]+)\b/g;

/** Constants declared anywhere in `paths`: they are used in other files too. */
function declaredIn(paths: string[]): Set<string> {
  return new Set(
    paths.flatMap((path) => [...read(path).matchAll(DECLARED)].map((m) => m[1] as string)),
  );
}

/** Variables the files read: `env.NAME`, `env['NAME']`, shell `$NAME`, any HOOKGATE_* name. */
function variablesIn(paths: string[]): Set<string> {
  const declared = declaredIn([...PRODUCT, ...paths]);
  const names = new Set<string>();
  for (const path of paths) {
    const text = read(path);
    for (const m of text.matchAll(ENV_READ)) names.add((m[1] ?? m[2]) as string);
    if (!path.endsWith('.ts')) for (const m of text.matchAll(SHELL_READ)) names.add(m[1] as string);
    for (const [name] of text.matchAll(HOOKGATE_NAME)) if (!declared.has(name)) names.add(name);
  }
  return names;
}

const docs = USER_DOCS.map(read).join('\n');
const documented = (name: string) => new RegExp(`\\b${name}\\b`).test(docs);

describe('environment variables in the documentation', () => {
  const product = variablesIn(PRODUCT);

  it('finds the variables (the scan itself works)', () => {
    for (const name of ['REDIS_URL', 'HOOKGATE_QUEUE_SHARDS', 'HOOKGATE_STORED_BODY_BYTES'])
      expect(product).toContain(name);
    expect(product).not.toContain('HOOKGATE_KINDS');
  });

  it('documents every variable the product reads', () => {
    expect([...product].filter((name) => !documented(name)).sort()).toEqual([]);
  });

  it('names no HOOKGATE_* variable that nothing reads', () => {
    const known = new Set([...product, ...variablesIn(ELSEWHERE), ...NOT_OURS]);
    const named = new Set([...docs.matchAll(HOOKGATE_NAME)].map(([name]) => name));
    expect([...named].filter((name) => !known.has(name)).sort()).toEqual([]);
  });

  it("the chart's README names every variable the templates give the roles", () => {
    const chartReadme = read('charts/hookgate/README.md');
    const rendered = new Set(
      ['_env.tpl', '_helpers.tpl', '_analytics.tpl'].flatMap((file) =>
        [
          ...read(`charts/hookgate/templates/${file}`).matchAll(/^\s*- name: ([A-Z][A-Z0-9_]*)$/gm),
        ].map((m) => m[1] as string),
      ),
    );
    expect(rendered.size).toBeGreaterThan(20);
    expect([...rendered].filter((name) => !chartReadme.includes(`\`${name}\``)).sort()).toEqual([]);
  });
});
