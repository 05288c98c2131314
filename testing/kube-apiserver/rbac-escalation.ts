// RBAC's escalation prevention ("Privilege escalation prevention and bootstrapping" in
// kubernetes.io "Using RBAC Authorization"; read from source: kubernetes/kubernetes
// pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased/
// storage.go, pkg/registry/rbac/escalation_check.go and
// pkg/registry/rbac/validation/policy_comparator.go, rule.go):
//
// - Creating or updating a Role or ClusterRole succeeds only if the user already holds
//   every permission it grants (in the Role's namespace; cluster-wide for a ClusterRole),
//   or may `escalate` roles/clusterroles.
// - Creating or updating a RoleBinding or ClusterRoleBinding succeeds only if the user
//   holds every permission of the referenced role (in the binding's namespace), or may
//   `bind` that role (resourceNames narrow `bind` to named roles). A binding to a role
//   that does not exist is 404 NotFound.
// - Members of system:masters skip both checks.
// Otherwise the answer is 403 Forbidden on the role or binding, listing what is missing
// in rbacv1helpers.CompactString form, e.g.
// `roles.rbac.authorization.k8s.io "x" is forbidden: user "bob" (groups=["g"]) is
// attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
import {
  authorize,
  bindingsFor,
  RBAC_GROUP,
  SYSTEM_MASTERS,
  type PolicyRule,
  type RbacStore,
  type UserInfo,
} from './authz.ts';
import type { KubeObject } from './resources.ts';
import { ApiError, notFound } from './status.ts';

const has = (list: string[] | undefined, v: string) => (list ?? []).includes(v);
const hasAll = (list: string[] | undefined, values: string[] | undefined) =>
  (values ?? []).every((v) => has(list, v));

/** validation.BreakdownRule: one rule per group × resource × verb (× name), URL × verb. */
function breakdown(rule: PolicyRule): PolicyRule[] {
  const out: PolicyRule[] = [];
  for (const group of rule.apiGroups ?? [])
    for (const resource of rule.resources ?? [])
      for (const verb of rule.verbs ?? []) {
        const base = { apiGroups: [group], resources: [resource], verbs: [verb] };
        if ((rule.resourceNames ?? []).length > 0)
          for (const name of rule.resourceNames ?? []) out.push({ ...base, resourceNames: [name] });
        else out.push(base);
      }
  for (const url of rule.nonResourceURLs ?? [])
    for (const verb of rule.verbs ?? []) out.push({ nonResourceURLs: [url], verbs: [verb] });
  return out;
}

function resourceCoversAll(owner: string[] | undefined, wanted: string[] | undefined): boolean {
  if (has(owner, '*') || hasAll(owner, wanted)) return true;
  return (wanted ?? []).every((path) => {
    if (has(owner, path)) return true;
    const slash = path.indexOf('/');
    return slash >= 0 && has(owner, `*/${path.slice(slash + 1)}`);
  });
}

function urlsCoverAll(owner: string[] | undefined, wanted: string[] | undefined): boolean {
  return (wanted ?? []).every((url) =>
    (owner ?? []).some(
      (o) => o === '*' || o === url || (o.endsWith('*') && url.startsWith(o.slice(0, -1))),
    ),
  );
}

/** policy_comparator.go ruleCovers. */
function ruleCovers(owner: PolicyRule, sub: PolicyRule): boolean {
  const names = sub.resourceNames ?? [];
  const ownerNames = owner.resourceNames ?? [];
  return (
    (has(owner.verbs, '*') || hasAll(owner.verbs, sub.verbs)) &&
    (has(owner.apiGroups, '*') || hasAll(owner.apiGroups, sub.apiGroups)) &&
    resourceCoversAll(owner.resources, sub.resources) &&
    urlsCoverAll(owner.nonResourceURLs, sub.nonResourceURLs) &&
    (names.length === 0
      ? ownerNames.length === 0
      : ownerNames.length === 0 || hasAll(ownerNames, names))
  );
}

/** The atomic rules of `wanted` that no rule of `owner` covers. */
export function missingRules(owner: PolicyRule[], wanted: PolicyRule[]): PolicyRule[] {
  return wanted.flatMap(breakdown).filter((sub) => !owner.some((o) => ruleCovers(o, sub)));
}

/** Go's %q of a []string: `["a" "b"]`. */
const goQuoted = (list: string[]) => `[${list.map((s) => JSON.stringify(s)).join(' ')}]`;

