// TokenReview (authentication.k8s.io/v1): the token in spec.token is looked up in the
// server's table of users (KubeApiServerOptions.users); a known token answers
// authenticated with its user, who is also in system:authenticated, as a real API
// server answers for a bearer token it recognises. Unknown tokens: authenticated false.
export interface TestUser {
  username: string;
  uid?: string;
  groups?: string[];
}

/** The kubeconfig the server writes uses this token; it is a cluster admin. */
export const ADMIN_TOKEN = 'hookgate-test-token';

export const DEFAULT_USERS: Record<string, TestUser> = {
  [ADMIN_TOKEN]: { username: 'hookgate-test', groups: ['system:masters'] },
};

export function tokenReview(body: unknown, users: Record<string, TestUser>): object {
  const spec = ((body ?? {}) as { spec?: { token?: unknown; audiences?: unknown } }).spec ?? {};
  const token = typeof spec.token === 'string' ? spec.token : '';
  const user = Object.hasOwn(users, token) ? users[token] : undefined;
  const audiences = Array.isArray(spec.audiences) ? spec.audiences : undefined;
  return {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    metadata: { creationTimestamp: null },
    spec,
    status: user
      ? {
          authenticated: true,
          user: {
            username: user.username,
            ...(user.uid ? { uid: user.uid } : {}),
            groups: [...new Set([...(user.groups ?? []), 'system:authenticated'])],
          },
          ...(audiences ? { audiences } : {}),
        }
      : { authenticated: false, error: 'invalid bearer token' },
  };
}
