// The outbound policy as workflows meet it: http nodes and Async Callbacks reach a
// local receiver the cluster policy allows and are refused for one it does not; a
// workflow's spec.outbound narrows (never widens); refusals are execution errors with
// a stable code, and a refused callback is recorded with the execution.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { OutboundPolicy, WorkflowNode } from '../../api/v1alpha1/workflow.ts';
import { InProcessEngine, type InProcessEngineOptions } from '../../runtime/engine/engine.ts';
import type { LookupFn } from '../../runtime/engine/outbound/guard.ts';
import type { Execution } from '../../runtime/engine/ports.ts';
import { eventually } from '../support/eventually.ts';
import { finished, ref, trigger, workflow } from './helpers.ts';
import { startReceiver, type Receiver } from './receiver.ts';

let allowed: Receiver;
let other: Receiver;
beforeAll(async () => {
  allowed = await startReceiver(() => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: '{"ok":true}',
  }));
  other = await startReceiver(() => ({ status: 200, body: 'should not be reached' }));
});
afterAll(async () => {
  await allowed.close();
  await other.close();
});

const engines: InProcessEngine[] = [];
function engine(outbound: InProcessEngineOptions['outbound']): InProcessEngine {
  const e = new InProcessEngine({
    onInternalError: () => {},
    outbound,
    httpBackoffMs: 1,
    callbacks: { backoffMs: 1, maxAttempts: 2, timeoutMs: 2000 },
  });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close(5000)));
});

const call = (url: string): Partial<WorkflowNode> => ({
  id: 'call',
  type: 'http',
  request: { method: 'POST', url, timeout: '2s', retries: 2 },
  onError: { action: 'retry', maxRetries: 2, backoff: '1ms' },
});

async function runWith(
  e: InProcessEngine,
  url: string,
  options: { outbound?: OutboundPolicy; namespace?: string; callbackUrl?: string } = {},
): Promise<Execution> {
  const registration = workflow(
    [call(url)],
    options.outbound ? { outbound: options.outbound } : {},
  );
  if (options.namespace) registration.namespace = options.namespace;
  const started = await e.start({
    workflow: registration,
    trigger: ref(),
    input: trigger({ n: 1 }),
    ...(options.callbackUrl ? { callbackUrl: options.callbackUrl } : {}),
  });
  return finished(e, started.id);
}

function expectRefused(execution: Execution, reason: RegExp): void {
  expect(execution.status).toBe('failed');
  expect(execution.error).toMatchObject({ code: 'HG_ERR_OUTBOUND_REFUSED', nodeId: 'call' });
  expect(execution.error?.message).toMatch(reason);
  const line = execution.log.find((l) => l.nodeId === 'call');
  expect(line).toMatchObject({ status: 'failed', code: 'HG_ERR_OUTBOUND_REFUSED', attempts: 1 });
  expect(line?.error).toMatch(reason);
}

describe('http nodes under the outbound policy', () => {
  it('reach a local receiver the cluster policy allows; one it does not is refused, once', async () => {
    const e = engine({ allow: [`127.0.0.1:${allowed.port}`] });
    const ok = await runWith(e, `${allowed.url}/in`);
    expect(ok.status).toBe('succeeded');
    expect(ok.output).toMatchObject({ status: 200, body: { ok: true } });

    const refused = await runWith(e, `${other.url}/in`);
    expectRefused(refused, /address 127\.0\.0\.1 is not public \(loopback\)/);
    expect(other.received).toHaveLength(0);
  });

  it("a workflow's deny refuses what the cluster allows", async () => {
    const e = engine({ allow: ['127.0.0.0/8'] });
    const before = allowed.received.length;
    const refused = await runWith(e, `${allowed.url}/in`, {
      outbound: { deny: [`127.0.0.1:${allowed.port}`] },
    });
    expectRefused(refused, /denied by the workflow's outbound policy/);
    const narrowed = await runWith(e, `${allowed.url}/in`, {
      outbound: { allow: ['example.com'] },
    });
    expectRefused(narrowed, /not in the workflow's outbound policy's allow list/);
    expect(allowed.received.length).toBe(before);
  });

  it('a workflow cannot widen the cluster policy', async () => {
    const e = engine({ allow: [`127.0.0.1:${allowed.port}`] });
    const refused = await runWith(e, `${other.url}/in`, {
      outbound: { allow: ['127.0.0.0/8', `127.0.0.1:${other.port}`] },
    });
    expectRefused(refused, /cluster outbound policy does not allow it/);
    expect(other.received).toHaveLength(0);
  });

  it('a namespace policy narrows the workflows of its namespace only', async () => {
    const e = engine({
      allow: ['127.0.0.0/8'],
      namespaces: { locked: { deny: ['127.0.0.0/8'] } },
    });
    const refused = await runWith(e, `${allowed.url}/in`, { namespace: 'locked' });
    expectRefused(refused, /denied by the outbound policy of namespace locked/);
    expect((await runWith(e, `${allowed.url}/in`)).status).toBe('succeeded');
  });

  it('a host name allowed by a wildcard that resolves to loopback is refused (rebinding)', async () => {
    const lookup: LookupFn = (hostname, _o, cb) =>
      hostname === 'svc.ns.svc.cluster.local'
        ? cb(null, [{ address: '127.0.0.1', family: 4 }])
        : cb(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }), []);
    const e = engine({ allow: ['*.svc.cluster.local'], lookup });
    const refused = await runWith(e, `http://svc.ns.svc.cluster.local:${other.port}/in`);
    expectRefused(refused, /resolves to a refused address 127\.0\.0\.1/);
    expect(other.received).toHaveLength(0);
  });

  it('continue passes the refusal on with its code', async () => {
    const e = engine({});
    const registration = workflow([
      {
        ...call('http://10.0.0.1/'),
        onError: { action: 'continue', maxRetries: 1, backoff: '1ms' },
      },
    ]);
    const started = await e.start({ workflow: registration, trigger: ref(), input: trigger({}) });
    const execution = await finished(e, started.id);
    expect(execution.status).toBe('succeeded');
    expect(execution.output).toMatchObject({
      error: { nodeId: 'call', code: 'HG_ERR_OUTBOUND_REFUSED' },
    });
  });
});

