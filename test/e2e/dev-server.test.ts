// The embedded server as a user runs it: real HTTP on loopback, manifests edited on
// disk while it serves. A broken manifest is reported and never takes the rest down.
import { spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { HOSTILE_YAML, secret, trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';

/** Consecutive ports free at load time for the processes this suite starts. */
const BASE_PORT = await freePortRun(8);

describe('dev server over a watched directory', () => {
  let rt: TestRuntime;
  let url: string;
  /** The admin listener: read API on loopback, no auth (the dev default). */
  let admin: string;
  beforeAll(async () => {
    rt = await startRuntime();
    url = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    admin = await rt.admin.listen({ port: 0, host: '127.0.0.1' });
    await rt.apply(
      'orders.yaml',
      [workflow('orders'), trigger('ingest', { pathSegment: 'ingest' })],
      ['ingest'],
    );
  });
  afterAll(() => rt.stop());
  const post = (path: string) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });

  it('serves what the directory declares', async () => {
    expect((await post('/webhook/default_production_orders/ingest')).status).toBe(202);
  });

  it('picks up edits without a restart (the watcher, not a manual reload)', async () => {
    await rt.files.write(
      'orders.yaml',
      workflow('orders'),
      trigger('ingest', { pathSegment: 'intake' }),
    );
    await eventually(async () => {
      expect((await post('/webhook/default_production_orders/intake')).status).toBe(202);
      expect((await post('/webhook/default_production_orders/ingest')).status).toBe(404);
    });
  });

  it('reports a broken manifest with file, field path and reason, and keeps the last good state', async () => {
    await rt.files.write(
      'orders.yaml',
      workflow('orders'),
      trigger('ingest', { pathSegment: 'intake', methods: ['POST', 'FETCH'] }),
    );
    const errors = await eventually(async () => {
      const res = await fetch(`${admin}/api/manifests/errors`);
      const body = (await res.json()) as {
        items: { file: string; field: string; message: string; object?: string }[];
      };
      if (body.items.length === 0) throw new Error('no error yet');
      return body.items;
    });
    // At the line and column of the bad value, as `hookgate validate` says it.
    const lines = (await readFile(join(rt.files.dir, 'orders.yaml'), 'utf8')).split('\n');
    const line = lines.findIndex((l) => l.includes('FETCH'));
    expect(errors).toEqual([
      expect.objectContaining({
        file: 'orders.yaml',
        document: 1,
        line: line + 1,
        column: (lines[line] ?? '').indexOf('FETCH') + 1,
        object: 'WebhookTrigger default/ingest',
        field: 'spec.methods[1]',
        message: expect.stringContaining('supported values'),
      }),
    ]);
    // Still serving the last good version.
    expect((await post('/webhook/default_production_orders/intake')).status).toBe(202);
  });

  it('a second object of the same name is reported at its own document and name', async () => {
    await rt.files.write(
      'zz-again.yaml',
      trigger('other', { pathSegment: 'other' }),
      workflow('orders'),
    );
    const clash = await eventually(async () => {
      const res = await fetch(`${admin}/api/manifests/errors`);
      const body = (await res.json()) as { items: { file: string; message: string }[] };
      const found = body.items.find((e) => e.message.includes('already defined'));
      if (!found) throw new Error('no clash reported yet');
      return found;
    });
    const lines = (await readFile(join(rt.files.dir, 'zz-again.yaml'), 'utf8')).split('\n');
    const second = lines.findIndex(
      (l, i) => i > lines.indexOf('---') && l.trim() === 'name: orders',
    );
    expect(second).toBeGreaterThan(0);
    expect(clash).toMatchObject({
      file: 'zz-again.yaml',
      document: 1,
      line: second + 1,
      object: 'Workflow default/orders',
      field: 'metadata.name',
    });
    await rt.files.remove('zz-again.yaml');
  });

  it('survives a file that is not YAML at all, and an unrelated file keeps working', async () => {
    await rt.files.writeText('orders.yaml', 'kind: [unclosed\n  : : :');
    await rt.files.write(
      'hello.yaml',
      workflow('hello', { environment: 'development' }),
      trigger('hello', { workflowRef: { name: 'hello' } }),
    );
    await eventually(async () => {
      expect((await post('/webhook/default_development_hello/default')).status).toBe(202);
    });
    expect((await post('/webhook/default_production_orders/intake')).status).toBe(202);
    const res = await fetch(`${admin}/api/manifests/errors`);
    const body = (await res.json()) as { items: { file: string; message: string }[] };
    expect(body.items).toEqual([
      expect.objectContaining({
        file: 'orders.yaml',
        message: expect.stringContaining('YAML syntax error'),
      }),
    ]);
  });

  it('an alias bomb or nesting thousands deep in one file is reported, and the reload still applies the others', async () => {
    await rt.files.writeText('bomb.yaml', HOSTILE_YAML.aliasBomb);
    await rt.files.writeText('deep.yaml', HOSTILE_YAML.nested(5_000));
    await rt.files.write(
      'later.yaml',
      workflow('later', { environment: 'development' }),
      trigger('later', { workflowRef: { name: 'later' } }),
    );
    await eventually(async () => {
      expect((await post('/webhook/default_development_later/default')).status).toBe(202);
    });
    const res = await fetch(`${admin}/api/manifests/errors`);
    const body = (await res.json()) as { items: { file: string; message: string }[] };
    expect(body.items).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          file: 'bomb.yaml',
          message: expect.stringContaining('aliases expand too far'),
        }),
        expect.objectContaining({
          file: 'deep.yaml',
          message: expect.stringContaining('nesting too deep'),
        }),
      ]),
    );
    await Promise.all(['bomb.yaml', 'deep.yaml', 'later.yaml'].map((f) => rt.files.remove(f)));
  });

  it('lists triggers and workflows with their conditions', async () => {
    const res = await fetch(`${admin}/api/triggers`);
    const items = (
      (await res.json()) as {
        items: { name: string; status: { conditions: { type: string; status: string }[] } }[];
      }
    ).items;
    const hello = items.find((t) => t.name === 'hello');
    expect(hello?.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
    const one = await fetch(`${admin}/api/workflows/default/hello`);
    expect(one.status).toBe(200);
    expect((await fetch(`${admin}/api/workflows/default/nope`)).status).toBe(404);
  });

  it('a Secret edit (key rotation) takes effect without touching the trigger', async () => {
    const auth = { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } };
    await rt.files.write(
      'secure.yaml',
      workflow('secure'),
      trigger('secure', { workflowRef: { name: 'secure' }, auth }),
      secret('keys', { acme: 'old-key' }),
    );
    const call = (key: string) =>
      fetch(`${url}/webhook/default_production_secure/default`, {
        method: 'POST',
        headers: { 'x-api-key': key },
      });
    await eventually(async () => expect((await call('old-key')).status).toBe(202));
    await rt.files.write(
      'secure.yaml',
      workflow('secure'),
      trigger('secure', { workflowRef: { name: 'secure' }, auth }),
      secret('keys', { acme: 'new-key' }),
    );
    await eventually(async () => {
      expect((await call('new-key')).status).toBe(202);
      expect((await call('old-key')).status).toBe(401);
    });
  });
});

