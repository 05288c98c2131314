// Every answer of the webhook listener is sandboxed: a workflow's body in a type a
// browser renders (text/html here) is a document of an opaque origin, so one tenant's
// page cannot read the cookies or storage of the host name it shares with the others
// and with the admin listener. A trigger's or respond node's own Content-Security-Policy
// keeps its directives but never lifts the sandbox; its X-Content-Type-Options never
// replaces nosniff. Over real HTTP (test/browser/sandboxed-answers.test.ts: in Chromium).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandboxedPolicy } from '../../runtime/gateway/response-headers.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

const PAGE =
  '<!doctype html><title>tenant</title><script>document.title = document.cookie</script>';
const HTML = JSON.stringify(PAGE);

let rt: TestRuntime;
let base: string;
const at = (name: string, segment = 'default') =>
  `${base}/webhook/default_production_${name}/${segment}`;

beforeAll(async () => {
  rt = await startRuntime();
  base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
  await rt.apply(
    'sandbox.yaml',
    [
      workflow('page', { nodes: [{ id: 'page', type: 'transform', expression: HTML }] }),
      workflow('respond', {
        nodes: [
          {
            id: 'answer',
            type: 'respond',
            expression: HTML,
            headers: {
              'Content-Security-Policy':
                "default-src 'none'; script-src 'unsafe-inline'; sandbox allow-scripts allow-same-origin allow-top-navigation",
              'X-Content-Type-Options': 'none',
              'X-Kept': 'yes',
            },
          },
        ],
      }),
      trigger('page', {
        workflowRef: { name: 'page' },
        methods: ['GET'],
        response: { mode: 'waitForCompletion', contentType: 'text/html; charset=utf-8' },
      }),
      trigger('respond', {
        workflowRef: { name: 'respond' },
        methods: ['GET'],
        response: { mode: 'waitForResponseNode', contentType: 'text/html' },
      }),
      trigger('custom', {
        workflowRef: { name: 'page' },
        pathSegment: 'custom',
        methods: ['GET'],
        response: {
          mode: 'waitForCompletion',
          contentType: 'image/svg+xml',
          headers: {
            custom: [
              { name: 'Content-Security-Policy', value: "default-src 'self'" },
              { name: 'X-Content-Type-Options', value: 'sniff' },
            ],
          },
        },
      }),
      trigger('ack', {
        workflowRef: { name: 'page' },
        pathSegment: 'ack',
        response: { mode: 'ackSubscribe' },
      }),
    ],
    ['page', 'respond', 'custom', 'ack'],
  );
});
afterAll(async () => {
  await rt.stop();
});

function expectSandboxed(res: Response, policy = 'sandbox'): void {
  expect(res.headers.get('content-security-policy')).toBe(policy);
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
}

describe('answers of the webhook listener are sandboxed', () => {
  it("a workflow's HTML output: CSP sandbox (no scripts, opaque origin) and nosniff", async () => {
    const res = await fetch(at('page'));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await res.text()).toBe(PAGE);
    expectSandboxed(res);
  });

  it("a respond node's own CSP keeps its directives; allow-same-origin and top navigation are dropped", async () => {
    const res = await fetch(at('respond'));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(PAGE);
    expectSandboxed(res, "default-src 'none'; script-src 'unsafe-inline'; sandbox allow-scripts");
    expect(res.headers.get('x-kept')).toBe('yes');
  });

  it("a trigger's custom CSP without a sandbox gets one; its X-Content-Type-Options is left out", async () => {
    const res = await fetch(at('page', 'custom'));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expectSandboxed(res, "default-src 'self'; sandbox");
  });

  it('acknowledgements, execution links, problems and unknown paths are sandboxed too', async () => {
    const ack = await fetch(at('page', 'ack'), { method: 'POST' });
    expect(ack.status).toBe(202);
    expectSandboxed(ack);
    const { links } = (await ack.json()) as { links: { self: string } };
    const link = await fetch(`${base}${links.self}`);
    expect(link.status).toBe(200);
    expectSandboxed(link);
    const refused = await fetch(at('page'), { method: 'DELETE' });
    expect(refused.status).toBe(405);
    expectSandboxed(refused);
    const unknown = await fetch(`${base}/webhook/nobody/here`);
    expect(unknown.status).toBe(404);
    expectSandboxed(unknown);
  });
});

/** The head of the answer to a request written as is (what fetch would not send). */
function rawAnswerHead(request: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer.split('\r\n\r\n')[0] ?? ''));
  });
}

describe('answers given before any route or hook are sandboxed too', () => {
  it.each([
    [
      'a URL the router refuses',
      'GET /webhook/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      400,
    ],
    [
      'an Expect it cannot meet',
      'GET / HTTP/1.1\r\nHost: x\r\nExpect: nope\r\nConnection: close\r\n\r\n',
      417,
    ],
    ['an HTTP/1.1 request without Host', 'GET / HTTP/1.1\r\nConnection: close\r\n\r\n', 400],
    ['a request line the parser refuses', 'GET / HTTP/1.1 junk\r\nHost: x\r\n\r\n', 400],
  ])('%s', async (_what, request, status) => {
    const head = (await rawAnswerHead(request)).toLowerCase();
    expect(head).toMatch(new RegExp(`^http/1.1 ${status} `));
    expect(head).toContain('\r\ncontent-security-policy: sandbox\r\n');
    expect(head).toContain('\r\nx-content-type-options: nosniff\r\n');
  });
});

describe('sandboxedPolicy', () => {
  it.each([
    ['', 'sandbox'],
    ['sandbox', 'sandbox'],
    ['SANDBOX Allow-Same-Origin', 'sandbox'],
    ["default-src 'self'", "default-src 'self'; sandbox"],
    [
      "default-src 'self';; sandbox allow-forms allow-scripts ",
      "default-src 'self'; sandbox allow-forms allow-scripts",
    ],
    // Every policy of the value ends with the one sandbox, whichever a browser enforces.
    [
      "default-src 'self', img-src *; sandbox allow-scripts allow-same-origin",
      "default-src 'self'; sandbox allow-scripts, img-src *; sandbox allow-scripts",
    ],
    // Two sandboxes: what both allow (browsers enforce every policy).
    ['sandbox allow-scripts allow-forms, sandbox allow-forms allow-popups', 'sandbox allow-forms'],
    [
      'sandbox allow-popups-to-escape-sandbox allow-storage-access-by-user-activation allow-top-navigation-by-user-activation allow-whatever',
      'sandbox',
    ],
  ])('%j -> %j', (given, expected) => {
    expect(sandboxedPolicy(given)).toBe(expected);
  });
});
