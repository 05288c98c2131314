// One ServiceAccount per role: the operator's holds its RBAC (Secrets cluster-wide,
// status writes), the gateway's at most system:auth-delegator (admin.auth kubernetes),
// the workers' and Redis' nothing at all. No pod but the operator's runs as the
// operator's account, and with serviceAccount.create=false the chart never falls back
// to the namespace's `default` account (binding the operator's rights to it).
import { describe, expect, it } from 'vitest';
import {
  FULLNAME,
  NAMESPACE,
  deployment,
  find,
  names,
  redisStatefulSet,
  render,
  renderError,
  tools,
  type K8sObject,
  type PodSpec,
} from './chart.ts';

interface Binding extends K8sObject {
  roleRef: { kind: string; name: string };
  subjects: { kind: string; name: string; namespace: string }[];
}

/** Every (Cluster)RoleBinding subject, as "<binding> -> <account>". */
function boundAccounts(objects: K8sObject[]): string[] {
  return objects
    .filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')
    .flatMap((o) => (o as Binding).subjects.map((s) => `${o.metadata.name} -> ${s.name}`))
    .sort();
}

function pods(objects: K8sObject[]): Record<string, PodSpec> {
  const out: Record<string, PodSpec> = {};
  for (const role of ['operator', 'gateway', 'worker']) {
    out[role] = deployment(objects, role).spec.template.spec;
  }
  out['redis'] = redisStatefulSet(objects).spec.template.spec;
  return out;
}

/** The four accounts named, for serviceAccount.create=false. */
const OWN_ACCOUNTS = [
  'serviceAccount.create=false',
  'serviceAccount.name=hooks-operator',
  'serviceAccount.gateway.name=hooks-gateway',
  'serviceAccount.worker.name=hooks-plain',
  'serviceAccount.redis.name=hooks-plain',
];

