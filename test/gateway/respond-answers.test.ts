// What a respond node (Wait for Response Node) may put on the answer: never a status
// that is not final (a 1xx).
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { trigger, workflow } from '../support/manifests.ts';

let rt: TestRuntime;
let port: number;
const NAMES = ['upgrade', 'early'];

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
      ...NAMES.map((name) =>
        trigger(name, {
          workflowRef: { name },
          pathSegment: 'default',
          response: { mode: 'waitForResponseNode' },
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
});
