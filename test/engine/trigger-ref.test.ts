// The engine sees the trigger, never its credentials: the route record the gateway
// serves carries API-key digests, JWT keys and secrets; what reaches the engine (and
// so the execution records, logs and events it writes) carries none of them.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHash } from 'node:crypto';
import type { RouteRecord } from '../../api/records/records.ts';
import { directoryUid } from '../../operator/sources/directory.ts';
import type { Execution, StartRequest } from '../../runtime/engine/ports.ts';
import {
  acceptedTriggerRef,
  callbackSecretsOf,
  runSigning,
  triggerRef,
} from '../../runtime/engine/trigger-ref.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import {
  secret,
  trigger as triggerManifest,
  workflow as workflowManifest,
} from '../support/manifests.ts';
import { credentialLeaks, route, trigger, workflow } from './helpers.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('triggerRef', () => {
  it("copies the trigger's names, nothing of its spec or credentials", () => {
    const record: RouteRecord = {
      ...route(),
      credentials: {
        apiKeys: [{ consumer: 'acme', sha256: sha256('key-acme-123456') }],
        jwtKey: 'jwt-hmac-secret-0123456789',
        introspectionClientSecret: 'introspection-secret-42',
        testCredential: 'test-token-abcdef',
      },
    };
    const ref = triggerRef(record);
    expect(ref).toEqual({
      key: 'shop/orders-hook',
      namespace: 'shop',
      name: 'orders-hook',
      workflowId: 'shop_development_orders',
      path: '/webhook/shop_development_orders/ingest',
      uid: 'uid-1',
    });
    const material = [
      sha256('key-acme-123456'),
      'jwt-hmac-secret-0123456789',
      'introspection-secret-42',
      'test-token-abcdef',
    ];
    expect(credentialLeaks(ref, material)).toEqual([]);
  });

  it('a route without a uid (a source that gives none) makes a reference without one', () => {
    expect(triggerRef({ ...route(), uid: '' })).not.toHaveProperty('uid');
  });

  it("a job's reference names the route, with the uid its execution was accepted under", () => {
    // The trigger was deleted and re-created under its name since: the route has another uid.
    const now: RouteRecord = {
      ...route(),
      uid: 'uid-2',
      path: '/webhook/shop_development_orders/x',
    };
    expect(acceptedTriggerRef(now, { triggerUid: 'uid-1' })).toEqual({
      ...triggerRef(now),
      uid: 'uid-1',
    });
    // A record from before uids were kept: none, so nothing is checked (not the route's).
    expect(acceptedTriggerRef(now, {})).toEqual({ ...triggerRef(now), uid: undefined });
    expect(acceptedTriggerRef(now, {})).not.toHaveProperty('uid');
  });

  it('a route record does not type-check as the engine input', () => {
    const request = {
      workflow: workflow([]),
      // @ts-expect-error a route record carries credentials; the engine takes a TriggerRef
      trigger: route(),
      input: trigger({}),
    } satisfies StartRequest;
    expect(request.trigger.credentials).toEqual({});
  });
});

// ADR 0035 and 0018: the one rule that keeps a trigger re-created under its name (another
// uid) from signing, or running, what came in on the one before. The worker (a job), each
// callback attempt (callbackSecretsOf) and replays and dead-letter retries (planReplay) ask it.
describe('runSigning', () => {
  const own = { ...route(), credentials: { callbackSecrets: ['whsec_a', 'whsec_b'] } };
  const none = route();

  it("the run's own trigger: the secrets its route holds now, none meaning the engine's", () => {
    expect(runSigning('uid-1', own)).toEqual({ secrets: ['whsec_a', 'whsec_b'] });
    expect(runSigning('uid-1', none)).toEqual({ secrets: [] });
  });

  it('no route: gone; a route of another uid: re-created, whose secrets never sign', () => {
    expect(runSigning('uid-1', undefined)).toEqual({ unsigned: 'gone' });
    expect(runSigning(undefined, undefined)).toEqual({ unsigned: 'gone' });
    expect(runSigning('uid-1', { ...own, uid: 'uid-2' })).toEqual({ unsigned: 'recreated' });
    expect(runSigning('uid-1', { ...none, uid: 'uid-2' })).toEqual({ unsigned: 'recreated' });
  });

  it('not checked without a uid on either side (a record from before uids were kept, a route without one)', () => {
    expect(runSigning(undefined, own)).toEqual({ secrets: ['whsec_a', 'whsec_b'] });
    expect(runSigning('uid-1', { ...own, uid: '' })).toEqual({ secrets: ['whsec_a', 'whsec_b'] });
  });

  it('callbackSecretsOf says it as the reason an attempt is not signed', () => {
    const ref = { key: 'shop/orders-hook', uid: 'uid-1' };
    expect(callbackSecretsOf(ref, own)).toEqual(['whsec_a', 'whsec_b']);
    expect(callbackSecretsOf(ref, undefined)).toEqual({
      unsigned: 'endpoint shop/orders-hook is no longer deployed',
    });
    expect(callbackSecretsOf(ref, { ...own, uid: 'uid-2' })).toEqual({
      unsigned:
        'endpoint shop/orders-hook was deleted and re-created since this run started (another WebhookTrigger uid)',
    });
  });
});

