// hookgate validate: the shipped examples pass; broken manifests fail with exit 1 and
// each problem at its file, line and field path, in text, JSON and GitHub annotations;
// path conflicts within the set report both triggers; other kinds are skipped.
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOSTILE_YAML, trigger, workflow } from '../support/manifests.ts';
import { hookgate } from './run.ts';

let dir: string;

const BROKEN = `apiVersion: hookgate.dev/v1alpha1
kind: Workflow
metadata:
  name: orders
spec:
  application: shop
  environment: production
  nodes:
    - id: a
      type: transform
      expression: '$'
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata:
  name: bad-method
spec:
  workflowRef:
    name: orders
  methods: [POST, FETCH]
  response:
    mode: immediateAck
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookTrigger
metadata:
  name: sse-201
spec:
  workflowRef:
    name: orders
  pathSegment: stream
  response:
    mode: sseStream
    statusCode: 201
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hookgate-validate-'));
  await writeFile(join(dir, 'broken.yaml'), BROKEN);
  await writeFile(
    join(dir, 'conflict.yaml'),
    [
      workflow('orders', {}, { namespace: 'shop' }),
      trigger('one', { pathSegment: 'items/:id' }, { namespace: 'shop' }),
      trigger('two', { pathSegment: 'items/:itemId' }, { namespace: 'shop' }),
      trigger('off', { pathSegment: 'items/:x', deploy: false }, { namespace: 'shop' }),
    ]
      .map((d) => stringify(d))
      .join('---\n'),
  );
  await writeFile(join(dir, 'syntax.yaml'), 'kind: [unclosed\n  : : :\n');
  // Admitted by the API server, refused by the operator (Valid=False): validate says so.
  await writeFile(
    join(dir, 'operator-checks.yaml'),
    [
      workflow('orders', {
        nodes: [
          { id: 'shape', type: 'transform', expression: '{ "a": ', next: 'gone' },
          { id: 'call', type: 'http', request: { url: 'http://169.254.169.254/latest/' } },
        ],
      }),
      trigger('keys', {
        pathSegment: 'keys',
        auth: {
          method: 'bearer',
          bearer: {
            issuer: 'https://idp.example.com/',
            audiences: ['hooks'],
            jwksUrl: 'https://metadata.google.internal/keys',
          },
        },
      }),
    ]
      .map((d) => stringify(d))
      .join('---\n'),
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// Each run is a Node process: minutes on a loaded machine are allowed, never assumed.
describe('hookgate validate', { timeout: 180_000 }, () => {
  it('passes on every shipped example, skipping the Secrets with a note', async () => {
    const run = await hookgate(['validate', 'examples']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /examples\/orders-api-key\.yaml:\d+:1: note: v1 Secret orders-api-keys is not a hookgate resource: skipped/,
    );
    expect(run.stdout).toMatch(/\d+ file\(s\), \d+ valid, 0 invalid, \d+ skipped, 0 error\(s\)/);
  });

  it('reports each error at its file, line and field path, and exits 1', async () => {
    const file = join(dir, 'broken.yaml');
    const run = await hookgate(['validate', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      `${file}:20:19: error: WebhookTrigger default/bad-method: spec.methods[1]: Unsupported value: "FETCH"`,
    );
    expect(run.stdout).toContain(
      `${file}:34:5: error: WebhookTrigger default/sse-201: spec.response.statusCode: Invalid value: an SSE stream is always answered with 200 (document 3)`,
    );
    expect(run.stdout).toContain(
      'note: v1 ConfigMap unrelated is not a hookgate resource: skipped',
    );
    expect(run.stdout).toContain('1 valid, 2 invalid, 1 skipped, 2 error(s)');
  });

  it('checks the items of a List (kubectl get -o yaml), each error at its item', async () => {
    const file = join(dir, 'list.yaml');
    await writeFile(
      file,
      `apiVersion: v1
kind: List
items:
  - apiVersion: hookgate.dev/v1alpha1
    kind: Workflow
    metadata:
      name: listed
    spec:
      nodes:
        - id: shape
          type: transform
          expression: '{ "ok": true }'
  - apiVersion: hookgate.dev/v1alpha1
    kind: WebhookTrigger
    metadata:
      name: listed
    spec:
      workflowRef:
        name: listed
      methods: [POST, FETCH]
