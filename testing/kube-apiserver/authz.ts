// Authorisation the way a cluster with `--authorization-mode=RBAC` decides it, over the
// Roles, ClusterRoles, RoleBindings and ClusterRoleBindings the server stores. Sources:
// kubernetes.io "Using RBAC Authorization" (docs/reference/access-authn-authz/rbac),
// and, read from source, kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go
// (RuleAllows), pkg/apis/rbac/v1/evaluation_helpers.go (the matchers) and
// pkg/registry/rbac/validation/rule.go (visiting the bindings, the reasons).
//
// - The group system:masters may do everything, before RBAC is asked (the API server's
//   privileged-group authoriser).
// - ClusterRoleBindings grant their ClusterRole's rules everywhere; RoleBindings only in
//   their own namespace (a Role of that namespace, or a ClusterRole). A cluster-scoped
//   request (no namespace) is decided by ClusterRoleBindings alone.
// - Subjects: User (the name), Group (any of the user's groups), ServiceAccount
//   (`system:serviceaccount:<ns>:<name>`, the namespace defaulting to the binding's).
// - A rule allows a resource request when verb (`*` or equal), API group (`*` or equal),
//   resource (`*`, `res`, `res/sub`, or `*/sub` for any resource's subresource) and
//   resourceNames (empty: any name; otherwise the request's name is listed) match; a
//   non-resource request (`/api`, `/healthz`) when verb and one of nonResourceURLs match
//   (`*`, the exact path, or a prefix ending in `*`).
// - A binding whose role does not exist grants nothing; a denial then says so
//   (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`), as the real one does.
// Not modelled: aggregated ClusterRoles (their rules are filled by a controller-manager
// controller), the Node and Webhook authorisers, impersonation.
import type { KubeObject } from './resources.ts';
import type { RequestAttributes } from './request-info.ts';

/** The stored objects the authoriser reads. */
export interface RbacStore {
  list(resource: string, namespace?: string): KubeObject[];
  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined;
}

