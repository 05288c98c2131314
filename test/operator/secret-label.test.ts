// The operator sees only the Secrets labelled hookgate.dev/credentials=true: the list
// and the watch carry the label selector, a trigger that refers to an unlabelled
// Secret says so in its status (Valid=False/SecretNotFound, the message names the
// label and the kubectl command), and labelling the Secret turns the trigger Ready
// without a restart. Against the in-memory API server, with one in-process gateway
// that serves what the loop deploys (Ready means served).
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryGatewayStore } from '../../api/records/gateways-memory.ts';
import { MemoryRecordStore } from '../../api/records/memory-store.ts';
import type { RouteRecord, WorkflowRegistration } from '../../api/records/records.ts';
import type { KubeClient } from '../../operator/controller/kube-client.ts';
import { startReconcileLoop, type ReconcileLoop } from '../../operator/reconcile/run.ts';
import {
  CREDENTIALS_LABEL,
  CREDENTIALS_SELECTOR,
  KubernetesSource,
  resourcePath,
} from '../../operator/sources/kubernetes.ts';
import { GatewayReporter } from '../../runtime/gateway/reporter.ts';
import { RouteTable } from '../../runtime/gateway/route-table.ts';
import type { KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { eventually } from '../support/eventually.ts';
import { startTestCluster, type TestCluster } from '../support/test-cluster.ts';

let cluster: TestCluster;
let server: KubeApiServer;
let kc: KubeConfig;
let client: KubeClient;
let nsCounter = 0;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  cluster = await startTestCluster({ crds: true });
  ({ server, client, kc } = cluster);
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(() => cluster.close());

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

interface TriggerObj {
  status?: { conditions?: Condition[] };
}

async function newNamespace(): Promise<string> {
  const name = `sl${++nsCounter}`;
  await client.request('POST', '/api/v1/namespaces', { body: { metadata: { name } } });
  return name;
}

function secret(ns: string, name: string, labels: Record<string, string> = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: ns, labels },
    stringData: { acme: 'key-acme-0001' },
  };
}

/** A Workflow and a trigger authenticated with the API keys in Secret `keys`. */
async function createTrigger(ns: string): Promise<void> {
  await client.request('POST', resourcePath('Workflow', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'Workflow',
      metadata: { name: 'orders', namespace: ns },
      spec: {
        application: 'shop',
        environment: 'production',
        nodes: [{ id: 'a', type: 'transform', expression: '$' }],
      },
    },
  });
  await client.request('POST', resourcePath('WebhookTrigger', ns), {
    body: {
      apiVersion: 'hookgate.dev/v1alpha1',
      kind: 'WebhookTrigger',
      metadata: { name: 'ingest', namespace: ns },
      spec: {
        workflowRef: { name: 'orders' },
        pathSegment: 'ingest',
        auth: { method: 'apiKey', apiKey: { secretRef: { name: 'keys' } } },
        response: { mode: 'immediateAck' },
      },
    },
  });
}

/** The reconcile loop over the Kubernetes source, and one gateway serving its stores. */
async function startLoop(
  ns: string,
  secretNamespaces?: string[],
): Promise<{ loop: ReconcileLoop; routes: MemoryRecordStore<RouteRecord> }> {
  const routes = new MemoryRecordStore<RouteRecord>();
  const workflows = new MemoryRecordStore<WorkflowRegistration>();
  const gateways = new MemoryGatewayStore();
  const table = await RouteTable.create(routes, workflows);
  const reporter = new GatewayReporter({ store: gateways, table });
  await reporter.start();
  cleanups.push(async () => {
    await reporter.close();
    table.close();
    gateways.close();
  });
  const loop = await startReconcileLoop({
    source: new KubernetesSource({
      kubeConfig: kc,
      namespace: ns,
      restartBackoff: { initialMs: 50, maxMs: 200 },
      maxReconnectDelayMs: 50,
      ...(secretNamespaces ? { secretNamespaces } : {}),
    }),
    routes,
    workflows,
    gateways,
    baseUrl: 'http://hooks.test',
    controller: { workers: 2 },
  });
  cleanups.push(() => loop.stop(1000));
  return { loop, routes };
}

const condition = async (ns: string, type: string): Promise<Condition | undefined> => {
  const t = await client.request<TriggerObj>('GET', resourcePath('WebhookTrigger', ns, 'ingest'));
  return t.status?.conditions?.find((c) => c.type === type);
};

