// What a respond node (Wait for Response Node) and a trigger's custom headers may put on
// the answer: never a status that is not final (a 1xx), never a hop-by-hop, framing or
// origin-wide header, never a value HTTP cannot carry (that one failed the whole answer).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let port: number;
const NAMES = ['upgrade', 'early', 'hop', 'euro', 'custom', 'vary', 'custom-vary'];

function respondWorkflow(name: string, node: Record<string, unknown>) {
  return workflow(name, {
    nodes: [{ id: 'answer', type: 'respond', expression: '{ "ok": true }', ...node }],
  });
}

beforeAll(async () => {
  rt = await startRuntime();
  const base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(base).port);
  await rt.apply(
    'respond.yaml',
    [
      respondWorkflow('upgrade', { statusCode: 200, headers: { Upgrade: 'websocket' } }),
      respondWorkflow('early', { statusCode: 200 }),
      respondWorkflow('hop', {
        headers: {
          'Keep-Alive': 'timeout=1',
          Upgrade: 'h2c',
          Trailer: 'x-checksum',
          'Strict-Transport-Security': 'max-age=63072000; includeSubDomains',
          NEL: '{"report_to":"x","max_age":86400,"success_fraction":1}',
          'Report-To':
            '{"group":"x","max_age":86400,"endpoints":[{"url":"https://collector.example"}]}',
          'Service-Worker-Allowed': '/',
          'Access-Control-Allow-Origin': '*',
          'X-Kept': 'yes',
        },
      }),
      respondWorkflow('euro', {
        headers: { 'X-Price': '5 €', 'X-Bell': 'a\u0007b', 'X-Kept': 'yes' },
      }),
      respondWorkflow('custom', {}),
      respondWorkflow('vary', { headers: { Vary: 'Accept-Language' } }),
      respondWorkflow('custom-vary', {}),
      ...NAMES.map((name) =>
        trigger(name, {
          workflowRef: { name },
          pathSegment: 'default',
          response: {
            mode: 'waitForResponseNode',
            ...(name === 'custom-vary'
              ? { headers: { custom: [{ name: 'Vary', value: 'Accept' }] } }
              : {}),
          },
          cors: { enabled: true, allowedOrigins: ['https://app.example'] },
        }),
      ),
    ],
    NAMES,
  );
  // Admission refuses a 1xx respond status now; a Workflow admitted before that rule is
  // still served as registered.
  await registeredStatus('upgrade', 101);
  await registeredStatus('early', 103);
  // The CRD refused CR and LF only in custom header values until 2026-11-28: a route
  // admitted then may hold a value Node cannot send, or an origin-wide header.
  await registeredCustomHeaders('custom', [
    { name: 'X-Price', value: '5 €' },
    { name: 'NEL', value: '{"report_to":"x","max_age":86400}' },
    { name: 'X-Api-Version', value: '7' },
  ]);
});
afterAll(async () => {
  await rt.stop();
});

async function registeredStatus(name: string, statusCode: number): Promise<void> {
  const id = `default_production_${name}`;
  const registration = await rt.workflows.get(id);
  if (!registration) throw new Error(`${id} is not registered`);
  const nodes = registration.spec.nodes.map((node) => ({ ...node, statusCode }));
  await rt.workflows.put(id, { ...registration, spec: { ...registration.spec, nodes } });
  await rt.table.refresh();
}

async function registeredCustomHeaders(
  name: string,
  custom: { name: string; value: string }[],
): Promise<void> {
  const key = `default/${name}`;
  const route = await rt.routes.get(key);
  if (!route) throw new Error(`${key} has no route`);
  const response = { ...route.spec.response, headers: { ...route.spec.response.headers, custom } };
  await rt.routes.put(key, { ...route, spec: { ...route.spec, response } });
  await rt.table.refresh();
}

const post = (name: string, headers: Record<string, string> = {}) =>
  fetch(`http://127.0.0.1:${port}${url(name)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{}',
  });

/**
 * One request on a raw connection (`Connection: close` among `extra`), what came back
 * until the gateway closed it or `ms` passed (a 1xx leaves it open).
 */
function raw(path: string, extra: string, ms = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () =>
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${extra}Content-Length: 2\r\n\r\n{}`,
      ),
    );
    let text = '';
    socket.on('data', (chunk) => (text += chunk.toString('latin1')));
    socket.on('error', reject);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(text);
    }, ms);
    socket.on('end', () => {
      clearTimeout(timer);
      resolve(text);
    });
  });
}

const url = (name: string) => `/webhook/default_production_${name}/default`;

describe('respond node answers', () => {
  it('a 1xx status is never sent as the answer (101 with Upgrade would tell a proxy to tunnel)', async () => {
    const text = await raw(url('upgrade'), 'Connection: Upgrade, close\r\nUpgrade: websocket\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 500 /);
    expect(text.toLowerCase()).not.toContain('upgrade: websocket');
    expect(text).toContain('"type":"https://hookgate.dev/problems/execution-failed"');
    expect(text).toContain('not a final HTTP status');
    const early = await raw(url('early'), 'Connection: close\r\n');
    expect(early).toMatch(/^HTTP\/1\.1 500 /);
  });

  it('hop-by-hop, framing, CORS and origin-wide headers of a respond node are left out', async () => {
    const res = await post('hop');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(res.headers.get('x-kept')).toBe('yes');
    for (const name of [
      'upgrade',
      'trailer',
      'strict-transport-security',
      'nel',
      'report-to',
      'service-worker-allowed',
      'access-control-allow-origin',
    ])
      expect(res.headers.get(name), name).toBeNull();
    expect(res.headers.get('keep-alive')).not.toBe('timeout=1');
  });

  it('a respond header value HTTP cannot carry is left out; the answer is sent', async () => {
    const res = await post('euro');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(res.headers.get('x-kept')).toBe('yes');
    expect(res.headers.get('x-price')).toBeNull();
    expect(res.headers.get('x-bell')).toBeNull();
  });

  it("a trigger's custom header that cannot be sent is left out, on answers and refusals alike", async () => {
    const res = await post('custom');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-api-version')).toBe('7');
    expect(res.headers.get('x-price')).toBeNull();
    expect(res.headers.get('nel')).toBeNull();
    const refused = await post('custom', { origin: 'https://elsewhere.example' });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it("a Vary of a respond node or a trigger is added to the gateway's, not put in its place", async () => {
    const fields = (res: Response) =>
      (res.headers.get('vary') ?? '').split(',').map((field) => field.trim().toLowerCase());
    const origin = { origin: 'https://app.example' };
    const respond = await post('vary', origin);
    expect(respond.status).toBe(200);
    expect(respond.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(fields(respond)).toEqual(expect.arrayContaining(['origin', 'accept-language']));
    const custom = await post('custom-vary', origin);
    expect(fields(custom)).toEqual(expect.arrayContaining(['origin', 'accept']));
    const refused = await post('custom-vary', { origin: 'https://elsewhere.example' });
    expect(refused.status).toBe(403);
    expect(fields(refused)).toEqual(expect.arrayContaining(['origin', 'accept']));
    const preflight = await fetch(`http://127.0.0.1:${port}${url('custom-vary')}`, {
      method: 'OPTIONS',
      headers: { ...origin, 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(fields(preflight)).toEqual(
      expect.arrayContaining(['origin', 'access-control-request-method', 'accept']),
    );
    // Each field once.
    expect(new Set(fields(preflight)).size).toBe(fields(preflight).length);
  });
});
