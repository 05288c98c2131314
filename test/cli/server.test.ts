// The server-facing commands against a dev server spawned as a user runs it (`hookgate
// dev` over a copy of the examples): get, test, events, openapi, replay, and the exit
// codes of a refusal (1) and of a server that is not there (3).
import { spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.ts';
import { hookgate, ROOT } from './run.ts';
import { freePortRun } from '../support/ports.ts';

let child: ChildProcess;
let dir: string;
const port = await freePortRun(8);
const server = `http://127.0.0.1:${port + 1}`;
const webhooks = `http://127.0.0.1:${port}`;
const env = { HOOKGATE_SERVER: server };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hookgate-cli-'));
  await cp(join(ROOT, 'examples'), dir, { recursive: true });
  child = spawn(
    process.execPath,
    ['roles/cli.ts', 'dev', '--dir', dir, '--port', String(port), '--admin-port', String(port + 1)],
    { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: 'ignore' },
  );
  await eventually(
    async () => {
      const res = await fetch(`${server}/api/triggers`);
      const body = (await res.json()) as {
        items: { status: { conditions?: { type: string; status: string }[] } }[];
      };
      expect(body.items.length).toBeGreaterThan(0);
      for (const t of body.items)
        expect(t.status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    },
    60_000,
    200,
  );
}, 90_000);
afterAll(async () => {
  child?.kill('SIGTERM');
  if (child) await new Promise((r) => child.once('exit', r));
  await rm(dir, { recursive: true, force: true });
});