describe('an execution started through the gateway', () => {
  let rt: TestRuntime;
  let base: string;
  const apiKey = 'key-acme-123456';
  const testToken = 'test-key-globex-987654';

  beforeAll(async () => {
    rt = await startRuntime();
    base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    await rt.apply(
      'keyed.yaml',
      [
        secret('keys', { acme: apiKey }),
        secret('tester', { key: testToken }),
        workflowManifest('echo', {
          nodes: [
            { id: 'out', type: 'transform', expression: '{ "got": body, "trigger": $trigger }' },
            { id: 'answer', type: 'respond', statusCode: 200 },
          ],
        }),
        triggerManifest('keyed', {
          workflowRef: { name: 'echo' },
          pathSegment: 'keyed',
          auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
          testCredentials: { type: 'apiKey', secretRef: { name: 'tester', key: 'key' } },
          response: { mode: 'waitForCompletion' },
        }),
      ],
      ['keyed'],
    );
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('reaches the engine with the trigger key, and no credential reaches its record or events', async () => {
    const stored = await rt.routes.get('default/keyed');
    // The record the gateway serves does hold the material this test looks for.
    expect(stored?.credentials.apiKeys?.[0]?.sha256).toBe(sha256(apiKey));
    expect(stored?.credentials.testCredential).toBe(testToken);
    const material = [apiKey, sha256(apiKey), testToken];

    const start = vi.spyOn(rt.engine, 'start');
    const response = await fetch(`${base}/webhook/default_production_echo/keyed`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ n: 1 }),
    });
    expect(response.status).toBe(200);
    expect(start).toHaveBeenCalledTimes(1);
    const request = start.mock.calls[0]?.[0] as StartRequest;
    // The uid is the WebhookTrigger's (the directory source derives each object's).
    expect(stored?.uid).toBe(
      directoryUid('hookgate.dev/v1alpha1', 'WebhookTrigger', 'default', 'keyed'),
    );
    expect(request.trigger).toEqual({
      key: 'default/keyed',
      namespace: 'default',
      name: 'keyed',
      workflowId: 'default_production_echo',
      path: '/webhook/default_production_echo/keyed',
      uid: stored?.uid,
    });
    expect(credentialLeaks(request, material)).toEqual([]);

    const { id } = (await start.mock.results[0]?.value) as Execution;
    const execution = await rt.engine.get(id);
    expect(execution?.status).toBe('succeeded');
    expect(execution?.triggerKey).toBe('default/keyed');
    expect(execution?.triggerUid).toBe(stored?.uid);
    expect(credentialLeaks(execution, material)).toEqual([]);
    const events = await new Promise<unknown[]>((resolve) => {
      const seen: unknown[] = [];
      rt.engine.subscribe(id, 0, (event) => {
        seen.push(event);
        if (event.type === 'completed' || event.type === 'failed') resolve(seen);
      });
    });
    expect(credentialLeaks(events, material)).toEqual([]);
    start.mockRestore();

    // The admin API shows the execution as before: the uid is kept for callback signing.
    const one = await rt.admin.inject({ method: 'GET', url: `/api/executions/${id}` });
    expect(one.json()).toMatchObject({ id, triggerKey: 'default/keyed' });
    expect(one.json()).not.toHaveProperty('triggerUid');
    const listed = await rt.admin.inject({ method: 'GET', url: '/api/executions' });
    const items = listed.json<{ items: Record<string, unknown>[] }>().items;
    expect(items.map((e) => e.id)).toContain(id);
    for (const item of items) expect(item).not.toHaveProperty('triggerUid');
  });
});
