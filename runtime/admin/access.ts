// Who may use the admin listener, and for what. An authenticator turns a bearer token
// into a user (Kubernetes TokenReview, or one static token) and says whether that user
// may do something to a WebhookTrigger or Workflow (SubjectAccessReview against the
// resources' own RBAC). `AdminAccess` applies it to requests: 401 without a valid token,
// 403 when the user is not allowed; without an authenticator (the dev server on
// loopback) everything is allowed. docs/security.md describes the model.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.ts';

/** The API group of the resources the admin API reads. */
export const RESOURCE_GROUP = 'hookgate.dev';

export interface AdminUser {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** What is asked of the authoriser: a SubjectAccessReview's resourceAttributes. */
export interface ResourceAttributes {
  verb: 'get' | 'list' | 'create';
  resource: 'webhooktriggers' | 'workflows';
  subresource?: string;
  /** Absent or empty: cluster-wide. */
  namespace?: string;
  name?: string;
}

export interface AdminAuthenticator {
  /** The user a bearer token belongs to; undefined when the token is not valid. */
  authenticate(token: string): Promise<AdminUser | undefined>;
  authorize(user: AdminUser, attributes: ResourceAttributes): Promise<boolean>;
}

/** Routes that need a token; the dashboard's static files do not (they hold no data). */
const PROTECTED = /^\/(api|webhook-events)(\/|$|\?)/;

/**
 * The bearer token of the Authorization header; nothing else carries one. (A cookie the
 * dashboard set until 2026-11-28 was taken for GET: the browser sent it to every port
 * of the host, the webhook listener's tenants included.)
 */
function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
}

function unauthenticated(detail: string): HttpProblem {
  return new HttpProblem('HG_ERR_ADMIN_UNAUTHENTICATED', detail, {
    headers: { 'www-authenticate': 'Bearer realm="hookgate-admin"' },
  });
}

/** The API server down or refusing the reviews: 503, never a silent allow. */
async function unavailableOnError<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch {
    throw new HttpProblem('HG_ERR_AUTH_UNAVAILABLE', 'The admin authenticator cannot be reached', {
      headers: { 'retry-after': '5' },
    });
  }
}

function describe(a: ResourceAttributes): string {
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const where = a.namespace ? ` in namespace ${a.namespace}` : ' cluster-wide';
  return `${a.verb} ${resource}.${RESOURCE_GROUP}${a.name ? ` ${a.name}` : ''}${where}`;
}

/** Reading every WebhookTrigger (cluster-wide `get`): a user who may sees every id. */
const EVERY_TRIGGER: ResourceAttributes = { verb: 'get', resource: 'webhooktriggers' };

/** How often a live stream's access is checked again, by default (ms). */
export const DEFAULT_STREAM_RECHECK_MS = 30_000;
/** Checks in a row that could not reach the authenticator before a stream is ended. */
export const MAX_FAILED_STREAM_RECHECKS = 3;

export interface AdminAccessOptions {
  /**
   * How often a live stream's access is checked again (ms; default 30 s). Each check of
   * a stream costs a TokenReview and a SubjectAccessReview once the 10 s review cache
   * has let go of them: 500 streams, about 33 reviews a second.
   */
  streamRecheckMs?: number;
  /** Told when re-checks could not reach the authenticator (once per recheck period). */
  onRecheckError?: (error: unknown) => void;
}

export class AdminAccess {
  private readonly users = new WeakMap<FastifyRequest, AdminUser>();
  /** The token each authenticated request came with, for the re-checks of its stream. */
  private readonly tokens = new WeakMap<FastifyRequest, string>();
  private readonly authenticator: AdminAuthenticator | undefined;
  private readonly recheckMs: number;
  private readonly onRecheckError: (error: unknown) => void;
  /** When the last failed re-check was reported (one report per recheck period at most). */
  #lastRecheckReport = Number.NEGATIVE_INFINITY;

