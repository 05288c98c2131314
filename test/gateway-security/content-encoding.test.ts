// A body with a content coding (gzip, br, deflate) is refused with 415 and
// `Accept-Encoding: identity` (RFC 9110 15.5.16, 12.5.3): the gateway decodes none, and a
// gzipped JSON body used to fail as malformed JSON (400), a gzipped binary one reached
// the workflow still compressed, labelled as its Content-Type.
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let base = '';
const path = '/webhook/default_production_echo/plain';

beforeAll(async () => {
  rt = await startRuntime();
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'encoding.yaml',
    [
      workflow('echo', { nodes: [{ id: 'out', type: 'transform', expression: 'body' }] }),
      trigger('plain', {
        workflowRef: { name: 'echo' },
        pathSegment: 'plain',
        response: { mode: 'waitForCompletion' },
      }),
    ],
    ['plain'],
  );
});
afterAll(() => rt.stop());

const post = (headers: Record<string, string>, body: Buffer | string) =>
  fetch(base + path, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });

describe('Content-Encoding', () => {
  it('gzip, br, a list of codings, any case: 415 unsupported-media-type with Accept-Encoding: identity, no execution', async () => {
    const gz = gzipSync(Buffer.from('{"a":1}'));
    for (const [encoding, type] of [
      ['gzip', 'application/json'],
      ['GZIP', 'application/json'],
      ['br', 'application/octet-stream'],
      ['identity, gzip', 'application/json'],
      ['deflate', 'text/plain'],
    ] as const) {
      const res = await post({ 'content-type': type, 'content-encoding': encoding }, gz);
      expect(res.status, encoding).toBe(415);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(res.headers.get('accept-encoding')).toBe('identity');
      const problem = (await res.json()) as { type: string; detail: string };
      expect(problem.type).toMatch(/unsupported-media-type$/);
      expect(problem.detail).toContain('Content-Encoding');
    }
    expect((await rt.engine.list({})).length).toBe(0);
  });

  it('identity, or an empty header, is a body as sent', async () => {
    for (const encoding of ['identity', ' Identity ', '']) {
      const res = await post(
        { 'content-type': 'application/json', 'content-encoding': encoding },
        '{"a":1}',
      );
      expect(res.status, JSON.stringify(encoding)).toBe(200);
      expect(await res.json()).toEqual({ a: 1 });
    }
  });
});