metadata:
  resourceVersion: ""
`,
    );
    const run = await hookgate(['validate', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      `${file}:20:23: error: WebhookTrigger default/listed: spec.methods[1]: Unsupported value: "FETCH"`,
    );
    expect(run.stdout).toContain(
      `${file}:8:5: error: Workflow default/listed: spec.application: Required value`,
    );
    expect(run.stdout).toMatch(/0 valid, 2 invalid, 0 skipped, \d+ error\(s\)/);
  });

  it('reports what the operator would (node references, JSONata, unreachable URLs) at their fields', async () => {
    const file = join(dir, 'operator-checks.yaml');
    const run = await hookgate(['validate', '-o', 'json', file]);
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as { errors: { field: string; message: string }[] };
    expect(report.errors.map((e) => [e.field, e.message])).toEqual([
      ['spec.nodes[0].next', 'unknown node "gone"'],
      ['spec.nodes[0].expression', expect.stringContaining('invalid JSONata expression')],
      [
        'spec.nodes[1].request.url',
        'address 169.254.169.254 is a cloud metadata endpoint, which is never reachable',
      ],
      [
        'spec.auth.bearer.jwksUrl',
        'host metadata.google.internal is a cloud metadata service, which is never reachable',
      ],
    ]);
  });

  it("notes a respond node's headers the gateway leaves out, at their line, and still exits 0", async () => {
    const file = join(dir, 'respond-headers.yaml');
    await writeFile(
      file,
      stringify(
        workflow('answers', {
          nodes: [
            {
              id: 'reply',
              type: 'respond',
              expression: '$',
              headers: { 'X-Kept': 'yes', 'Content-Type': 'text/html', 'Set-Cookie': 'a=b' },
            },
          ],
        }),
      ),
    );
    const run = await hookgate(['validate', '-o', 'json', file]);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as {
      errors: unknown[];
      notes: { field: string; message: string; line: number }[];
    };
    expect(report.errors).toEqual([]);
    expect(report.notes.map((n) => [n.field, n.message])).toEqual([
      [
        'spec.nodes[0].headers[Content-Type]',
        "left out of the answer: the trigger's response.contentType sets the content type",
      ],
      ['spec.nodes[0].headers[Set-Cookie]', expect.stringContaining('cannot be set by a workflow')],
    ]);
    // At the header's own line, not the document's.
    expect(report.notes[0]?.line).toBeGreaterThan(5);
  });

  it('a namespace that is not a DNS label is an error, as hookgate dev and the API server say, also from -n', async () => {
    const file = join(dir, 'bad-namespace.yaml');
    const hello = workflow('hello', { nodes: [{ id: 'a', type: 'transform', expression: '$' }] });
    await writeFile(
      file,
      stringify({ ...hello, metadata: { name: 'hello', namespace: 'Bad_NS' } }),
    );
    const inFile = await hookgate(['validate', file]);
    expect(inFile.code).toBe(1);
    expect(inFile.stdout).toContain(
      'error: Workflow Bad_NS/hello: metadata.namespace: Invalid value: "Bad_NS": a DNS label',
    );
    const fromFlag = await hookgate(['validate', '-n', 'shop team', 'examples/hello.yaml']);
    expect(fromFlag.code).toBe(1);
    expect(fromFlag.stdout).toContain('metadata.namespace: Invalid value: "shop team"');
  });

  it('JSON output names file, document, line, field and reason', async () => {
    const run = await hookgate(['validate', '-o', 'json', join(dir, 'broken.yaml')]);
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as { valid: boolean; errors: Record<string, unknown>[] };
    expect(report.valid).toBe(false);
    expect(report.errors[0]).toEqual({
      file: join(dir, 'broken.yaml'),
      document: 1,
      line: 20,
      column: 19,
      object: 'WebhookTrigger default/bad-method',
      field: 'spec.methods[1]',
      message: expect.stringContaining('Unsupported value: "FETCH"'),
      reason: 'FieldValueNotSupported',
    });
  });

  it('GitHub output is one ::error workflow command per problem, escaped', async () => {
    const run = await hookgate(['validate', '--output', 'github', join(dir, 'broken.yaml')]);
    expect(run.code).toBe(1);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      `::error file=${join(dir, 'broken.yaml')},line=20,col=19,title=WebhookTrigger default/bad-method spec.methods[1]::spec.methods[1]: Unsupported value: "FETCH": supported values: "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"`,
    );
    expect(lines.filter((l) => l.startsWith('::error '))).toHaveLength(2);
    expect(lines.filter((l) => l.startsWith('::notice '))).toHaveLength(1);
  });

  it('two deployed triggers on one URL shape: both reported; an undeployed one is not', async () => {
    const run = await hookgate(['validate', join(dir, 'conflict.yaml')]);
    expect(run.code).toBe(1);
    const conflicts = run.stdout.split('\n').filter((l) => l.includes('PathConflict'));
    expect(conflicts).toHaveLength(2);
    expect(conflicts[0]).toContain(
      'WebhookTrigger shop/one: spec.pathSegment: PathConflict: /webhook/shop_production_orders/items/:id is also claimed by WebhookTrigger shop/two',
    );
    expect(conflicts[1]).toContain('WebhookTrigger shop/two');
    expect(run.stdout).not.toContain('shop/off: spec.pathSegment');
  });

  it('a YAML syntax error is reported at its line; standard input works', async () => {
    const run = await hookgate(['validate', join(dir, 'syntax.yaml')]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/syntax\.yaml:\d+:\d+: error: YAML syntax error/);
    const stdin = await hookgate(['validate', '-'], { input: stringify(workflow('ok')) });
    expect(stdin.code).toBe(0);
    expect(stdin.stdout).toContain('1 valid');
  });

  it('an alias bomb or nesting thousands deep is an error of its document, and the next document is still checked', async () => {
    const bomb = HOSTILE_YAML.aliasBomb;
    const deep = HOSTILE_YAML.nested(5_000);
    const ok = stringify(workflow('ok'));
    const file = join(dir, 'hostile.yaml');
    await writeFile(file, [bomb, deep, ok].join('\n---\n'));
    const run = await hookgate(['validate', file]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /hostile\.yaml:1:1: error: .*aliases expand too far.*\(document 1\)/,
    );
    expect(run.stdout).toMatch(/hostile\.yaml:\d+:\d+: error: .*nesting too deep.*\(document 2\)/);
    expect(run.stdout).toContain('1 valid');
  });

  it('follows symbolic links in folders: a linked file or folder is checked, a link loop read once', async () => {
    const root = await mkdtemp(join(tmpdir(), 'hookgate-links-'));
    try {
      await mkdir(join(root, 'shared'));
      await mkdir(join(root, 'set'));
      await writeFile(join(root, 'shared', 'broken.yaml'), BROKEN);
      await symlink(join(root, 'shared', 'broken.yaml'), join(root, 'set', 'linked.yaml'));
      await symlink(join(root, 'shared'), join(root, 'set', 'shared'));
      await symlink(join(root, 'set'), join(root, 'set', 'loop'));
      await symlink(join(root, 'nowhere'), join(root, 'set', 'stale-notes'));
      const run = await hookgate(['validate', join(root, 'set')]);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(1);
      // One file behind two links: read once.
      expect(run.stdout).toMatch(/1 file\(s\), 1 valid, 2 invalid, 1 skipped/);
      expect(run.stdout).toContain('spec.methods[1]: Unsupported value: "FETCH"');
      // A manifest's name linking to nothing is a missing file: bad usage, not a pass.
      await symlink(join(root, 'nowhere.yaml'), join(root, 'set', 'gone.yaml'));
      const dangling = await hookgate(['validate', join(root, 'set')]);
      expect(dangling.code).toBe(2);
      expect(dangling.stderr).toContain('gone.yaml: a link to nothing');
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("a hookgate kind without apiVersion or with a misspelt group is an error, not skipped; Argo's Workflow is skipped", async () => {
    const { apiVersion: _none, ...noVersion } = trigger('no-version') as Record<string, unknown>;
    const input = [
      noVersion,
      { ...workflow('typo'), apiVersion: 'hookgate.io/v1alpha1' },
      { ...workflow('argo'), apiVersion: 'argoproj.io/v1alpha1' },
    ]
      .map((d) => stringify(d))
      .join('---\n');
    const run = await hookgate(['validate', '-'], { input });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      'error: WebhookTrigger default/no-version: apiVersion: Required value: must be hookgate.dev/v1alpha1',
    );
    expect(run.stdout).toContain(
      'error: Workflow default/typo: apiVersion: Unsupported value: "hookgate.io/v1alpha1"',
    );
    expect(run.stdout).toContain('argoproj.io/v1alpha1 Workflow argo is not a hookgate resource');
    expect(run.stdout).toContain('0 valid, 2 invalid, 1 skipped, 2 error(s)');
  });

  it('nothing to check is a failure: empty standard input (its producer failed) or a folder without manifests', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'hookgate-empty-'));
    try {
      await writeFile(join(empty, 'README.md'), '# not a manifest\n');
      const [stdin, folder] = await Promise.all([
        hookgate(['validate', '-'], { input: '' }),
        hookgate(['validate', '-o', 'json', empty]),
      ]);
      expect(stdin.code).toBe(1);
      expect(stdin.stdout).toContain('<stdin>:1:1: error: no manifests: every file is empty');
      expect(folder.code).toBe(1);
      const report = JSON.parse(folder.stdout) as { valid: boolean; errors: { reason: string }[] };
      expect(report.valid).toBe(false);
      expect(report.errors.map((e) => e.reason)).toEqual(['NoManifests']);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('bad usage exits 2 with the reason', async () => {
    const [missing, flag, none, unknown] = await Promise.all([
      hookgate(['validate', join(dir, 'nope.yaml')]),
      hookgate(['validate', '--frobnicate', 'examples']),
      hookgate(['validate']),
      hookgate(['nonsense-command']),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nope.yaml: no such file or directory');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--frobnicate'");
    expect(none.code).toBe(2);
    expect(unknown.code).toBe(2);
  });
});

describe('hookgate crds, completion, version, openapi --file', { timeout: 180_000 }, () => {
  it('crds prints both CRDs as one YAML stream', async () => {
    const run = await hookgate(['crds']);
    expect(run.code).toBe(0);
    expect(run.stdout.match(/^kind: CustomResourceDefinition$/gm)).toHaveLength(2);
    expect(run.stdout).toContain('name: webhooktriggers.hookgate.dev');
    expect(run.stdout).not.toContain('{{');
  });

  it('completion scripts for bash and zsh; bash accepts its script', async () => {
    const bash = await hookgate(['completion', 'bash']);
    expect(bash.code).toBe(0);
    expect(bash.stdout).toContain('complete -o filenames -F _hookgate hookgate');
    const { execFileSync } = await import('node:child_process');
    const words = execFileSync(
      'bash',
      [
        '-c',
        `${bash.stdout}\nCOMP_WORDS=(hookgate get tr); COMP_CWORD=2; _hookgate; echo "\${COMPREPLY[@]}"`,
      ],
      { encoding: 'utf8' },
    );
    expect(words.trim()).toBe('triggers');
    const zsh = await hookgate(['completion', 'zsh']);
    expect(zsh.stdout.startsWith('#compdef hookgate kubectl-hookgate')).toBe(true);
    expect((await hookgate(['completion', 'fish'])).code).toBe(2);
  });

  it('version', async () => {
    const run = await hookgate(['version', '-o', 'json']);
    expect(JSON.parse(run.stdout)).toEqual({
      version: expect.any(String),
      apiVersion: 'hookgate.dev/v1alpha1',
      node: process.version,
    });
  });

  it('openapi --file builds a trigger document offline', async () => {
    const run = await hookgate(['openapi', '-f', 'examples', 'default/orders-ingest']);
    expect(run.code).toBe(0);
    const doc = JSON.parse(run.stdout) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(['/webhook/default_production_orders/ingest']);
    const missing = await hookgate(['openapi', '-f', 'examples', 'default/nope']);
    expect(missing.code).toBe(1);
  });

  it.each(['not a url', 'javascript:alert(1)', 'https://hooks.example.com/?x=1'])(
    'openapi --file --base-url %j is bad usage: no document with that server URL',
    async (baseUrl) => {
      const run = await hookgate(['openapi', '-f', 'examples', '--all', '--base-url', baseUrl]);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(`hookgate openapi: --base-url: "${baseUrl}"`);
    },
  );
});