  constructor(authenticator?: AdminAuthenticator, options: AdminAccessOptions = {}) {
    this.authenticator = authenticator;
    this.recheckMs = options.streamRecheckMs ?? DEFAULT_STREAM_RECHECK_MS;
    this.onRecheckError = options.onRecheckError ?? (() => {});
  }

  /**
   * An outage fails every stream's re-check at about the same time: it is reported
   * once per recheck period, not once per stream.
   */
  #recheckFailed(error: unknown): void {
    const now = Date.now();
    if (now - this.#lastRecheckReport < this.recheckMs) return;
    this.#lastRecheckReport = now;
    try {
      this.onRecheckError(error);
    } catch {
      // A failing report must not change what happens to the stream.
    }
  }

  /** Whether requests are checked at all (false: the dev server's `none`). */
  get enabled(): boolean {
    return this.authenticator !== undefined;
  }

  /**
   * Who the request's caller is: the authenticated user's name (Kubernetes: the
   * TokenReview's `username`, one per user or service account). Undefined without an
   * authenticator (the dev server's `none`: every caller is the same one), or before the
   * request was authenticated.
   */
  subject(request: FastifyRequest): string | undefined {
    return this.users.get(request)?.username;
  }

  /** Authenticates every request to the API and the live stream (onRequest). */
  install(app: FastifyInstance): void {
    const auth = this.authenticator;
    if (!auth) return;
    app.addHook('onRequest', async (request) => {
      // The route matched, not the raw URL: an encoded path (`/%61pi/...`) that the
      // router decodes onto an API route is checked like the plain one.
      const route = request.routeOptions.url;
      if (request.method === 'OPTIONS' || route === undefined || !PROTECTED.test(route)) return;
      const token = bearer(request);
      if (!token) throw unauthenticated('Send a bearer token: Authorization: Bearer <token>');
      const user = await unavailableOnError(() => auth.authenticate(token));
      if (!user) throw unauthenticated('The bearer token is not valid');
      this.users.set(request, user);
      this.tokens.set(request, token);
    });
  }