/** rbacv1helpers.CompactString. */
function compactString(r: PolicyRule): string {
  const parts: string[] = [];
  if (r.apiGroups?.length) parts.push(`APIGroups:${goQuoted(r.apiGroups)}`);
  if (r.resources?.length) parts.push(`Resources:${goQuoted(r.resources)}`);
  if (r.nonResourceURLs?.length) parts.push(`NonResourceURLs:${goQuoted(r.nonResourceURLs)}`);
  if (r.resourceNames?.length) parts.push(`ResourceNames:${goQuoted(r.resourceNames)}`);
  if (r.verbs?.length) parts.push(`Verbs:${goQuoted(r.verbs)}`);
  return `{${parts.join(', ')}}`;
}

/** validation.CompactRules: single group/resource(/name) rules differing by verb merge. */
function compact(rules: PolicyRule[]): PolicyRule[] {
  const simple = new Map<string, PolicyRule>();
  const out: PolicyRule[] = [];
  for (const r of rules) {
    const isSimple =
      !r.nonResourceURLs?.length &&
      (r.resourceNames ?? []).length <= 1 &&
      r.apiGroups?.length === 1 &&
      r.resources?.length === 1;
    if (!isSimple) {
      out.push(r);
      continue;
    }
    const key = JSON.stringify([r.apiGroups, r.resources, r.resourceNames ?? null]);
    const existing = simple.get(key);
    if (existing) existing.verbs = [...(existing.verbs ?? []), ...(r.verbs ?? [])];
    else simple.set(key, { ...r, verbs: [...(r.verbs ?? [])] });
  }
  return [...out, ...simple.values()];
}

function forbidden(plural: string, name: string, message: string): ApiError {
  return new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `${plural}.${RBAC_GROUP} ${JSON.stringify(name)} is forbidden: ${message}`,
    reason: 'Forbidden',
    details: { name, group: RBAC_GROUP, kind: plural },
    code: 403,
  });
}

/** ConfirmNoEscalation: throws 403 when the user does not hold every rule. */
function confirmNoEscalation(
  store: RbacStore,
  user: UserInfo,
  namespace: string,
  rules: PolicyRule[],
  plural: string,
  name: string,
): void {
  const applied = bindingsFor(store, user, namespace);
  const missing = missingRules(
    applied.flatMap((b) => b.rules),
    rules,
  );
  if (missing.length === 0) return;
  const lines = [...new Set(compact(missing).map(compactString))].sort();
  const errors = applied.flatMap((b) => (b.error ? [b.error] : []));
  let msg = `user ${JSON.stringify(user.name)} (groups=${goQuoted(user.groups)}) is attempting to grant RBAC permissions not currently held:\n${lines.join('\n')}`;
  if (errors.length > 0) msg += `; resolution errors: [${errors.join(' ')}]`;
  throw forbidden(plural, name, msg);
}

/**
 * Checks a write of an RBAC object (`plural` of rbac.authorization.k8s.io; `object` as it
 * would be stored) by `user`. Throws the API server's error when it would escalate.
 */
export function checkRbacWrite(
  store: RbacStore,
  user: UserInfo,
  plural: string,
  object: KubeObject,
): void {
  if (user.groups.includes(SYSTEM_MASTERS)) return;
  const namespace = object.metadata.namespace ?? '';
  const name = object.metadata.name ?? '';
  const may = (verb: string, resource: string, resourceName: string) =>
    authorize(store, user, {
      resourceRequest: true,
      verb,
      path: '',
      apiGroup: RBAC_GROUP,
      apiVersion: 'v1',
      namespace,
      resource,
      subresource: '',
      name: resourceName,
    }).allowed;
  if (plural === 'roles' || plural === 'clusterroles') {
    if (may('escalate', plural, name)) return;
    const rules = ((object as { rules?: PolicyRule[] }).rules ?? []).filter(Boolean);
    confirmNoEscalation(store, user, namespace, rules, plural, name);
    return;
  }
  if (plural === 'rolebindings' || plural === 'clusterrolebindings') {
    const ref = (object as { roleRef?: { kind?: string; name?: string } }).roleRef ?? {};
    const roleResource = ref.kind === 'Role' ? 'roles' : 'clusterroles';
    if (may('bind', roleResource, ref.name ?? '')) return;
    const role =
      ref.kind === 'Role'
        ? store.get(`${RBAC_GROUP}/roles`, namespace, ref.name ?? '')
        : store.get(`${RBAC_GROUP}/clusterroles`, undefined, ref.name ?? '');
    if (!role) throw notFound({ group: RBAC_GROUP, plural: roleResource }, ref.name ?? '');
    const rules = ((role as { rules?: PolicyRule[] }).rules ?? []).filter(Boolean);
    confirmNoEscalation(store, user, namespace, rules, plural, name);
  }
}
