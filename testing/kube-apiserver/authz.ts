// SubjectAccessReview (authorization.k8s.io/v1) answered by RBAC over the Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings the server stores, the way the
// RBAC authoriser does: a ClusterRoleBinding grants its role's rules everywhere, a
// RoleBinding only in its own namespace (to a Role of that namespace or a ClusterRole);
// subjects are Users, Groups and ServiceAccounts; system:masters may do everything.
// Rules match apiGroups, resources (`res`, `res/sub`, `*`, `*/sub`), verbs and
// resourceNames. No aggregation rules, no non-resource URLs beyond `*`.
import type { KubeObject } from './resources.ts';

/** The stored objects the authoriser reads. */
export interface RbacStore {
  list(resource: string, namespace?: string): KubeObject[];
  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined;
}

interface Attributes {
  namespace: string;
  verb: string;
  group: string;
  resource: string;
  subresource: string;
  name: string;
}

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}

interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
}

interface Binding {
  subjects?: Subject[];
  roleRef?: { kind?: string; name?: string };
}

const RBAC = 'rbac.authorization.k8s.io';

function subjectMatches(s: Subject, user: string, groups: string[], bindingNs: string): boolean {
  if (s.kind === 'User') return s.name === user;
  if (s.kind === 'Group') return groups.includes(s.name ?? '');
  if (s.kind === 'ServiceAccount')
    return user === `system:serviceaccount:${s.namespace ?? bindingNs}:${s.name ?? ''}`;
  return false;
}

function ruleMatches(rule: Rule, a: Attributes): boolean {
  const groups = rule.apiGroups ?? [];
  if (!groups.includes('*') && !groups.includes(a.group)) return false;
  const verbs = rule.verbs ?? [];
  if (!verbs.includes('*') && !verbs.includes(a.verb)) return false;
  const resources = rule.resources ?? [];
  const full = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const resourceOk =
    resources.includes('*') ||
    resources.includes(full) ||
    (a.subresource !== '' && resources.includes(`*/${a.subresource}`));
  if (!resourceOk) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || (a.name !== '' && names.includes(a.name));
}

function rulesOf(store: RbacStore, ref: Binding['roleRef'], bindingNs: string | undefined): Rule[] {
  if (!ref?.name) return [];
  const role =
    ref.kind === 'Role'
      ? store.get(`${RBAC}/roles`, bindingNs, ref.name)
      : store.get(`${RBAC}/clusterroles`, undefined, ref.name);
  return ((role as { rules?: Rule[] } | undefined)?.rules ?? []).filter(Boolean);
}

function attributesOf(spec: Record<string, unknown>): Attributes | undefined {
  const ra = spec.resourceAttributes as Record<string, unknown> | undefined;
  if (!ra) return undefined;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  return {
    namespace: str(ra.namespace),
    verb: str(ra.verb),
    group: str(ra.group),
    resource: str(ra.resource),
    subresource: str(ra.subresource),
    name: str(ra.name),
  };
}

/** Whether the user may do it, and the binding that allowed it. */
export function authorize(
  store: RbacStore,
  user: string,
  groups: string[],
  a: Attributes,
): { allowed: boolean; reason: string } {
  if (groups.includes('system:masters')) return { allowed: true, reason: 'system:masters' };
  for (const b of store.list(`${RBAC}/clusterrolebindings`) as (KubeObject & Binding)[]) {
    if (!(b.subjects ?? []).some((s) => subjectMatches(s, user, groups, ''))) continue;
    if (rulesOf(store, b.roleRef, undefined).some((r) => ruleMatches(r, a)))
      return { allowed: true, reason: `RBAC: allowed by ClusterRoleBinding "${b.metadata.name}"` };
  }
  if (a.namespace !== '') {
    for (const b of store.list(`${RBAC}/rolebindings`, a.namespace) as (KubeObject & Binding)[]) {
      if (!(b.subjects ?? []).some((s) => subjectMatches(s, user, groups, a.namespace))) continue;
      if (rulesOf(store, b.roleRef, a.namespace).some((r) => ruleMatches(r, a)))
        return {
          allowed: true,
          reason: `RBAC: allowed by RoleBinding "${b.metadata.name}" in ${a.namespace}`,
        };
    }
  }
  return { allowed: false, reason: '' };
}

export function subjectAccessReview(body: unknown, store: RbacStore): object {
  const spec = ((body ?? {}) as { spec?: Record<string, unknown> }).spec ?? {};
  const user = typeof spec.user === 'string' ? spec.user : '';
  const groups = Array.isArray(spec.groups)
    ? spec.groups.filter((g): g is string => typeof g === 'string')
    : [];
  const attributes = attributesOf(spec);
  const decision = attributes
    ? authorize(store, user, groups, attributes)
    : { allowed: false, reason: 'only resourceAttributes are evaluated' };
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    metadata: { creationTimestamp: null },
    spec,
    status: { allowed: decision.allowed, ...(decision.reason ? { reason: decision.reason } : {}) },
  };
}
