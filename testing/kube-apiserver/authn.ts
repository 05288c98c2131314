// Authentication: who a request's bearer token belongs to. Sources: kubernetes.io
// "Authenticating" (docs/reference/access-authn-authz/authentication: service account
// tokens, anonymous requests, the system:authenticated/unauthenticated groups) and
// "Managing Service Accounts" (TokenRequest, bound tokens).
//
// - Static tokens (KubeApiServerOptions.users) map to their users; the kubeconfig's
//   token is a cluster admin (system:masters).
// - Service account tokens are issued by TokenRequest (POST
//   `/api/v1/namespaces/<ns>/serviceaccounts/<name>/token`, or `serviceAccountToken()`):
//   JWTs signed with this server's own key, bound to the ServiceAccount's uid, valid
//   until they expire or the ServiceAccount is deleted. Their user is
//   `system:serviceaccount:<ns>:<name>` with the groups `system:serviceaccounts`,
//   `system:serviceaccounts:<ns>` and `system:authenticated`, as a real server's.
// - Every authenticated user is in system:authenticated. A request without a bearer
//   token is anonymous (`system:anonymous`, group `system:unauthenticated`), as with
//   the API server's default `--anonymous-auth=true`; a bearer token nobody issued is
//   401 Unauthorized.
// TokenReview (authentication.k8s.io/v1) answers with the same lookup.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { UserInfo } from './authz.ts';
import type { KubeObject } from './resources.ts';

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

export const ANONYMOUS: UserInfo = { name: 'system:anonymous', groups: ['system:unauthenticated'] };

/** Where the authenticator looks ServiceAccounts up (tokens die with their account). */
export interface ServiceAccountStore {
  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined;
}

const ISSUER = 'https://kubernetes.default.svc.cluster.local';
const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

interface Claims {
  iss: string;
  sub: string;
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  'kubernetes.io': { namespace: string; serviceaccount: { name: string; uid: string } };
}

export class Authenticator {
  readonly #users: Record<string, TestUser>;
  readonly #store: ServiceAccountStore;
  readonly #key = randomBytes(32);

  constructor(users: Record<string, TestUser>, store: ServiceAccountStore) {
    this.#users = users;
    this.#store = store;
  }

  /** A token for the ServiceAccount (which must exist), valid for `expirationSeconds`. */
  issue(
    serviceAccount: KubeObject,
    opts: { expirationSeconds?: number; audiences?: string[] } = {},
  ): { token: string; expirationTimestamp: string } {
    const now = Math.floor(Date.now() / 1000);
    const exp = now + (opts.expirationSeconds ?? 3600);
    const namespace = serviceAccount.metadata.namespace ?? '';
    const name = serviceAccount.metadata.name ?? '';
    const claims: Claims = {
      iss: ISSUER,
      sub: `system:serviceaccount:${namespace}:${name}`,
      aud: opts.audiences ?? [ISSUER],
      exp,
      iat: now,
      nbf: now,
      'kubernetes.io': {
        namespace,
        serviceaccount: { name, uid: serviceAccount.metadata.uid ?? '' },
      },
    };
    const signingInput = `${b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))}.${b64url(JSON.stringify(claims))}`;
    const signature = createHmac('sha256', this.#key).update(signingInput).digest('base64url');
    return {
      token: `${signingInput}.${signature}`,
      expirationTimestamp: new Date(exp * 1000).toISOString().replace(/\.\d+Z$/, 'Z'),
    };
  }

  /** The user of a bearer token; undefined when nobody issued it (or it expired). */
  userOfToken(token: string): UserInfo | undefined {
    if (Object.hasOwn(this.#users, token)) {
      const u = this.#users[token] as TestUser;
      return {
        name: u.username,
        ...(u.uid ? { uid: u.uid } : {}),
        groups: [...new Set([...(u.groups ?? []), 'system:authenticated'])],
      };
    }
    return this.#serviceAccountUser(token);
  }

  /** The user of an `Authorization` header: anonymous without a bearer token. */
  authenticate(header: string | undefined): UserInfo | undefined {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    if (!m) return ANONYMOUS;
    return this.userOfToken(m[1] ?? '');
  }

  #serviceAccountUser(token: string): UserInfo | undefined {
    const [header, payload, signature] = token.split('.');
    if (!header || !payload || !signature) return undefined;
    const expected = createHmac('sha256', this.#key).update(`${header}.${payload}`).digest();
    const given = Buffer.from(signature, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Claims;
    if (claims.exp <= Date.now() / 1000) return undefined;
    const { namespace, serviceaccount } = claims['kubernetes.io'];
    const sa = this.#store.get('/serviceaccounts', namespace, serviceaccount.name);
    if (!sa || sa.metadata.uid !== serviceaccount.uid) return undefined;
    return {
      name: `system:serviceaccount:${namespace}:${serviceaccount.name}`,
      uid: serviceaccount.uid,
      groups: [
        'system:serviceaccounts',
        `system:serviceaccounts:${namespace}`,
        'system:authenticated',
      ],
    };
  }
}

/** TokenReview: the token in spec.token, looked up as a request's bearer token would be. */
export function tokenReview(body: unknown, authn: Authenticator): object {
  const spec = ((body ?? {}) as { spec?: { token?: unknown; audiences?: unknown } }).spec ?? {};
  const token = typeof spec.token === 'string' ? spec.token : '';
  const user = authn.userOfToken(token);
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
            username: user.name,
            ...(user.uid ? { uid: user.uid } : {}),
            groups: user.groups,
          },
          ...(audiences ? { audiences } : {}),
        }
      : { authenticated: false, error: 'invalid bearer token' },
  };
}
