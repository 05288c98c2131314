// Reconcile outcomes against the real directory source and in-memory stores.
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Condition } from '../../../api/v1alpha1/index.ts';
import { Reconciler } from '../../../operator/reconcile/reconciler.ts';
import { DirectorySource } from '../../../operator/sources/directory.ts';
import type { ObjectRef } from '../../../operator/sources/ports.ts';
import { MemoryGatewayStore } from '../../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../../api/records/records.ts';
import { reportServing } from '../../support/gateways.ts';
import { manifestDir, secret, trigger, workflow } from '../../support/manifests.ts';

type Dir = Awaited<ReturnType<typeof manifestDir>>;
let dir: Dir;
let source: DirectorySource;
let routes: MemoryRecordStore<RouteRecord>;
let workflows: MemoryRecordStore<WorkflowRegistration>;
let gateways: MemoryGatewayStore;
let reconciler: Reconciler;
let clock: Date;
let statusWrites: number;

const T = (name: string): ObjectRef => ({ kind: 'WebhookTrigger', namespace: 'default', name });
const W = (name: string): ObjectRef => ({ kind: 'Workflow', namespace: 'default', name });
const conditions = (ref: ObjectRef) =>
  Object.fromEntries(
    ((source.get(ref)?.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).map(
      (c) => [c.type, c],
    ),
  );
const summary = (ref: ObjectRef) =>
  Object.fromEntries(
    Object.values(conditions(ref)).map((c) => [c.type, `${c.status}/${c.reason}`]),
  );

async function load(...docs: object[]) {
  await dir.write('all.yaml', ...docs);
  await source.reload();
}

/**
 * Reconcile everything until nothing changes (what the controller does with its queue),
 * with one gateway that serves what the stores hold after each round.
 */
async function settle() {
  for (let i = 0; i < 3; i++) {
    for (const w of source.list('Workflow')) await reconciler.reconcile(W(w.metadata.name));
    for (const t of source.list('WebhookTrigger')) await reconciler.reconcile(T(t.metadata.name));
    await reportServing(gateways, 'g1', routes, workflows);
  }
}

beforeEach(async () => {
  dir = await manifestDir();
  source = new DirectorySource({ dir: dir.dir });
  await source.start(() => {});
  const write = source.writeStatus.bind(source);
  statusWrites = 0;
  source.writeStatus = (ref, status) => {
    statusWrites++;
    return write(ref, status);
  };
  routes = new MemoryRecordStore();
  workflows = new MemoryRecordStore();
  gateways = new MemoryGatewayStore();
  clock = new Date('2026-11-23T10:00:00Z');
  reconciler = new Reconciler({
    source,
    routes,
    workflows,
    gateways,
    baseUrl: 'https://hooks.example.com',
    now: () => clock,
  });
});
afterEach(async () => {
  await source.stop();
  await dir.cleanup();
});

describe('Reconciler', () => {
  it('deploys and publishes: route registered, workflow registered, every condition True', async () => {
    await load(
      workflow('orders'),
      trigger('orders-ingest', { pathSegment: 'ingest/:id', methods: ['POST', 'PUT'] }),
    );
    await settle();
    expect(summary(T('orders-ingest'))).toEqual({
      Valid: 'True/Succeeded',
      Deployed: 'True/Deployed',
      WorkflowPublished: 'True/Published',
      Ready: 'True/Succeeded',
    });
    const status = source.get(T('orders-ingest'))?.status as Record<string, unknown>;
    expect(status).toMatchObject({
      observedGeneration: 1,
      workflowId: 'default_production_orders',
      basePath: '/webhook/default_production_orders',
      url: 'https://hooks.example.com/webhook/default_production_orders/ingest/:id',
    });
    const route = await routes.get('default/orders-ingest');
    expect(route).toMatchObject({
      path: '/webhook/default_production_orders/ingest/:id',
      application: 'shop',
    });
    expect(await workflows.get('default_production_orders')).toMatchObject({
      name: 'orders',
      environment: 'production',
      // The Workflow's own: a registration of one created again under the name differs
      // (the orphan sweep's compare-and-delete keeps it).
      uid: source.get(W('orders'))?.metadata.uid,
    });
    expect(source.get(W('orders'))?.metadata.uid).toBeTruthy();
    expect(summary(W('orders'))).toEqual({
      Valid: 'True/Succeeded',
      Published: 'True/Published',
      Ready: 'True/Succeeded',
    });
    for (const c of Object.values(conditions(T('orders-ingest'))))
      expect(c.observedGeneration).toBe(1);
  });

  it('writes Ready=Unknown on the first visit', async () => {
    await load(workflow('orders'), trigger('t'));
    const seen: string[] = [];
    const write = source.writeStatus.bind(source);
    source.writeStatus = (ref, status) => {
      const ready = (status as { conditions: Condition[] }).conditions.find(
        (c) => c.type === 'Ready',
      );
      seen.push(`${ref.kind}:${ready?.status}`);
      return write(ref, status);
    };
    await settle();
    expect(seen[0]).toBe('Workflow:Unknown');
    expect(seen).toContain('WebhookTrigger:Unknown');
  });

  it('is idempotent: reconciling again writes nothing', async () => {
    await load(workflow('orders'), trigger('t'));
    await settle();
    const writes = statusWrites;
    let storeWrites = 0;
    routes.subscribe(() => storeWrites++);
    workflows.subscribe(() => storeWrites++);
    for (let i = 0; i < 5; i++) {
      await reconciler.reconcile(T('t'));
      await reconciler.reconcile(W('orders'));
    }
    expect(statusWrites).toBe(writes);
    expect(storeWrites).toBe(0);
  });

  it('deploy: false removes the route (404) and says so', async () => {
    await load(workflow('orders'), trigger('t'));
    await settle();
    expect(await routes.get('default/t')).toBeDefined();
    await load(workflow('orders'), trigger('t', { deploy: false }));
    await settle();
    expect(await routes.get('default/t')).toBeUndefined();
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'False/DeployDisabled',
      Ready: 'False/DeployDisabled',
    });
  });

  it('publish: false unregisters the workflow but keeps the route (requests get workflow-not-found)', async () => {
    await load(workflow('orders'), trigger('t'));
    await settle();
    await load(workflow('orders', { publish: false }), trigger('t'));
    await settle();
    expect(await workflows.list()).toEqual([]);
    expect(await routes.get('default/t')).toBeDefined();
    expect(summary(W('orders'))).toMatchObject({
      Published: 'False/PublishDisabled',
      Ready: 'False/PublishDisabled',
    });
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'True/Deployed',
      WorkflowPublished: 'False/PublishDisabled',
      Ready: 'False/PublishDisabled',
    });
  });

  it('a missing workflow: not deployed, WorkflowNotFound', async () => {
    await load(trigger('t', { workflowRef: { name: 'ghost' } }));
    await settle();
    expect(await routes.list()).toEqual([]);
    expect(summary(T('t'))).toMatchObject({
      Deployed: 'False/WorkflowNotFound',
      Ready: 'False/WorkflowNotFound',
    });
  });

  it('an invalid workflow graph is not published, with the node path in the message', async () => {
    await load(
      workflow('orders', {
        nodes: [{ id: 'a', type: 'transform', expression: '$', next: 'nowhere' }],
      }),
    );
    await settle();
    expect(summary(W('orders'))).toMatchObject({
      Valid: 'False/InvalidSpec',
      Ready: 'False/InvalidSpec',
    });
    expect(conditions(W('orders')).Valid?.message).toContain(
      'spec.nodes[0].next: unknown node "nowhere"',
    );
    expect(await workflows.list()).toEqual([]);
  });

  it('an outbound policy entry that does not parse keeps the workflow unpublished, with its field', async () => {
    await load(
      workflow('orders', {
        outbound: { allow: ['*.svc.cluster.local', '10.0.0.0/99'], deny: ['2130706433.x.1'] },
      }),
    );
    await settle();
    expect(summary(W('orders'))).toMatchObject({ Valid: 'False/InvalidSpec' });
    const message = conditions(W('orders')).Valid?.message;
    expect(message).toContain("spec.outbound.allow[1]: '10.0.0.0/99' is not a CIDR");
    expect(message).toContain("spec.outbound.deny[0]: '2130706433.x.1' is not a valid host name");
    expect(await workflows.list()).toEqual([]);
  });

  it('an http node aimed at cloud metadata, in any spelling, keeps the workflow unpublished', async () => {
    const http = (id: string, url: string) => ({ id, type: 'http', request: { url } });
    await load(
      workflow('orders', {
        nodes: [
          http('a', 'http://169.254.169.254/latest/meta-data/'),
          http('b', 'http://2852039166/latest/meta-data/'), // the same address, as a number
          http('c', 'http://metadata.google.internal./computeMetadata/v1/'),
          http('d', 'https://[64:ff9b::a9fe:a9fe]/'), // NAT64 carrying it
          http('e', 'http://0.0.0.0:8080/'),
          http('f', 'https://api.example.com/orders'),
          http('g', 'http://10.0.0.5/'), // private: a policy may open it
          http('h', 'http://169.254.169.254@example.com/'), // userinfo: the host is example.com
          http('i', 'http://169.254.169.254.nip.io/'), // a name: judged when it resolves
          http('j', 'http://[64:ff9b::]/'), // NAT64 carrying 0.0.0.0
        ],
      }),
    );
    await settle();
    expect(summary(W('orders'))).toMatchObject({ Valid: 'False/InvalidSpec' });
    const message = conditions(W('orders')).Valid?.message ?? '';
    expect(message.split('; ')).toEqual([
      'spec.nodes[0].request.url: address 169.254.169.254 is a cloud metadata endpoint, which is never reachable',
      'spec.nodes[1].request.url: address 169.254.169.254 is a cloud metadata endpoint, which is never reachable',
      'spec.nodes[2].request.url: host metadata.google.internal is a cloud metadata service, which is never reachable',
      'spec.nodes[3].request.url: address 64:ff9b::a9fe:a9fe is a cloud metadata endpoint, which is never reachable',
      'spec.nodes[4].request.url: address 0.0.0.0 is the unspecified address, which is never reachable',
      'spec.nodes[9].request.url: address 64:ff9b:: is the unspecified address, which is never reachable',
    ]);
    expect(await workflows.list()).toEqual([]);
  });

  it('a trigger whose token provider is cloud metadata is not valid and not deployed', async () => {
    const issuer = { issuer: 'https://idp.example.com/', audiences: ['hooks'] };
    await load(
      workflow('orders'),
      trigger('jwks', {
        pathSegment: 'jwks',
        auth: { method: 'bearer', bearer: { ...issuer, jwksUrl: 'https://169.254.169.254/keys' } },
      }),
      trigger('fine', {
        pathSegment: 'fine',
        auth: { method: 'bearer', bearer: { ...issuer, jwksUrl: 'https://idp.example.com/keys' } },
      }),
      trigger('introspect', {
        pathSegment: 'introspect',
        auth: {
          method: 'oauth2',
          oauth2: {
            ...issuer,
            requiredScopes: ['orders:write'],
            introspection: {
              url: 'https://metadata.google.internal/token',
              clientId: 'hooks',
              clientSecretRef: { name: 'idp', key: 'secret' },
            },
          },
        },
      }),
    );
    await settle();
    expect(summary(T('jwks'))).toMatchObject({ Valid: 'False/InvalidSpec' });
    expect(conditions(T('jwks')).Valid?.message).toBe(
      'spec.auth.bearer.jwksUrl: address 169.254.169.254 is a cloud metadata endpoint, which is never reachable',
    );
    expect(conditions(T('jwks')).Deployed?.status).toBe('False');
    expect(summary(T('fine'))).toMatchObject({ Valid: 'True/Succeeded' });
    expect(conditions(T('introspect')).Valid?.message).toBe(
      'spec.auth.oauth2.introspection.url: host metadata.google.internal is a cloud metadata service, which is never reachable',
    );
  });

  it('a JSONata syntax error is reported with its field', async () => {
    await load(
      workflow('orders', { nodes: [{ id: 'a', type: 'transform', expression: '{ "a": ' }] }),
    );
    await settle();
    expect(conditions(W('orders')).Valid?.message).toContain(
      'spec.nodes[0].expression: invalid JSONata expression',
    );
  });

  it('two triggers claiming one URL: the older keeps it, the newer gets PathConflict', async () => {
    await load(workflow('orders'), trigger('first', { pathSegment: 'orders/:id' }));
    await settle();
    clock = new Date('2026-11-23T10:05:00Z');
    await load(
      workflow('orders'),
      trigger('first', { pathSegment: 'orders/:id' }),
      trigger('second', { pathSegment: 'orders/:orderId' }),
    );
    await settle();
    expect(summary(T('first')).Ready).toBe('True/Succeeded');
    expect(summary(T('second'))).toMatchObject({
      Deployed: 'False/PathConflict',
      Ready: 'False/PathConflict',
    });
    expect(conditions(T('second')).Ready?.message).toContain(
      'already served by WebhookTrigger default/first',
    );
    expect((await routes.list()).map((r) => r.key)).toEqual(['default/first']);
    // The older one goes away: the newer one takes the URL over.
    await load(workflow('orders'), trigger('second', { pathSegment: 'orders/:orderId' }));
    for (const ref of reconciler.dependents(T('first'))) await reconciler.reconcile(ref);
    expect(summary(T('second')).Deployed).toBe('False/GatewayPending');
    await settle();
    expect(summary(T('second')).Ready).toBe('True/Succeeded');
    expect((await routes.list()).map((r) => r.key)).toEqual(['default/second']);
  });

  it('after a restart the newer of two rival triggers still loses the URL, whichever is reconciled first', async () => {
    // Named so that the newer one lists (and is reconciled) first.
    await load(workflow('orders'), trigger('zeta-older', { pathSegment: 'orders/:id' }));
    await settle();
    await load(
      workflow('orders'),
      trigger('zeta-older', { pathSegment: 'orders/:id' }),
      trigger('alpha-newer', { pathSegment: 'orders/:orderId' }),
    );
    await settle();
    expect(summary(T('alpha-newer')).Deployed).toBe('False/PathConflict');
    // A new operator process (a restart, a new leader): its path index starts empty,
    // and every object its informers list is settled (status matches the generation).
    const restarted = new Reconciler({
      source,
      routes,
      workflows,
      gateways,
      baseUrl: 'https://hooks.example.com',
      now: () => clock,
    });
    for (const kind of ['Workflow', 'WebhookTrigger'] as const)
      for (const o of source.list(kind))
        restarted.dependents({ kind, namespace: 'default', name: o.metadata.name });
    await restarted.reconcile(T('alpha-newer'));
    await restarted.reconcile(T('zeta-older'));
    expect(summary(T('alpha-newer')).Deployed).toBe('False/PathConflict');
    expect((await routes.list()).map((r) => r.key)).toEqual(['default/zeta-older']);
  });

  it('lastTransitionTime moves only when a status flips; observedGeneration follows the spec', async () => {
    await load(workflow('orders'), trigger('t'));
    await settle();
    const first = conditions(T('t')).Valid?.lastTransitionTime;
    clock = new Date('2026-11-23T11:00:00Z');
    await load(workflow('orders'), trigger('t', { methods: ['GET'] }));
    await settle();
    expect(conditions(T('t')).Valid?.lastTransitionTime).toBe(first);
    // Ready flipped: False (GatewayPending) until the gateway served generation 2.
    expect(conditions(T('t')).Ready?.lastTransitionTime).toBe('2026-11-23T11:00:00Z');
    expect(conditions(T('t')).Ready?.observedGeneration).toBe(2);
    clock = new Date('2026-11-23T12:00:00Z');
    await load(workflow('orders'), trigger('t', { methods: ['GET'], deploy: false }));
    await settle();
    expect(conditions(T('t')).Ready?.lastTransitionTime).toBe('2026-11-23T12:00:00Z');
  });

  it('API keys come from a Secret, hashed; a missing or empty Secret makes the trigger invalid', async () => {
    const auth = { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } };
    await load(workflow('orders'), trigger('t', { auth }));
    await settle();
    expect(summary(T('t'))).toMatchObject({
      Valid: 'False/SecretNotFound',
      Deployed: 'False/SecretNotFound',
    });
    expect(conditions(T('t')).Valid?.message).toContain('Secret "keys" not found');

    await load(workflow('orders'), trigger('t', { auth }), secret('keys', {}));
    await settle();
    expect(summary(T('t')).Valid).toBe('False/SecretInvalid');

    await load(workflow('orders'), trigger('t', { auth }), secret('keys', { acme: 'k-acme' }));
    await settle();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
    const route = await routes.get('default/t');
    expect(route?.credentials.apiKeys).toEqual([
      { consumer: 'acme', sha256: createHash('sha256').update('k-acme').digest('hex') },
    ]);
    expect(JSON.stringify(route)).not.toContain('k-acme');
  });

  it("callback signing secrets come from the trigger's Secret, checked, in key order", async () => {
    const response = { mode: 'asyncCallback', callbackSecretRef: { name: 'cb' } };
    await load(workflow('orders'), trigger('t', { response }));
    await settle();
    expect(summary(T('t')).Valid).toBe('False/SecretNotFound');
    expect(conditions(T('t')).Valid?.message).toContain(
      'spec.response.callbackSecretRef: Secret "cb" not found',
    );
    expect(reconciler.dependents({ kind: 'Secret', namespace: 'default', name: 'cb' })).toEqual([
      T('t'),
    ]);

    const short = `whsec_${Buffer.alloc(16, 1).toString('base64')}`;
    for (const bad of ['not-a-secret', short]) {
      await load(workflow('orders'), trigger('t', { response }), secret('cb', { k: bad }));
      await settle();
      expect(summary(T('t')).Valid).toBe('False/SecretInvalid');
      expect(conditions(T('t')).Valid?.message).toContain(
        'Secret "cb" key "k" is not a callback signing secret',
      );
      expect(conditions(T('t')).Valid?.message).not.toContain(bad);
    }

    const first = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    const second = `whsec_${Buffer.alloc(24, 2).toString('base64')}`;
    await load(
      workflow('orders'),
      trigger('t', { response: { ...response, callbackSecretRef: { name: 'cb', keys: ['z'] } } }),
      secret('cb', { z: `${second}\n`, a: first }),
    );
    await settle();
    expect(summary(T('t')).Ready).toBe('True/Succeeded');
    expect((await routes.get('default/t'))?.credentials.callbackSecrets).toEqual([second]);

    await load(
      workflow('orders'),
      trigger('t', { response }),
      secret('cb', { z: second, a: first }),
    );
    await settle();
    expect((await routes.get('default/t'))?.credentials.callbackSecrets).toEqual([first, second]);
  });

  it('a key named like an Object method is a missing key, not the method (no reconcile error)', async () => {
    const value = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    const refs = (key: string) => ({
      callback: {
        response: { mode: 'asyncCallback', callbackSecretRef: { name: 'cb', keys: [key] } },
      },
      signature: {
        auth: {
          method: 'signature',
          signature: { preset: 'github', secretRef: { name: 'cb', keys: [key] } },
        },
      },
      testCredentials: {
        auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
        testCredentials: { type: 'apiKey', secretRef: { name: 'cb', key } },
      },
    });
    for (const key of ['constructor', 'toString', '__proto__']) {
      for (const [field, spec] of Object.entries(refs(key))) {
        await load(
          workflow('orders'),
          trigger('t', spec),
          secret('cb', { a: value }),
          secret('keys', { c: 'k-1' }),
        );
        await expect(reconciler.reconcile(T('t')), `${field} ${key}`).resolves.not.toThrow();
        expect(summary(T('t')).Valid, `${field} ${key}`).toBe('False/SecretInvalid');
        expect(conditions(T('t')).Valid?.message).toContain(`Secret "cb" has no key "${key}"`);
      }
    }
  });

  it('a Secret change reaches the triggers that reference it, and only those', async () => {
    const auth = { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } };
    await load(workflow('orders'), trigger('t', { auth }), trigger('u', { pathSegment: 'other' }));
    expect(reconciler.dependents({ kind: 'Secret', namespace: 'default', name: 'keys' })).toEqual([
      T('t'),
    ]);
  });

  it('our own status writes fan out to nobody; a spec change reaches the trigger and its rivals', async () => {
    await load(
      workflow('orders'),
      trigger('a', { pathSegment: 'x' }),
      trigger('b', { pathSegment: 'x' }),
    );
    await settle();
    expect(reconciler.dependents(T('a'))).toEqual([]);
    expect(reconciler.dependents(W('orders'))).toEqual([]);
    await load(
      workflow('orders'),
      trigger('a', { pathSegment: 'y' }),
      trigger('b', { pathSegment: 'x' }),
    );
    expect(reconciler.dependents(T('a'))).toEqual([T('a'), T('b')]);
  });

  it('automatic IO mode: the spec messages, verbatim', async () => {
    await load(
      workflow('orders'),
      trigger('t', {
        schema: { mode: 'automatic', input: { example: '{"a":' }, output: { example: '{}' } },
      }),
    );
    await settle();
    expect(conditions(T('t')).Valid?.message).toBe(
      'Make sure your schemas and examples are valid JSON format.',
    );
    await load(
      workflow('orders'),
      trigger('t', {
        schema: { mode: 'automatic', input: { source: 'x' }, output: { example: '{}' } },
      }),
    );
    await settle();
    expect(conditions(T('t')).Valid?.message).toBe(
      'Please provide both input and output schemas for automatic IO mode.',
    );
  });

  it('waitForResponseNode needs a respond node in the workflow', async () => {
    await load(workflow('orders'), trigger('t', { response: { mode: 'waitForResponseNode' } }));
    await settle();
    expect(summary(T('t')).Valid).toBe('False/NoResponseNode');
  });

  it('deleting a trigger removes its route; deleting a workflow unregisters it', async () => {
    await load(workflow('orders'), trigger('t'));
    await settle();
    await load(workflow('orders'));
    await reconciler.reconcile(T('t'));
    expect(await routes.list()).toEqual([]);
    await load();
    await reconciler.reconcile(W('orders'));
    expect(await workflows.list()).toEqual([]);
  });
});
