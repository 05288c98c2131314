// `hookgate test` against a server that answers JSON of another shape (a --server that
// is not the hookgate admin listener): exit 3 with a sentence, never a TypeError's
// stack trace.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { hookgate } from './run.ts';

describe('hookgate test against a server that is not hookgate', { timeout: 180_000 }, () => {
  it('exits 3 saying the answer is not a test result, with no stack trace', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'ok', items: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const run = await hookgate(['test', 'default/hello'], {
        env: { HOOKGATE_SERVER: `http://127.0.0.1:${port}` },
      });
      expect(run.code).toBe(3);
      expect(run.stderr).toContain(
        'hookgate test: the server answered with something that is not a test result',
      );
      expect(run.stderr).not.toMatch(/TypeError|\n\s+at /);
    } finally {
      server.close();
    }
  });
});
