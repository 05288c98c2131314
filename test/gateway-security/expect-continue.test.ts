// Expect: 100-continue (RFC 9110 §10.1.1): the gateway invites the body only once the
// request is authenticated and its size accepted. Node used to send 100 Continue
// before any hook ran, so a client without credentials was told to upload its body and
// then got 401. Raw sockets: the interim answer is visible only there.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let port = 0;
let adminPort = 0;
const path = '/webhook/default_production_echo/keyed';

beforeAll(async () => {
  rt = await startRuntime();
  port = Number(new URL(await rt.app.listen({ port: 0, host: '127.0.0.1' })).port);
  adminPort = Number(new URL(await rt.admin.listen({ port: 0, host: '127.0.0.1' })).port);
  await rt.apply(
    'continue.yaml',
    [
      secret('keys', { acme: 'key-acme-123456' }),
      workflow('echo', { nodes: [{ id: 'out', type: 'transform', expression: 'body' }] }),
      trigger('keyed', {
        workflowRef: { name: 'echo' },
        pathSegment: 'keyed',
        auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
        maxBodyBytes: 1024,
      }),
    ],
    ['keyed'],
  );
});
afterAll(() => rt.stop());

/**
 * Sends the head of a request with Expect: 100-continue; sends the body only when 100
 * comes. Resolves with everything the server wrote once it closes or 1.5 s pass.
 */
function expectContinue(to: number, head: string, body: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(to, '127.0.0.1');
    let got = '';
    const done = () => {
      socket.destroy();
      resolve(got);
    };
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      if (got.startsWith('HTTP/1.1 100') && got.endsWith('\r\n\r\n') && !got.includes('HTTP/1.1 2'))
        socket.write(body);
    });
    socket.on('close', done);
    socket.on('error', done);
    setTimeout(done, 1_500);
    socket.write(head);
  });
}

const head = (extra: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
  `Content-Length: ${length}\r\nExpect: 100-continue\r\n${extra}Connection: close\r\n\r\n`;

describe('Expect: 100-continue', () => {
  it('no credentials: the final 401, never an invitation to send the body', async () => {
    const got = await expectContinue(port, head('', 2), '{}');
    expect(got).not.toContain('100 Continue');
    expect(got).toMatch(/^HTTP\/1\.1 401/);
  });

  it('a declared body over the limit: 413 at once, without 100', async () => {
    const got = await expectContinue(port, head('X-API-Key: key-acme-123456\r\n', 5_000), '');
    expect(got).not.toContain('100 Continue');
    expect(got).toMatch(/^HTTP\/1\.1 413/);
  });

  it('authenticated and within the limit: 100, then the answer to the body', async () => {
    const got = await expectContinue(port, head('X-API-Key: key-acme-123456\r\n', 8), '{"a":1}\n');
    expect(got).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 202/);
  });

  it('the admin listener: 100 once authenticated (open here), then the answer', async () => {
    const body = '{"body":{"a":1}}';
    const got = await expectContinue(
      adminPort,
      `POST /api/triggers/default/keyed/test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
      body,
    );
    expect(got).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 /);
  });
});