describe('Secrets: only those labelled hookgate.dev/credentials=true', () => {
  it('lists and watches Secrets with the label selector, and nothing else with it', async () => {
    const ns = await newNamespace();
    server.clearRequests();
    await startLoop(ns);
    const secretRequests = server.requests.filter((r) => r.path.endsWith(`/${ns}/secrets`));
    const list = secretRequests.find((r) => r.method === 'GET' && !r.query.watch);
    const watch = secretRequests.find((r) => r.query.watch === 'true' || r.query.watch === '1');
    expect(list?.query.labelSelector).toBe(CREDENTIALS_SELECTOR);
    expect(watch?.query.labelSelector).toBe(CREDENTIALS_SELECTOR);
    expect(secretRequests.every((r) => r.query.labelSelector === CREDENTIALS_SELECTOR)).toBe(true);
    // Workflows and triggers are watched whole.
    const others = server.requests.filter(
      (r) => r.path.endsWith('/workflows') || r.path.endsWith('/webhooktriggers'),
    );
    expect(others.length).toBeGreaterThan(0);
    expect(others.every((r) => r.query.labelSelector === undefined)).toBe(true);
  });

  it('an unlabelled Secret is not seen: Valid=False/SecretNotFound names the label; labelling it makes the trigger Ready', async () => {
    const ns = await newNamespace();
    await client.request('POST', resourcePath('Secret', ns), { body: secret(ns, 'keys') });
    await createTrigger(ns);
    const { routes } = await startLoop(ns);

    await eventually(async () => {
      expect(await condition(ns, 'Valid')).toMatchObject({
        status: 'False',
        reason: 'SecretNotFound',
      });
    });
    const valid = await condition(ns, 'Valid');
    expect(valid?.message).toContain(`Secret "keys" not found`);
    expect(valid?.message).toContain(CREDENTIALS_SELECTOR);
    expect(valid?.message).toContain(`kubectl label secret keys -n ${ns} ${CREDENTIALS_SELECTOR}`);
    expect(await condition(ns, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'SecretNotFound',
    });
    expect(await routes.get(`${ns}/ingest`)).toBeUndefined();

    // The fix the message gives: label the Secret. No restart, no change to the trigger.
    await client.request('PATCH', resourcePath('Secret', ns, 'keys'), {
      contentType: 'application/merge-patch+json',
      body: { metadata: { labels: { [CREDENTIALS_LABEL]: 'true' } } },
    });
    await eventually(async () => {
      expect(await condition(ns, 'Ready')).toMatchObject({ status: 'True' });
    }, 10_000);
    expect(await condition(ns, 'Valid')).toMatchObject({ status: 'True' });
    expect((await routes.get(`${ns}/ingest`))?.credentials.apiKeys).toHaveLength(1);
  });

  it('a Secret that loses the label is gone for the operator: the trigger says so again', async () => {
    const ns = await newNamespace();
    await client.request('POST', resourcePath('Secret', ns), {
      body: secret(ns, 'keys', { [CREDENTIALS_LABEL]: 'true' }),
    });
    await createTrigger(ns);
    await startLoop(ns);
    await eventually(async () => {
      expect(await condition(ns, 'Ready')).toMatchObject({ status: 'True' });
    }, 10_000);
    await client.request('PATCH', resourcePath('Secret', ns, 'keys'), {
      contentType: 'application/merge-patch+json',
      body: { metadata: { labels: { [CREDENTIALS_LABEL]: null } } },
    });
    await eventually(async () => {
      expect(await condition(ns, 'Valid')).toMatchObject({
        status: 'False',
        reason: 'SecretNotFound',
      });
    });
  });
});

describe('Secrets: only in the namespaces given (secretNamespaces, for per-namespace RBAC)', () => {
  it('lists and watches Secrets in each of those namespaces, never across the cluster', async () => {
    const a = await newNamespace();
    const b = await newNamespace();
    await client.request('POST', resourcePath('Secret', a), {
      body: secret(a, 'keys', { [CREDENTIALS_LABEL]: 'true' }),
    });
    await client.request('POST', resourcePath('Secret', b), {
      body: secret(b, 'other', { [CREDENTIALS_LABEL]: 'true' }),
    });
    server.clearRequests();
    const source = new KubernetesSource({ kubeConfig: kc, secretNamespaces: [a, b] });
    cleanups.push(() => source.stop());
    await source.start(() => {});
    const secretRequests = server.requests.filter((r) => r.path.endsWith('/secrets'));
    expect(secretRequests.map((r) => r.path).sort()).toEqual(
      [
        `/api/v1/namespaces/${a}/secrets`,
        `/api/v1/namespaces/${a}/secrets`,
        `/api/v1/namespaces/${b}/secrets`,
        `/api/v1/namespaces/${b}/secrets`,
      ].sort(),
    );
    expect(secretRequests.every((r) => r.query.labelSelector === CREDENTIALS_SELECTOR)).toBe(true);
    expect(source.getSecret(a, 'keys')?.data).toEqual({ acme: 'key-acme-0001' });
    expect(source.getSecret(b, 'other')).toBeDefined();
    expect(source.getSecret(a, 'other')).toBeUndefined();
    expect(source.secretsWatchedIn(a)).toBe(true);
    expect(source.secretsWatchedIn('elsewhere')).toBe(false);
  });

  it("a trigger in a namespace whose Secrets are not watched says so, not 'add the label'", async () => {
    const ns = await newNamespace();
    await client.request('POST', resourcePath('Secret', ns), {
      body: secret(ns, 'keys', { [CREDENTIALS_LABEL]: 'true' }),
    });
    await createTrigger(ns);
    await startLoop(ns, ['somewhere-else']);
    await eventually(async () => {
      expect(await condition(ns, 'Valid')).toMatchObject({
        status: 'False',
        reason: 'SecretForbidden',
      });
    });
    const valid = await condition(ns, 'Valid');
    expect(valid?.message).toContain(`the operator watches no Secrets in namespace ${ns}`);
    expect(valid?.message).not.toContain('kubectl label');
  });
});