  /**
   * Keeps checking a long-lived answer (a live stream) the way its request was checked:
   * about every `streamRecheckMs` (spread by up to a tenth, so streams opened together
   * do not ask together) the token is authenticated and the user authorised again, and
   * `revoked` is called once with the problem when either now says no (a revoked token,
   * a removed RoleBinding). An authenticator that cannot be reached ends nothing at
   * first (the stream was allowed); after MAX_FAILED_STREAM_RECHECKS such checks in a
   * row it ends the stream with auth-unavailable, as a new request would get. Returns
   * the stop function (call it when the stream ends).
   */
  watch(
    request: FastifyRequest,
    attributes: ResourceAttributes,
    revoked: (problem: HttpProblem) => void,
  ): () => void {
    const auth = this.authenticator;
    const token = this.tokens.get(request);
    if (!auth || token === undefined) return () => {};
    let stopped = false;
    let failures = 0;
    let timer: NodeJS.Timeout | undefined;
    const check = async (): Promise<HttpProblem | undefined> => {
      const user = await auth.authenticate(token);
      if (!user) return unauthenticated('The bearer token is no longer valid');
      if (await auth.authorize(user, attributes)) return undefined;
      return new HttpProblem(
        'HG_ERR_ADMIN_FORBIDDEN',
        `${user.username} may no longer ${describe(attributes)}`,
      );
    };
    const outcome = async (): Promise<HttpProblem | undefined> => {
      try {
        const problem = await check();
        failures = 0;
        return problem;
      } catch (error) {
        if (!stopped) this.#recheckFailed(error);
        if (++failures < MAX_FAILED_STREAM_RECHECKS) return undefined;
        return new HttpProblem(
          'HG_ERR_AUTH_UNAVAILABLE',
          'The admin authenticator could not be reached to check this stream again',
        );
      }
    };
    const next = (): void => {
      timer = setTimeout(
        () => {
          void outcome()
            .then((problem) => {
              if (stopped) return;
              if (!problem) return next();
              stopped = true;
              revoked(problem);
            })
            .catch(() => {
              // `revoked` threw (the stream was gone): nothing more to do for it.
              stopped = true;
            });
        },
        this.recheckMs * (1 + Math.random() / 10),
      );
      timer.unref();
    };
    next();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  /** Whether the request's user may do this (always true without an authenticator). */
  async allowed(request: FastifyRequest, attributes: ResourceAttributes): Promise<boolean> {
    const auth = this.authenticator;
    if (!auth) return true;
    const user = this.users.get(request);
    if (!user) return false;
    return unavailableOnError(() => auth.authorize(user, attributes));
  }

  /**
   * Throws `unknown`, the answer to an id that does not exist, unless the user may do
   * one of `attributes`: an id (an execution's, a dead letter's) of a trigger the user
   * may neither read nor act on is answered as one that does not exist, so that nobody
   * learns what exists in a namespace they cannot read. Checked before anything else is
   * said of it (403, 409...).
   */
  async requireVisible(
    request: FastifyRequest,
    unknown: HttpProblem,
    ...attributes: ResourceAttributes[]
  ): Promise<void> {
    for (const a of attributes) if (await this.allowed(request, a)) return;
    throw unknown;
  }

  /**
   * Throws the answer to an id that does not exist: `unknown`, unless the authoriser
   * cannot be asked now (503 auth-unavailable, as requireVisible answers an id of another
   * namespace then). Otherwise, while the API server is down, an id that exists in a
   * namespace the caller may not read got 503 and an unknown one 404: which ids exist
   * there, told by the outage. It asks whether the user may read every trigger (the one
   * question whose yes shows every id), so an unknown id costs a review, cached as the
   * others. What remains: the review cache (10 s) can hold this answer and not the
   * namespace's (the first seconds of an outage), and the two take different times.
   */
  async throwUnknown(request: FastifyRequest, unknown: HttpProblem): Promise<never> {
    if (this.authenticator) await this.allowed(request, EVERY_TRIGGER);
    throw unknown;
  }

  /** Throws 403 unless the request's user may do this. */
  async require(request: FastifyRequest, attributes: ResourceAttributes): Promise<void> {
    if (await this.allowed(request, attributes)) return;
    const user = this.users.get(request)?.username ?? 'anonymous';
    throw new HttpProblem('HG_ERR_ADMIN_FORBIDDEN', `${user} may not ${describe(attributes)}`);
  }

  /**
   * The items the user may see: everything with a cluster-wide `list`, else those of
   * the namespaces where `verb` is allowed (one check per namespace).
   */
  async filter<T>(
    request: FastifyRequest,
    items: T[],
    namespaceOf: (item: T) => string,
    attributes: Omit<ResourceAttributes, 'namespace' | 'name'>,
  ): Promise<T[]> {
    if (!this.authenticator) return items;
    if (await this.allowed(request, { ...attributes, verb: 'list' })) return items;
    const namespaces = new Map<string, boolean>();
    for (const item of items) namespaces.set(namespaceOf(item), false);
    await Promise.all(
      [...namespaces.keys()].map(async (namespace) => {
        namespaces.set(namespace, await this.allowed(request, { ...attributes, namespace }));
      }),
    );
    return items.filter((item) => namespaces.get(namespaceOf(item)) === true);
  }
}

/** No checks: the dev server on loopback. */
export const OPEN_ACCESS = new AdminAccess();

/** The namespace of a `namespace/name` key (triggers, executions' triggerKey). */
export function namespaceOfKey(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? '' : key.slice(0, slash);
}

/** Reading the WebhookTrigger of a `namespace/name` key (its executions, its live events). */
export function readTrigger(key: string): ResourceAttributes {
  return {
    verb: 'get',
    resource: 'webhooktriggers',
    namespace: namespaceOfKey(key),
    name: nameOfKey(key),
  };
}

/** The name of a `namespace/name` key. */
export function nameOfKey(key: string): string {
  return key.slice(key.indexOf('/') + 1);
}