describe('npm start on the shipped examples', () => {
  let child: ChildProcess;
  let dir: string;
  const port = BASE_PORT;
  beforeAll(async () => {
    // A copy, so the test never edits the real examples.
    dir = await mkdtemp(join(tmpdir(), 'hookgate-examples-'));
    await cp(join(import.meta.dirname, '..', '..', 'examples'), dir, { recursive: true });
    child = spawn(
      process.execPath,
      [
        'roles/cli.ts',
        'dev',
        '--dir',
        dir,
        '--port',
        String(port),
        '--admin-port',
        String(port + 1),
      ],
      {
        cwd: join(import.meta.dirname, '..', '..'),
        env: { ...process.env, LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      },
    );
    await eventually(
      async () => expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200),
      15_000,
      100,
    );
  });
  afterAll(async () => {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await rm(dir, { recursive: true, force: true });
  });

  it('every example is admitted and every trigger is Ready (OAuth providers are only called at request time)', async () => {
    await eventually(async () => {
      const errors = (await (
        await fetch(`http://127.0.0.1:${port + 1}/api/manifests/errors`)
      ).json()) as { items: unknown[] };
      expect(errors.items).toEqual([]);
      const triggers = (await (
        await fetch(`http://127.0.0.1:${port + 1}/api/triggers`)
      ).json()) as {
        items: { name: string; status: { conditions?: { type: string; status: string }[] } }[];
      };
      const ready = triggers.items.map((t) => [
        t.name,
        t.status.conditions?.find((c) => c.type === 'Ready')?.status,
      ]);
      expect(ready).toEqual(triggers.items.map((t) => [t.name, 'True']));
      expect(triggers.items.length).toBeGreaterThanOrEqual(5);
    }, 10_000);
  });

  it('the README quickstart requests work as written', async () => {
    const hello = await fetch(
      `http://127.0.0.1:${port}/webhook/default_development_hello/default`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"name":"Ada"}',
      },
    );
    expect(hello.status).toBe(202);
    // Its links.self, on the same port and without an admin token, shows the execution.
    const { executionId, links } = (await hello.json()) as {
      executionId: string;
      links: { self: string };
    };
    const followed = await fetch(`http://127.0.0.1:${port}${links.self}`);
    expect(followed.status).toBe(200);
    expect(await followed.json()).toMatchObject({ executionId });
    const orders = await fetch(
      `http://127.0.0.1:${port}/webhook/default_production_orders/ingest`,
      {
        method: 'POST',
        headers: { 'x-api-key': 'demo-key-acme-0001', 'content-type': 'application/json' },
        body: '{"orderId":"A-1001","total":1250,"currency":"EUR"}',
      },
    );
    expect(orders.status).toBe(200);
    expect(await orders.json()).toEqual({
      orderId: 'A-1001',
      total: 1250,
      currency: 'EUR',
      customer: 'acme',
      decision: 'manual-review',
    });
  });

  it('a port already taken: exit 1, and the fatal line names the setting that moves it', async () => {
    const run = (args: string[], env: Record<string, string> = {}) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const second = spawn(process.execPath, ['roles/cli.ts', ...args], {
          cwd: join(import.meta.dirname, '..', '..'),
          env: { ...process.env, LOG_LEVEL: 'warn', ...env },
        });
        let out = '';
        second.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        second.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
        second.once('exit', (code) => resolve({ code, out }));
      });
    const webhook = await run(['dev', '--dir', dir, '--port', String(port), '--admin-port', '0']);
    expect(webhook.code).toBe(1);
    expect(webhook.out).toContain(
      `127.0.0.1:${port} is already in use; choose another with --port (PORT)`,
    );
    const admin = await run(['dev', '--dir', dir, '--port', '0', '--admin-port', String(port + 1)]);
    expect(admin.code).toBe(1);
    expect(admin.out).toContain(`is already in use; choose another with --admin-port (ADMIN_PORT)`);
    // A worker opens no admin listener: its probes' METRICS_PORT is the one to move,
    // even when it equals the admin port its settings default to.
    const worker = await run(['worker'], {
      REDIS_URL: 'redis://127.0.0.1:1',
      METRICS_PORT: String(port),
      ADMIN_PORT: String(port),
    });
    expect(worker.code).toBe(1);
    expect(worker.out).toContain(`is already in use; choose another with METRICS_PORT`);
  });

  it('SIGTERM shuts down cleanly', async () => {
    await writeFile(join(dir, 'extra.yaml'), '');
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    child = spawn('true');
  });
});
