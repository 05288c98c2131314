// A namespace whose Secrets the API server refuses the operator (RBAC, 403) does not
// hold the Kubernetes source's start back: its informer counts as synced with no
// Secrets, the source reports the refusal and tells when access changes, and the first
// list allowed again brings the Secrets in. Against the test API server enforcing RBAC,
// as a service account.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../operator/controller/kube-client.ts';
import { KubernetesSource } from '../../operator/sources/kubernetes.ts';
import { startKubeApiServer, type KubeApiServer } from '../../testing/kube-apiserver/index.ts';
import { eventually } from '../support/eventually.ts';

const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const USER = 'system:serviceaccount:ops:op';

describe('Secrets the API server refuses', () => {
  let api: KubeApiServer;
  let admin: KubeClient;
  let dir: string;
  let kc: KubeConfig;

  const create = (path: string, body: object) => admin.request('POST', path, { body });

  beforeAll(async () => {
    api = await startKubeApiServer({ authorization: true });
    dir = mkdtempSync(join(tmpdir(), 'hookgate-forbidden-'));
    const adminKc = new KubeConfig();
    adminKc.loadFromFile(api.writeKubeconfig(dir));
    admin = new KubeClient(adminKc);
    api.applyCrdsFrom(resolve(import.meta.dirname, '..', '..', 'crds'));
    for (const name of ['ops', 'allowed', 'refused'])
      await create('/api/v1/namespaces', { metadata: { name } });
    await create('/api/v1/namespaces/ops/serviceaccounts', { metadata: { name: 'op' } });
    await create(`${RBAC}/clusterroles`, {
      metadata: { name: 'op' },
      rules: [
        {
          apiGroups: ['hookgate.dev'],
          resources: ['workflows', 'webhooktriggers'],
          verbs: ['list', 'watch'],
        },
      ],
    });
    await create(`${RBAC}/clusterrolebindings`, {
      metadata: { name: 'op' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'op' },
      subjects: [{ kind: 'ServiceAccount', name: 'op', namespace: 'ops' }],
    });
    await create(`${RBAC}/namespaces/allowed/roles`, {
      metadata: { name: 'secrets' },
      rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] }],
    });
    await create(`${RBAC}/namespaces/allowed/rolebindings`, {
      metadata: { name: 'op-secrets' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'secrets' },
      subjects: [{ kind: 'ServiceAccount', name: 'op', namespace: 'ops' }],
    });
    for (const ns of ['allowed', 'refused']) {
      await create(`/api/v1/namespaces/${ns}/secrets`, {
        metadata: { name: 'keys', labels: { 'hookgate.dev/credentials': 'true' } },
        stringData: { acme: `key-${ns}` },
      });
    }
    kc = new KubeConfig();
    kc.loadFromFile(
      api.writeKubeconfig(dir, {
        token: api.serviceAccountToken('ops', 'op'),
        user: 'op',
        file: 'op.kubeconfig',
      }),
    );
  });
  afterAll(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('start() completes; the refused namespace is reported, then allowed on the next list', async () => {
    const source = new KubernetesSource({
      kubeConfig: kc,
      secretNamespaces: ['allowed', 'refused'],
      restartBackoff: { initialMs: 50, maxMs: 200 },
      syncTimeoutMs: 10_000,
    });
    const access: (string | undefined)[] = [];
    try {
      await source.start(
        () => {},
        (ns) => access.push(ns),
      );
      expect(source.getSecret('allowed', 'keys')?.data).toEqual({ acme: 'key-allowed' });
      expect(source.secretsForbiddenIn('allowed')).toBeUndefined();
      expect(source.secretsForbiddenIn('refused')).toBe(
        `secrets is forbidden: User "${USER}" cannot list resource "secrets" in API group "" in the namespace "refused"`,
      );
      expect(source.getSecret('refused', 'keys')).toBeUndefined();
      expect(access).toEqual(['refused']);

      // The binding appears (helm upgrade): the informer's next retry lists the namespace.
      await create(`${RBAC}/namespaces/refused/roles`, {
        metadata: { name: 'secrets' },
        rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] }],
      });
      await create(`${RBAC}/namespaces/refused/rolebindings`, {
        metadata: { name: 'op-secrets' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'secrets' },
        subjects: [{ kind: 'ServiceAccount', name: 'op', namespace: 'ops' }],
      });
      await eventually(() => {
        expect(source.secretsForbiddenIn('refused')).toBeUndefined();
        expect(source.getSecret('refused', 'keys')?.data).toEqual({ acme: 'key-refused' });
      }, 10_000);
      expect(access).toEqual(['refused', 'refused']);
      // Only the list of the refused namespace was ever refused.
      const denied = api.requests.filter((r) => r.user === USER && r.status === 403);
      expect(denied.length).toBeGreaterThan(0);
      expect(new Set(denied.map((r) => r.path))).toEqual(
        new Set(['/api/v1/namespaces/refused/secrets']),
      );
    } finally {
      await source.stop();
    }
  });
});