describe('against the dev server', { timeout: 180_000 }, () => {
  it('get triggers and workflows: kubectl-style tables and JSON', async () => {
    const [triggers, workflows, one, missing] = await Promise.all([
      hookgate(['get', 'triggers', '--server', server]),
      hookgate(['get', 'workflows', '-o', 'json'], { env }),
      hookgate(['get', 'trigger', 'hello', '-n', 'default'], { env }),
      hookgate(['get', 'triggers', 'nope'], { env }),
    ]);
    expect(triggers.code).toBe(0);
    const lines = triggers.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAMESPACE\s+NAME\s+WORKFLOW\s+METHODS\s+MODE\s+READY\s+URL\s+AGE$/);
    expect(lines.find((l) => /^default\s+hello\s/.test(l))).toMatch(
      /^default\s+hello\s+hello\s+GET,POST\s+immediateAck\s+True\s+http:\/\/localhost:\d+\/webhook\/default_development_hello\/default\s+\d+[smhd]$/,
    );
    expect(workflows.code).toBe(0);
    const items = (JSON.parse(workflows.stdout) as { items: { name: string }[] }).items;
    expect(items.map((w) => w.name)).toContain('orders');
    expect(one.stdout.trim().split('\n')).toHaveLength(2);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('trigger "nope" not found');
  });

  it('get -o wide: workflows, like triggers, show why they are (not) ready in STATUS', async () => {
    const [workflows, triggers] = await Promise.all([
      hookgate(['get', 'workflows', '-o', 'wide'], { env }),
      hookgate(['get', 'triggers', '-o', 'wide'], { env }),
    ]);
    expect(workflows.code).toBe(0);
    const lines = workflows.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/\sWORKFLOW ID\s+STATUS$/);
    expect(lines.find((l) => /^default\s+hello\s/.test(l))).toMatch(
      /\sdefault_development_hello\s+Published as default_development_hello$/,
    );
    expect(triggers.stdout.split('\n')[0]).toMatch(/\sAGE\s+STATUS$/);
  });

  it('test sends a request and prints the answer; get executions lists the run', async () => {
    const run = await hookgate(['test', 'default/hello', '-X', 'post', '-d', '{"name":"cli"}'], {
      env,
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^POST \/webhook\/default_development_hello\/default -> 202 \(/);
    const id = /"executionId": "([^"]+)"/.exec(run.stdout)?.[1];
    expect(id).toBeDefined();
    const list = await hookgate(['get', 'executions', '-o', 'wide'], { env });
    expect(list.code).toBe(0);
    expect(list.stdout.split('\n')[0]).toMatch(
      /^ID\s+TRIGGER\s+STATUS\s+DURATION\s+AGE\s+WORKFLOW\s+ATTEMPT$/,
    );
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+default/hello\\s+\\w+`, 'm'));
  });

  it("test on a bearer endpoint, as docs/cli.md shows it: the example's saved token answers", async () => {
    const run = await hookgate(
      [
        'test',
        'default/payments-notify',
        '-p',
        'provider=stripe',
        '-H',
        'X-Trace: 1',
        '-o',
        'json',
      ],
      { env },
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as {
      request: { url: string; headers: Record<string, string> };
      response: { statusCode: number; body: unknown };
    };
    expect(out.request.url).toBe('/webhook/default_staging_payments/notify/stripe');
    expect(out.request.headers).toEqual({ 'x-trace': '1', authorization: '[redacted]' });
    expect(out.response.statusCode).toBe(200);
    expect(out.response.body).toEqual({ provider: 'stripe' });
  });

  it('test: a trigger that is not deployed is refused with the problem (exit 1)', async () => {
    const run = await hookgate(['test', 'default/nope'], { env });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      'No webhook endpoint at this path: WebhookTrigger default/nope is not deployed (404 HG_ERR_ROUTE_NOT_FOUND)',
    );
  });

  it('events tails the live stream: a request and its response', async () => {
    const tail = spawn(
      process.execPath,
      ['roles/cli.ts', 'events', 'default/hello', '-c', '2', '-o', 'json', '--timeout', '120'],
      {
        cwd: ROOT,
        env: { ...process.env, ...env },
      },
    );
    let stdout = '';
    let stderr = '';
    tail.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    tail.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => tail.once('exit', (code) => r(code)));
    await eventually(() => expect(stderr).toContain('streaming default/hello'), 120_000, 100);
    const res = await fetch(`${webhooks}/webhook/default_development_hello/default`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"events"}',
    });
    expect(res.status).toBe(202);
    expect(await exited).toBe(0);
    const events = stdout
      .trim()
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { event: string; data: { method?: string; statusCode?: number } },
      );
    expect(events.map((e) => e.event)).toEqual(['request', 'response']);
    expect(events[1]?.data.statusCode).toBe(202);
  });

  it('openapi prints the served document, as JSON or YAML', async () => {
    const [json, yaml, all] = await Promise.all([
      hookgate(['openapi', 'default/hello'], { env }),
      hookgate(['openapi', 'hello', '-o', 'yaml'], { env }),
      hookgate(['openapi', '--all'], { env }),
    ]);
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(['/webhook/default_development_hello/default']);
    expect(yaml.stdout).toContain('openapi: 3.1.0');
    expect(Object.keys((JSON.parse(all.stdout) as { paths: object }).paths).length).toBeGreaterThan(
      1,
    );
  });

  it('replay runs an execution again and prints the new id; an unknown one is refused (exit 1)', async () => {
    const first = await hookgate(['test', 'default/hello', '-X', 'POST', '-o', 'json'], { env });
    const id = (JSON.parse(first.stdout) as { response: { body: { executionId: string } } })
      .response.body.executionId;
    const run = await hookgate(['replay', id], { env });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    // A new execution that records what it replays (docs/retries-and-replay.md).
    const newId = run.stdout.trim();
    expect(newId).not.toBe(id);
    const res = await fetch(`${server}/api/executions/${newId}`);
    expect(((await res.json()) as { replayOf?: string }).replayOf).toBe(id);
    const missing = await hookgate(['replay', 'no-such-execution'], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('(404 HG_ERR_EXECUTION_NOT_FOUND)');

    // The trigger's manifest taken out of the folder and put back: the same trigger (the
    // directory source derives its uid from its kind, namespace and name), so its
    // earlier request is replayed as before. (A trigger re-created on a cluster is
    // another: test/cli/replay-recreated.test.ts.)
    const hello = await readFile(join(dir, 'hello.yaml'), 'utf8');
    const endpoint = `${webhooks}/webhook/default_development_hello/default`;
    const served = async () => (await fetch(endpoint, { method: 'POST' })).status;
    await writeFile(join(dir, 'hello.yaml'), hello.split('\n---\n')[0] as string);
    await eventually(async () => expect(await served()).toBe(404), 20_000);
    await writeFile(join(dir, 'hello.yaml'), hello);
    await eventually(async () => expect(await served()).toBe(202), 20_000);
    const again = await hookgate(['replay', id], { env });
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    expect(again.stdout.trim()).not.toBe(id);
  });

  it('replay sent again with its --idempotency-key starts nothing new: the same id', async () => {
    const first = await hookgate(['test', 'default/hello', '-X', 'POST', '-o', 'json'], { env });
    const id = (JSON.parse(first.stdout) as { response: { body: { executionId: string } } })
      .response.body.executionId;
    const key = ['--idempotency-key', `retry-of-${id}`];
    const once = await hookgate(['replay', id, ...key], { env });
    expect(once.stderr).toBe('');
    expect(once.code).toBe(0);
    const twice = await hookgate(['replay', id, ...key], { env });
    expect(twice.code).toBe(0);
    expect(twice.stdout.trim()).toBe(once.stdout.trim());
    expect(twice.stderr).toContain('no new execution started');
    const list = (await (await fetch(`${server}/api/executions?limit=500`)).json()) as {
      items: { id: string; replayOf?: string }[];
    };
    expect(list.items.filter((e) => e.replayOf === id).map((e) => e.id)).toEqual([
      once.stdout.trim(),
    ]);
  });

  it('a server that is not there: exit 3; bad usage: exit 2', async () => {
    const [down, noServer] = await Promise.all([
      hookgate(['get', 'triggers', '--server', `http://127.0.0.1:${port + 2}`]),
      hookgate(['test', 'default/hello']),
    ]);
    expect(down.code).toBe(3);
    expect(down.stderr).toContain(`cannot reach http://127.0.0.1:${port + 2}: ECONNREFUSED`);
    expect(noServer.code).toBe(2);
    expect(noServer.stderr).toContain('--server <url> or HOOKGATE_SERVER');
  });

  it('get without --server and without a kubeconfig says so and names --server (exit 2)', async () => {
    // No KUBECONFIG, no ~/.kube/config (HOME is the examples' copy): client-node would
    // fall back to http://localhost:8080, the dev server's webhook port.
    const run = await hookgate(['get', 'triggers'], { env: { KUBECONFIG: '', HOME: dir } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('no kubeconfig');
    expect(run.stderr).toContain('--server http://127.0.0.1:8081');
    expect(run.stderr).not.toContain('localhost:8080');
  });

  it('a server URL that is not http(s), or a token no header can carry, is bad usage (exit 2), not "cannot reach"', async () => {
    const [ftp, crlf] = await Promise.all([
      hookgate(['get', 'triggers', '--server', 'ftp://127.0.0.1/']),
      hookgate(['get', 'triggers'], { env: { ...env, HOOKGATE_TOKEN: 'secret-1\r\nX-Evil: 1' } }),
    ]);
    expect(ftp.code).toBe(2);
    expect(ftp.stderr).toContain('--server: "ftp://127.0.0.1/" is not an http or https URL');
    expect(crlf.code).toBe(2);
    expect(crlf.stderr).toContain('the admin token holds a space or a character a header');
    expect(crlf.stderr).not.toContain('secret-1');
  });
});