export interface UserInfo {
  name: string;
  uid?: string;
  groups: string[];
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
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

export const RBAC_GROUP = 'rbac.authorization.k8s.io';
export const SYSTEM_MASTERS = 'system:masters';

const has = (list: string[] | undefined, value: string) => (list ?? []).includes(value);

export function subjectMatches(s: Subject, user: UserInfo, bindingNs: string): boolean {
  if (s.kind === 'User') return s.name === user.name;
  if (s.kind === 'Group') return user.groups.includes(s.name ?? '');
  if (s.kind === 'ServiceAccount') {
    const ns = s.namespace || bindingNs;
    return ns !== '' && user.name === `system:serviceaccount:${ns}:${s.name ?? ''}`;
  }
  return false;
}

function resourceMatches(rule: PolicyRule, combined: string, subresource: string): boolean {
  for (const r of rule.resources ?? []) {
    if (r === '*' || r === combined) return true;
    if (subresource !== '' && r === `*/${subresource}`) return true;
  }
  return false;
}

function nonResourceUrlMatches(rule: PolicyRule, path: string): boolean {
  return (rule.nonResourceURLs ?? []).some(
    (u) => u === '*' || u === path || (u.endsWith('*') && path.startsWith(u.slice(0, -1))),
  );
}

/** rbac.go RuleAllows. */
export function ruleAllows(rule: PolicyRule, a: RequestAttributes): boolean {
  const verbOk = has(rule.verbs, '*') || has(rule.verbs, a.verb);
  if (!verbOk) return false;
  if (!a.resourceRequest) return nonResourceUrlMatches(rule, a.path);
  const combined = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const names = rule.resourceNames ?? [];
  return (
    (has(rule.apiGroups, '*') || has(rule.apiGroups, a.apiGroup)) &&
    resourceMatches(rule, combined, a.subresource) &&
    (names.length === 0 || names.includes(a.name))
  );
}

function roleOf(
  store: RbacStore,
  ref: Binding['roleRef'],
  bindingNs: string | undefined,
): { rules: PolicyRule[] } | { error: string } {
  const name = ref?.name ?? '';
  const role =
    ref?.kind === 'Role'
      ? store.get(`${RBAC_GROUP}/roles`, bindingNs, name)
      : store.get(`${RBAC_GROUP}/clusterroles`, undefined, name);
  if (!role) {
    return {
      error: `${ref?.kind === 'Role' ? 'role' : 'clusterrole'}.${RBAC_GROUP} "${name}" not found`,
    };
  }
  return { rules: ((role as { rules?: PolicyRule[] }).rules ?? []).filter(Boolean) };
}

function describeSubject(s: Subject, bindingNs: string): string {
  if (s.kind === 'ServiceAccount')
    return `${s.kind} ${JSON.stringify(`${s.name ?? ''}/${s.namespace || bindingNs}`)}`;
  return `${s.kind ?? ''} ${JSON.stringify(s.name ?? '')}`;
}

/** One binding that applies to the user, with its role's rules (or why it has none). */
export interface AppliedBinding {
  /** `ClusterRoleBinding "b" of ClusterRole "r" to User "u"` (rule.go's describers). */
  source: string;
  rules: PolicyRule[];
  error?: string;
}

/**
 * The bindings that apply to the user for a request in `namespace` ('' = cluster
 * scope), ClusterRoleBindings first, as rule.go's VisitRulesFor walks them.
 */
export function bindingsFor(store: RbacStore, user: UserInfo, namespace: string): AppliedBinding[] {
  const out: AppliedBinding[] = [];
  const visit = (b: KubeObject & Binding, ns: string, kind: string, label: string) => {
    const subject = (b.subjects ?? []).find((s) => subjectMatches(s, user, ns));
    if (!subject) return;
    const role = roleOf(store, b.roleRef, ns || undefined);
    const source = `${kind} ${JSON.stringify(label)} of ${b.roleRef?.kind ?? ''} ${JSON.stringify(b.roleRef?.name ?? '')} to ${describeSubject(subject, ns)}`;
    out.push(
      'error' in role ? { source, rules: [], error: role.error } : { source, rules: role.rules },
    );
  };
  for (const b of store.list(`${RBAC_GROUP}/clusterrolebindings`) as (KubeObject & Binding)[])
    visit(b, '', 'ClusterRoleBinding', b.metadata.name ?? '');
  if (namespace !== '') {
    for (const b of store.list(`${RBAC_GROUP}/rolebindings`, namespace) as (KubeObject & Binding)[])
      visit(b, namespace, 'RoleBinding', `${namespace}/${b.metadata.name ?? ''}`);
  }
  return out;
}

export interface Decision {
  allowed: boolean;
  /** Allowed: which binding; denied: `RBAC: <errors>` or ''. */
  reason: string;
}

/** Whether the user may do what the attributes say. */
export function authorize(store: RbacStore, user: UserInfo, a: RequestAttributes): Decision {
  if (user.groups.includes(SYSTEM_MASTERS)) return { allowed: true, reason: '' };
  const errors: string[] = [];
  for (const b of bindingsFor(store, user, a.namespace)) {
    if (b.error) errors.push(b.error);
    if (b.rules.some((r) => ruleAllows(r, a)))
      return { allowed: true, reason: `RBAC: allowed by ${b.source}` };
  }
  return {
    allowed: false,
    reason:
      errors.length === 0
        ? ''
        : `RBAC: ${errors.length === 1 ? errors[0] : `[${errors.join(', ')}]`}`,
  };
}

/**
 * The Forbidden message (apiserver endpoints/handlers/responsewriters/errors.go
 * forbiddenMessage), without the `<resource> "<name>" is forbidden: ` prefix that
 * NewForbidden adds.
 */
export function forbiddenMessage(user: UserInfo, a: RequestAttributes, reason: string): string {
  let msg: string;
  if (!a.resourceRequest) {
    msg = `User ${JSON.stringify(user.name)} cannot ${a.verb} path ${JSON.stringify(a.path)}`;
  } else {
    const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
    const where = a.namespace
      ? `in the namespace ${JSON.stringify(a.namespace)}`
      : 'at the cluster scope';
    msg = `User ${JSON.stringify(user.name)} cannot ${a.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(a.apiGroup)} ${where}`;
  }
  return reason ? `${msg}: ${reason}` : msg;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/** SubjectAccessReview spec → attributes (resourceAttributes or nonResourceAttributes). */
function reviewAttributes(spec: Record<string, unknown>): RequestAttributes | undefined {
  const ra = spec.resourceAttributes as Record<string, unknown> | undefined;
  if (ra) {
    return {
      resourceRequest: true,
      verb: str(ra.verb),
      path: '',
      apiGroup: str(ra.group),
      apiVersion: str(ra.version),
      namespace: str(ra.namespace),
      resource: str(ra.resource),
      subresource: str(ra.subresource),
      name: str(ra.name),
    };
  }
  const nra = spec.nonResourceAttributes as Record<string, unknown> | undefined;
  if (nra) {
    return {
      resourceRequest: false,
      verb: str(nra.verb),
      path: str(nra.path),
      apiGroup: '',
      apiVersion: '',
      namespace: '',
      resource: '',
      subresource: '',
      name: '',
    };
  }
  return undefined;
}

export function subjectAccessReview(body: unknown, store: RbacStore): object {
  const spec = ((body ?? {}) as { spec?: Record<string, unknown> }).spec ?? {};
  const user: UserInfo = {
    name: str(spec.user),
    groups: Array.isArray(spec.groups)
      ? spec.groups.filter((g): g is string => typeof g === 'string')
      : [],
  };
  const attributes = reviewAttributes(spec);
  const decision = attributes
    ? authorize(store, user, attributes)
    : { allowed: false, reason: 'neither resourceAttributes nor nonResourceAttributes given' };
  const reason = decision.allowed && decision.reason === '' ? '' : decision.reason;
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    metadata: { creationTimestamp: null },
    spec,
    status: { allowed: decision.allowed, ...(reason ? { reason } : {}) },
  };
}
