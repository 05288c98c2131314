// The default ClusterRoles and ClusterRoleBindings an API server creates at start-up
// that clients rely on ("Default roles and role bindings" in kubernetes.io "Using RBAC
// Authorization"; rules as kubernetes/kubernetes plugin/pkg/auth/authorizer/rbac/
// bootstrappolicy/policy.go defines them on 1.35):
//
// | ClusterRole                 | bound to                                    | grants                                                                            |
// | --------------------------- | ------------------------------------------- | --------------------------------------------------------------------------------- |
// | cluster-admin               | system:masters                              | everything                                                                        |
// | system:discovery            | system:authenticated                        | GET /api, /apis (and below), /openapi, /version, /healthz, /livez, /readyz       |
// | system:public-info-viewer   | system:authenticated, system:unauthenticated | GET /version, /healthz, /livez, /readyz                                           |
// | system:basic-user           | system:authenticated                        | create selfsubjectaccessreviews, selfsubjectrulesreviews, selfsubjectreviews      |
// | system:auth-delegator       | (nothing; charts bind it)                   | create tokenreviews, subjectaccessreviews                                         |
//
// So every authenticated client (kubectl, client-node) can read discovery and OpenAPI,
// and an anonymous one only the version and health endpoints. The aggregated
// admin/edit/view roles and the controllers' roles are left out.
import type { PolicyRule } from './authz.ts';

const BOOTSTRAP_METADATA = {
  labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
  annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
};

const get = (...nonResourceURLs: string[]): PolicyRule => ({ verbs: ['get'], nonResourceURLs });

const ROLES: Record<string, PolicyRule[]> = {
  'cluster-admin': [
    { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
    { nonResourceURLs: ['*'], verbs: ['*'] },
  ],
  'system:discovery': [
    get(
      '/api',
      '/api/*',
      '/apis',
      '/apis/*',
      '/healthz',
      '/livez',
      '/openapi',
      '/openapi/*',
      '/readyz',
      '/version',
      '/version/',
    ),
  ],
  'system:public-info-viewer': [get('/healthz', '/livez', '/readyz', '/version', '/version/')],
  'system:basic-user': [
    {
      apiGroups: ['authorization.k8s.io'],
      resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
      verbs: ['create'],
    },
    { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
  ],
  'system:auth-delegator': [
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
  ],
};

const BINDINGS: Record<string, string[]> = {
  'cluster-admin': ['system:masters'],
  'system:discovery': ['system:authenticated'],
  'system:public-info-viewer': ['system:authenticated', 'system:unauthenticated'],
  'system:basic-user': ['system:authenticated'],
};

/** The bootstrap ClusterRoles and ClusterRoleBindings, as API objects. */
export function bootstrapRbac(): {
  clusterRoles: Record<string, unknown>[];
  clusterRoleBindings: Record<string, unknown>[];
} {
  const api = 'rbac.authorization.k8s.io';
  return {
    clusterRoles: Object.entries(ROLES).map(([name, rules]) => ({
      apiVersion: `${api}/v1`,
      kind: 'ClusterRole',
      metadata: { name, ...structuredClone(BOOTSTRAP_METADATA) },
      rules,
    })),
    clusterRoleBindings: Object.entries(BINDINGS).map(([name, groups]) => ({
      apiVersion: `${api}/v1`,
      kind: 'ClusterRoleBinding',
      metadata: { name, ...structuredClone(BOOTSTRAP_METADATA) },
      roleRef: { apiGroup: api, kind: 'ClusterRole', name },
      subjects: groups.map((g) => ({ apiGroup: api, kind: 'Group', name: g })),
    })),
  };
}