describe('callbacks under the outbound policy', () => {
  const ok = (): Partial<WorkflowNode>[] => [
    { id: 'done', type: 'transform', expression: '{ "done": true }' },
  ];

  async function callback(
    e: InProcessEngine,
    url: string,
    outbound?: OutboundPolicy,
  ): Promise<Execution> {
    const started = await e.start({
      workflow: workflow(ok(), outbound ? { outbound } : {}),
      trigger: ref(),
      input: trigger({}),
      callbackUrl: url,
    });
    await finished(e, started.id);
    return eventually(async () => {
      const stored = await e.get(started.id);
      if (!stored?.callback) throw new Error('callback not recorded yet');
      return stored;
    });
  }

  it('reach a local receiver the cluster policy allows (plain http: the policy names it)', async () => {
    const e = engine({ allow: [`127.0.0.1:${allowed.port}`] });
    const before = allowed.received.length;
    const execution = await callback(e, `${allowed.url}/cb`);
    expect(execution.callback).toEqual({ delivered: true, attempts: 1, status: 200 });
    expect(allowed.received.length - before).toBe(1);
    expect(allowed.received.at(-1)?.headers['webhook-id']).toBe(`msg_${execution.id}`);
  });

  it('a refused destination is recorded with the execution, nothing sent, not retried', async () => {
    const e = engine({ allow: [`127.0.0.1:${allowed.port}`, '127.0.0.0/8'] });
    // Plain http only to destinations the cluster policy names (an IP inside an allowed
    // CIDR counts); anything else is https only.
    expect(e.callbacks.validate(`${other.url}/cb`).port).toBe(String(other.port));
    expect(() => e.callbacks.validate('http://example.com/cb')).toThrow(/scheme http: not allowed/);
    const denied = await callback(e, `${allowed.url}/cb`, {
      deny: [`127.0.0.1:${allowed.port}`],
    });
    expect(denied.callback).toMatchObject({
      delivered: false,
      attempts: 1,
      code: 'HG_ERR_OUTBOUND_REFUSED',
    });
    expect(denied.callback?.reason).toMatch(
      /refused by the outbound policy: .*denied by the workflow's outbound policy/,
    );
    expect(other.received).toHaveLength(0);
  });

  it("the gateway's check before the 202 applies the workflow's narrowing", () => {
    const e = engine({ allow: [`127.0.0.1:${allowed.port}`] });
    const reg = workflow(ok(), { outbound: { allow: ['hooks.example.com'] } });
    expect(() => e.callbacks.validate(`${allowed.url}/cb`, reg)).toThrow(
      /Callback URL refused: address 127\.0\.0\.1 is not in the workflow's outbound policy's allow list/,
    );
    expect(e.callbacks.validate('https://hooks.example.com/cb', reg).hostname).toBe(
      'hooks.example.com',
    );
    expect(e.callbacks.validate(`${allowed.url}/cb`).port).toBe(String(allowed.port));
  });
});
