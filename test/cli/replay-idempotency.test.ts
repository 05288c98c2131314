// `hookgate replay` sends an Idempotency-Key, one per invocation unless
// --idempotency-key names it, and when the answer is lost (exit 3) says which key to
// retry with, so that the retry cannot start the replay twice.
import { createServer, type IncomingHttpHeaders, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { hookgate } from './run.ts';

const servers: ReturnType<typeof createServer>[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

/** A server answering with `answer`; the headers of every request it got. */
async function serve(answer: RequestListener) {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    answer(req, res);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const accepted =
  (replayed = false): RequestListener =>
  (_req, res) => {
    res.writeHead(202, {
      'content-type': 'application/json',
      ...(replayed ? { 'idempotent-replayed': 'true' } : {}),
    });
    res.end(JSON.stringify({ executionId: 'new-1', status: 'queued', replayOf: 'old-1' }));
  };

describe('hookgate replay and its Idempotency-Key', { timeout: 120_000 }, () => {
  it('a new key each invocation, or the one --idempotency-key names', async () => {
    const { url, seen } = await serve(accepted());
    const env = { HOOKGATE_SERVER: url };
    const runs = await Promise.all([
      hookgate(['replay', 'old-1'], { env }),
      hookgate(['replay', 'old-1'], { env }),
      hookgate(['replay', 'old-1', '--idempotency-key', 'nightly-42'], { env }),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const keys = seen.map((h) => h['idempotency-key']);
    expect(keys).toHaveLength(3);
    expect(keys).toContain('nightly-42');
    const made = keys.filter((k) => k !== 'nightly-42');
    expect(made[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(made[1]).not.toBe(made[0]);
    const bad = await hookgate(['replay', 'old-1', '--idempotency-key', 'two words'], { env });
    expect(bad.code).toBe(2);
    expect(seen).toHaveLength(3);
  });

  it('an answer lost: exit 3 naming the key to retry with', async () => {
    const { url, seen } = await serve(() => undefined);
    const run = await hookgate(
      ['replay', 'old-1', '--allow-recreated', '--request-timeout', '1s'],
      {
        env: { HOOKGATE_SERVER: url },
      },
    );
    expect(run.code).toBe(3);
    const key = seen[0]?.['idempotency-key'];
    expect(key).toBeTruthy();
    expect(run.stderr).toContain(
      `The replay may have started. To retry without starting it twice: hookgate replay old-1 --allow-recreated --idempotency-key ${String(key)}`,
    );
  });

  it("a replay that took the execution's dead-letter entry says so, the id alone on stdout", async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ executionId: 'new-2', replayOf: 'old-2', deadLetter: 'taken' }));
    });
    const run = await hookgate(['replay', 'old-2'], { env: { HOOKGATE_SERVER: url } });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('new-2\n');
    expect(run.stderr).toBe('its dead-letter entry was taken: the replay stands for its retry\n');
  });

  it('the retry command quotes a key or an id the shell would read otherwise', async () => {
    const { url } = await serve(() => undefined);
    const run = await hookgate(
      ['replay', 'old 1', '--idempotency-key', "it's;$(id)", '--request-timeout', '1s'],
      { env: { HOOKGATE_SERVER: url } },
    );
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`hookgate replay 'old 1' --idempotency-key 'it'\\''s;$(id)'`);
  });

  it('an answer the key had already: says no new execution started, prints its id', async () => {
    const { url } = await serve(accepted(true));
    const run = await hookgate(['replay', 'old-1', '--idempotency-key', 'k'], {
      env: { HOOKGATE_SERVER: url },
    });
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe('new-1');
    expect(run.stderr).toContain(
      'replayed before under Idempotency-Key k: no new execution started',
    );
  });
});
