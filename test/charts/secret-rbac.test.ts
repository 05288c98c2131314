// rbac.secretNamespaces: least privilege for Secrets. RBAC cannot narrow list/watch by
// label, so with the value set the ClusterRole loses its Secrets rule, each listed
// namespace gets a Role and RoleBinding, and the operator is told to watch only there.
import { describe, expect, it } from 'vitest';
import {
  container,
  deployment,
  envOf,
  find,
  render,
  renderError,
  tools,
  type K8sObject,
} from './chart.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}
interface RoleLike extends K8sObject {
  rules: Rule[];
}
interface Binding extends K8sObject {
  roleRef: { kind: string; name: string };
  subjects: { kind: string; name: string; namespace: string }[];
}

const secretRules = (role: RoleLike) => role.rules.filter((r) => r.resources.includes('secrets'));

describe.skipIf(!tools)('chart: Secrets RBAC', () => {
  it('by default reads Secrets cluster-wide and sets no namespace list', async () => {
    const objects = await render();
    const clusterRole = find<RoleLike>(objects, 'ClusterRole', 'hg-hookgate-operator');
    expect(secretRules(clusterRole)).toHaveLength(1);
    expect(
      objects.filter((o) => o.kind === 'Role' && o.metadata.name.endsWith('-secrets')),
    ).toEqual([]);
    const env = envOf(container(deployment(objects, 'operator')));
    expect(env.has('HOOKGATE_SECRET_NAMESPACES')).toBe(false);
  });

  it('with secretNamespaces: Roles per namespace, none in the ClusterRole, the list to the operator', async () => {
    const objects = await render('rbac.secretNamespaces={team-a,team-b}');
    const clusterRole = find<RoleLike>(objects, 'ClusterRole', 'hg-hookgate-operator');
    expect(secretRules(clusterRole)).toEqual([]);
    for (const ns of ['team-a', 'team-b']) {
      const role = objects.find(
        (o): o is RoleLike => o.kind === 'Role' && o.metadata.namespace === ns,
      );
      // list + watch for the operator's informer; no get (it reads its cache only).
      expect(role?.rules).toEqual([
        { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] },
      ]);
      const binding = objects.find(
        (o): o is Binding => o.kind === 'RoleBinding' && o.metadata.namespace === ns,
      );
      expect(binding?.roleRef).toMatchObject({ kind: 'Role', name: role?.metadata.name });
      expect(binding?.subjects).toEqual([
        { kind: 'ServiceAccount', name: 'hg-hookgate', namespace: 'hooks' },
      ]);
    }
    const env = envOf(container(deployment(objects, 'operator')));
    expect(env.get('HOOKGATE_SECRET_NAMESPACES')?.value).toBe('team-a,team-b');
  });

  it('refuses a namespace name that is not one', async () => {
    expect(await renderError('rbac.secretNamespaces={Team_B}')).toMatch(/secretNamespaces/);
  });
});
