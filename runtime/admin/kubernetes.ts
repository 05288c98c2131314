// Admin authentication by the Kubernetes API: a bearer token is checked with a
// TokenReview (authentication.k8s.io/v1), each request with a SubjectAccessReview
// (authorization.k8s.io/v1) against the RBAC of the WebhookTriggers and Workflows
// themselves. Answers are cached briefly (10 s by default, bounded), so a dashboard's
// polling costs the API server little and a revoked binding takes effect soon.
import { createHash } from 'node:crypto';
import {
  RESOURCE_GROUP,
  type AdminAuthenticator,
  type AdminUser,
  type ResourceAttributes,
} from './access.ts';

/** POSTs a JSON object to the API server and returns the JSON answer (throws on HTTP errors). */
export type KubePost = (path: string, body: object) => Promise<unknown>;

export interface KubernetesAuthOptions {
  post: KubePost;
  /** How long an answer counts. Default 10 s. */
  ttlMs?: number;
  /** Most answers kept per cache. Default 1000. */
  maxEntries?: number;
  /** TokenReview audiences (default: none, the API server's own). */
  audiences?: string[];
  now?: () => number;
}

/** A small TTL cache, oldest evicted first when full. */
class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  private readonly ttlMs: number;
  private readonly max: number;
  private readonly now: () => number;

  constructor(ttlMs: number, max: number, now: () => number) {
    this.ttlMs = ttlMs;
    this.max = max;
    this.now = now;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.until <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V): void {
    this.entries.delete(key);
    if (this.entries.size >= this.max) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, until: this.now() + this.ttlMs });
  }
}

interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}

export class KubernetesAuthenticator implements AdminAuthenticator {
  private readonly tokens: TtlCache<AdminUser | null>;
  private readonly decisions: TtlCache<boolean>;
  private readonly options: KubernetesAuthOptions;

  constructor(options: KubernetesAuthOptions) {
    this.options = options;
    const ttl = options.ttlMs ?? 10_000;
    const max = options.maxEntries ?? 1000;
    const now = options.now ?? Date.now;
    this.tokens = new TtlCache(ttl, max, now);
    this.decisions = new TtlCache(ttl, max, now);
  }

  async authenticate(token: string): Promise<AdminUser | undefined> {
    // Keyed by a digest: the cache never holds a token itself.
    const key = createHash('sha256').update(token).digest('hex');
    const cached = this.tokens.get(key);
    if (cached !== undefined) return cached ?? undefined;
    const answer = (await this.options.post('/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token, ...(this.options.audiences ? { audiences: this.options.audiences } : {}) },
    })) as { status?: TokenReviewStatus };
    const status = answer.status ?? {};
    const user: AdminUser | null =
      status.authenticated === true && status.user?.username
        ? {
            username: status.user.username,
            groups: status.user.groups ?? [],
            ...(status.user.uid ? { uid: status.user.uid } : {}),
            ...(status.user.extra ? { extra: status.user.extra } : {}),
          }
        : null;
    this.tokens.set(key, user);
    return user ?? undefined;
  }

  async authorize(user: AdminUser, attributes: ResourceAttributes): Promise<boolean> {
    const key = JSON.stringify([user.username, user.uid, user.groups, attributes]);
    const cached = this.decisions.get(key);
    if (cached !== undefined) return cached;
    const answer = (await this.options.post('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: user.username,
        groups: user.groups,
        ...(user.uid ? { uid: user.uid } : {}),
        ...(user.extra ? { extra: user.extra } : {}),
        resourceAttributes: {
          group: RESOURCE_GROUP,
          verb: attributes.verb,
          resource: attributes.resource,
          ...(attributes.subresource ? { subresource: attributes.subresource } : {}),
          ...(attributes.namespace ? { namespace: attributes.namespace } : {}),
          ...(attributes.name ? { name: attributes.name } : {}),
        },
      },
    })) as { status?: { allowed?: boolean; denied?: boolean } };
    const allowed = answer.status?.allowed === true && answer.status.denied !== true;
    this.decisions.set(key, allowed);
    return allowed;
  }
}