describe.skipIf(!tools)('chart: ServiceAccounts', () => {
  it('runs each role as its own account; only the operator and the gateway are bound to anything', async () => {
    const objects = await render();
    const spec = pods(objects);
    expect(spec['operator']?.serviceAccountName).toBe(FULLNAME);
    expect(spec['gateway']?.serviceAccountName).toBe(`${FULLNAME}-gateway`);
    expect(spec['worker']?.serviceAccountName).toBe(`${FULLNAME}-worker`);
    expect(spec['redis']?.serviceAccountName).toBe(`${FULLNAME}-redis`);
    // Tokens: the operator and (admin.auth kubernetes) the gateway; nobody else.
    expect(spec['operator']?.automountServiceAccountToken).toBe(true);
    expect(spec['gateway']?.automountServiceAccountToken).toBe(true);
    expect(spec['worker']?.automountServiceAccountToken).toBe(false);
    expect(spec['redis']?.automountServiceAccountToken).toBe(false);
    for (const name of [
      FULLNAME,
      `${FULLNAME}-gateway`,
      `${FULLNAME}-worker`,
      `${FULLNAME}-redis`,
    ]) {
      const sa = find(objects, 'ServiceAccount', name);
      expect(sa.metadata.namespace).toBe(NAMESPACE);
      expect(sa['automountServiceAccountToken'], name).toBe(false);
    }
    expect(boundAccounts(objects)).toEqual([
      `${FULLNAME}-gateway-auth-delegator -> ${FULLNAME}-gateway`,
      `${FULLNAME}-operator -> ${FULLNAME}`,
      `${FULLNAME}-operator-leader-election -> ${FULLNAME}`,
    ]);
  });

  it('keeps the gateway off the operator account with a static admin token or none', async () => {
    for (const auth of [['admin.auth=token', 'admin.tokenSecret.name=t'], ['admin.auth=none']]) {
      const objects = await render(...auth);
      const gateway = deployment(objects, 'gateway').spec.template.spec;
      expect(gateway.serviceAccountName, auth[0]).toBe(`${FULLNAME}-gateway`);
      expect(gateway.automountServiceAccountToken, auth[0]).toBe(false);
      find(objects, 'ServiceAccount', `${FULLNAME}-gateway`);
      // Nothing bound to the gateway: it calls no API.
      expect(boundAccounts(objects).filter((b) => b.endsWith('-gateway'))).toEqual([]);
    }
  });

  it('renders the worker and Redis accounts only with a worker and the chart Redis', async () => {
    const inline = await render(
      'gateway.executions=inline',
      'redis.enabled=false',
      'externalRedis.existingSecret.name=my-redis',
    );
    expect(names(inline).filter((n) => n.startsWith('ServiceAccount/'))).toEqual([
      `ServiceAccount/${FULLNAME}`,
      `ServiceAccount/${FULLNAME}-gateway`,
    ]);
  });

  it('with serviceAccount.create=false, refuses to fall back to the default account', async () => {
    const error = await renderError('serviceAccount.create=false');
    expect(error).toContain('serviceAccount.create is false');
    for (const value of [
      'serviceAccount.name',
      'serviceAccount.gateway.name',
      'serviceAccount.worker.name',
      'serviceAccount.redis.name',
    ]) {
      expect(error).toContain(value);
    }
    // Only the accounts of the pods rendered are asked for.
    const inline = await renderError(
      'serviceAccount.create=false',
      'serviceAccount.name=op',
      'gateway.executions=inline',
      'redis.enabled=false',
      'externalRedis.existingSecret.name=my-redis',
    );
    expect(inline).toContain('serviceAccount.gateway.name');
    expect(inline).not.toContain('serviceAccount.worker.name');
    expect(inline).not.toContain('serviceAccount.redis.name');
  });

  it('with serviceAccount.create=false, binds and runs the accounts named, creating none', async () => {
    const objects = await render(...OWN_ACCOUNTS);
    expect(objects.filter((o) => o.kind === 'ServiceAccount')).toEqual([]);
    const spec = pods(objects);
    expect(spec['operator']?.serviceAccountName).toBe('hooks-operator');
    expect(spec['gateway']?.serviceAccountName).toBe('hooks-gateway');
    expect(spec['worker']?.serviceAccountName).toBe('hooks-plain');
    expect(spec['redis']?.serviceAccountName).toBe('hooks-plain');
    expect(spec['worker']?.automountServiceAccountToken).toBe(false);
    expect(spec['redis']?.automountServiceAccountToken).toBe(false);
    expect(boundAccounts(objects)).toEqual([
      `${FULLNAME}-gateway-auth-delegator -> hooks-gateway`,
      `${FULLNAME}-operator -> hooks-operator`,
      `${FULLNAME}-operator-leader-election -> hooks-operator`,
    ]);
  });

  it("refuses any other role on the operator's account, and the workers or Redis on the gateway's", async () => {
    for (const role of ['gateway', 'worker', 'redis']) {
      const error = await renderError(
        ...OWN_ACCOUNTS,
        `serviceAccount.${role}.name=hooks-operator`,
      );
      expect(error).toContain(
        `serviceAccount.${role}.name must differ from serviceAccount.name (the operator's`,
      );
    }
    // With create=true as well: the names are the user's either way.
    expect(await renderError('serviceAccount.worker.name=hg-hookgate')).toContain(
      'serviceAccount.worker.name must differ from serviceAccount.name',
    );
    for (const role of ['worker', 'redis']) {
      expect(
        await renderError(...OWN_ACCOUNTS, `serviceAccount.${role}.name=hooks-gateway`),
      ).toContain(`serviceAccount.${role}.name must differ from serviceAccount.gateway.name`);
    }
  });

  it('creates one account when the worker and Redis share a name', async () => {
    const objects = await render(
      'serviceAccount.worker.name=plain',
      'serviceAccount.redis.name=plain',
    );
    expect(names(objects).filter((n) => n.startsWith('ServiceAccount/'))).toEqual([
      `ServiceAccount/${FULLNAME}`,
      `ServiceAccount/${FULLNAME}-gateway`,
      'ServiceAccount/plain',
    ]);
  });
});
