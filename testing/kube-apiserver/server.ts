// The in-memory Kubernetes-compatible API server used by the operator's tests:
// plain HTTP on 127.0.0.1. By default any token is accepted and nothing is authorised;
// with `authorization: true` every request is authenticated (authn.ts) and authorised
// by RBAC (authz.ts, rbac-escalation.ts), as a real cluster does. See README.md.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import {
  AGGREGATED_CONTENT_TYPE,
  aggregatedDiscovery,
  apiGroupDoc,
  apiGroupList,
  apiResourceList,
  apiVersions,
  wantsAggregated,
} from './discovery.ts';
import { Faults, type RequestFacts } from './faults.ts';
import {
  createObject,
  deleteObject,
  getObject,
  patchObject,
  updateObject,
  type Ctx,
  type DeleteOptions,
  type Target,
  type WriteOptions,
} from './handlers.ts';
import { fromStorage } from './codec.ts';
import { groupVersionDoc, openApiIndex } from './openapi.ts';
import { CRD_TYPE, Registry, storageKey, type CrdSpec, type KubeObject } from './resources.ts';
import { waitUntilFresh } from './freshness.ts';
import {
  checkListOptions,
  decodeListOptions,
  listRead,
  queryBool,
  watchResourceVersion,
  type ListOptions,
} from './list-options.ts';
import { listPage } from './pagination.ts';
import { canonical } from './patch.ts';
import { withType } from './admission.ts';
import { ADMIN_TOKEN, Authenticator, DEFAULT_USERS, tokenReview, type TestUser } from './authn.ts';
import {
  authorize,
  forbiddenMessage,
  RBAC_GROUP,
  subjectAccessReview,
  type UserInfo,
} from './authz.ts';
import { bootstrapRbac } from './bootstrap-rbac.ts';
import { checkRbacWrite } from './rbac-escalation.ts';
import { requestAttributes } from './request-info.ts';
import { selfSignedCertificate } from './tls.ts';
import {
  fieldSelector,
  parseFieldSelector,
  parseLabelSelector,
  type Selector,
} from './selectors.ts';
import {
  ApiError,
  badRequest,
  forbidden,
  forcedError,
  methodNotAllowed,
  notFound,
  unauthorized,
  unsupportedMediaType,
} from './status.ts';
import { Storage } from './storage.ts';
import { toTable, wantsTable } from './table.ts';
import { serveWatch } from './watch.ts';
import type { FieldValidation } from './admission.ts';

export interface LoggedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType?: string;
  accept?: string;
  /** HTTP status answered (0 while a response is not started). */
  status: number;
  body?: string;
  /** With `authorization`: the authenticated user (`system:anonymous` without a token). */
  user?: string;
  /** With `authorization`: the Status message of a 401 or 403 answered by authn/authz. */
  denied?: string;
}

export interface KubeApiServerOptions {
  /** How many change events watches can replay; older RVs get 410 Expired. Default 1000. */
  historyWindow?: number;
  /** Interval of periodic BOOKMARK events on watches that allow them. Default 5000 ms. */
  bookmarkIntervalMs?: number;
  /**
   * Bearer tokens TokenReview recognises, and their users (default: the kubeconfig's
   * token, a cluster admin). Without `authorization` other requests accept any token.
   */
  users?: Record<string, TestUser>;
  /**
   * Authenticate and authorise every request as a cluster with RBAC does: unknown
   * bearer tokens get 401, requests RBAC does not allow get 403 (with the real
   * server's message), writes of Roles and bindings are checked for escalation, and the
   * bootstrap ClusterRoles (cluster-admin, system:discovery, ...) exist. Default false.
   */
  authorization?: boolean;
  /**
   * Serve https with a self-signed certificate for 127.0.0.1 (made with openssl); the
   * kubeconfig trusts it as its certificate authority. kubectl sends bearer tokens
   * only over https, so tests that run kubectl with `authorization` need this.
   */
  tls?: boolean;
  /**
   * How long after a CRD's spec changes (or the CRD goes) the watches on its custom
   * resources end: the old storage is torn down after a one-second grace for in-flight
   * requests (customresource_handler.go tearDown). Default 1000 ms.
   */
  crdStorageTeardownMs?: number;
}

export interface KubeApiServer {
  url: string;
  port: number;
  /** With `tls`: the serving certificate (PEM), the CA to trust. */
  ca?: string;
  /** Every request received, in order. */
  requests: LoggedRequest[];
  clearRequests(): void;
  faults: Faults;
  /** Shortcut for faults.closeWatches(). */
  closeWatches(): number;
  /**
   * Write `<dir>/kubeconfig` (plain http, the admin token, namespace default), or, with
   * `as`, `<dir>/<file>` for another identity (e.g. a service account token).
   */
  writeKubeconfig(
    dir: string,
    as?: { token: string; user?: string; namespace?: string; file?: string },
  ): string;
  /**
   * A token for an existing ServiceAccount, as TokenRequest issues one (its user is
   * `system:serviceaccount:<ns>:<name>`). Throws when the ServiceAccount does not exist.
   */
  serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): string;
  /** Create (or replace) every CustomResourceDefinition in the YAML files of `dir`. */
  applyCrdsFrom(dir: string): string[];
  /** Create or replace one CRD object. */
  applyCrd(crd: Record<string, unknown>): void;
  /** Current value of the global resourceVersion counter. */
  resourceVersion(): number;
  setHistoryWindow(n: number): void;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(
  res: ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string | string[]> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
  res.end(text);
}

function sendError(res: ServerResponse, err: unknown): void {
  const apiErr =
    err instanceof ApiError
      ? err
      : new ApiError({
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `Internal error occurred: ${err instanceof Error ? err.message : String(err)}`,
          reason: 'InternalError',
          code: 500,
        });
  if (!res.headersSent) sendJson(res, apiErr.code, apiErr.status);
  else res.end();
}

function notFoundPath(): ApiError {
  return new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'the server could not find the requested resource',
    reason: 'NotFound',
    details: {},
    code: 404,
  });
}

function parseBody(raw: string, contentType: string): unknown {
  if (contentType.includes('protobuf') || contentType.includes('cbor')) {
    // K26: JSON only. kubectl's typed commands (create namespace, create secret) send
    // protobuf for built-ins; `kubectl apply -f` sends JSON.
    throw unsupportedMediaType(contentType, ['application/json', 'application/yaml']);
  }
  if (raw.trim() === '') return undefined;
  try {
    return contentType.includes('yaml')
      ? (parseYaml(raw) as unknown)
      : (JSON.parse(raw) as unknown);
  } catch (err) {
    throw badRequest(`error decoding request body: ${(err as Error).message}`);
  }
}

function writeOptions(q: URLSearchParams): WriteOptions {
  const fv = q.get('fieldValidation') ?? 'Warn';
  if (!['Strict', 'Warn', 'Ignore'].includes(fv)) {
    throw badRequest(`fieldValidation must be one of Ignore, Warn or Strict, got ${fv}`);
  }
  const dryRun = q.get('dryRun');
  if (dryRun && dryRun !== 'All') {
    throw badRequest(`dryRun: Unsupported value: "${dryRun}": supported values: "All"`);
  }
  const fieldManager = q.get('fieldManager');
  return {
    fieldValidation: fv as FieldValidation,
    ...(fieldManager ? { fieldManager } : {}),
    force: q.get('force') === 'true',
    dryRun: dryRun === 'All',
  };
}

function warningHeaders(warnings: string[]): Record<string, string[]> {
  return warnings.length > 0 ? { Warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`) } : {};
}

export async function startKubeApiServer(
  options: KubeApiServerOptions = {},
): Promise<KubeApiServer> {
  const storage = new Storage(options.historyWindow ?? 1000);
  const registry = new Registry();
  const ctx: Ctx = { storage, registry };
  const faults = new Faults();
  const requests: LoggedRequest[] = [];
  const bookmarkIntervalMs = options.bookmarkIntervalMs ?? 5000;
  const crdStorageTeardownMs = options.crdStorageTeardownMs ?? 1000;
  // Open watch streams by resource (storageKey), so a CRD change can end its own.
  const watchesByResource = new Map<string, Set<() => void>>();
  const teardowns = new Set<NodeJS.Timeout>();
  function trackWatch(resource: string, end: () => void): () => void {
    const untrack = faults.track(end);
    const open = watchesByResource.get(resource) ?? new Set<() => void>();
    watchesByResource.set(resource, open);
    open.add(end);
    return () => {
      untrack();
      open.delete(end);
    };
  }
  // A CRD whose spec or accepted names change, or that goes, has its custom resources'
  // storage recreated (customresource_handler.go updateCustomResourceDefinition,
  // removeDeadStorage): the new watch cache starts at the current RV, so a watch
  // resumed from an older one gets 410 Expired (watch_cache_history.go), and the old
  // cacher, stopped after tearDown's grace, ends the watches it served (cacher.go
  // terminateAllWatchers; the stream just ends, handlers/watch.go). Watches opened
  // after the change are the new storage's and stay open.
  storage.subscribe((e) => {
    if (e.resource !== storageKey(CRD_TYPE) || e.type === 'ADDED' || !e.previous) return;
    const crdKey = (o: KubeObject): string => {
      const spec = o.spec as CrdSpec;
      return storageKey({ group: spec.group, plural: spec.names.plural });
    };
    const acceptedNames = (o: KubeObject): unknown =>
      (o.status as { acceptedNames?: unknown } | undefined)?.acceptedNames;
    if (
      e.type === 'MODIFIED' &&
      canonical(e.object.spec) === canonical(e.previous.spec) &&
      canonical(acceptedNames(e.object)) === canonical(acceptedNames(e.previous))
    ) {
      return;
    }
    const oldKey = crdKey(e.previous);
    storage.restartWatchCache(oldKey, e.rv);
    if (e.type === 'MODIFIED') storage.restartWatchCache(crdKey(e.object), e.rv);
    const served = [...(watchesByResource.get(oldKey) ?? [])];
    const timer = setTimeout(() => {
      teardowns.delete(timer);
      for (const end of served) end();
    }, crdStorageTeardownMs);
    teardowns.add(timer);
  });
  const users = { ...DEFAULT_USERS, ...options.users };
  const authn = new Authenticator(users, storage);
  const authorizing = options.authorization === true;
  const nsType = registry.find('', 'v1', 'namespaces');
  if (!nsType) throw new Error('namespaces type missing');
  for (const name of ['default', 'kube-system', 'kube-public']) {
    createObject(ctx, { rt: nsType }, { metadata: { name } }, { fieldValidation: 'Strict' });
  }
  if (authorizing) {
    const { clusterRoles, clusterRoleBindings } = bootstrapRbac();
    for (const [plural, objects] of [
      ['clusterroles', clusterRoles],
      ['clusterrolebindings', clusterRoleBindings],
    ] as const) {
      const rt = registry.find(RBAC_GROUP, 'v1', plural);
      if (!rt) throw new Error(`${plural} type missing`);
      for (const o of objects) createObject(ctx, { rt }, o, { fieldValidation: 'Strict' });
    }
  }
  let serverAddress = '';

  function splitApiPath(
    segments: string[],
  ): { group: string; version: string; rest: string[] } | undefined {
    if (segments[0] === 'api' && segments.length >= 3) {
      return { group: '', version: segments[1] ?? '', rest: segments.slice(2) };
    }
    if (segments[0] === 'apis' && segments.length >= 4) {
      return { group: segments[1] ?? '', version: segments[2] ?? '', rest: segments.slice(3) };
    }
    return undefined;
  }

  /** `/api/v1/...` or `/apis/<g>/<v>/...` → type, namespace, name, subresource. */
  function resolveTarget(segments: string[]): Target | undefined {
    const split = splitApiPath(segments);
    if (!split) return undefined;
    const { group, version } = split;
    let rest = split.rest;
    let namespace: string | undefined;
    const inner = registry.find(group, version, rest[2] ?? '');
    if (rest[0] === 'namespaces' && rest.length >= 3 && inner?.namespaced) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const rt = registry.find(group, version, rest[0] ?? '');
    if (!rt || rest.length > 3) throw notFoundPath();
    if (rt.namespaced && !namespace && rest.length > 1) throw notFoundPath();
    const [, name, sub] = rest;
    if (sub !== undefined && !(sub === 'status' && rt.statusSubresource)) throw notFoundPath();
    return {
      rt,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(name !== undefined ? { name } : {}),
      ...(sub !== undefined ? { subresource: sub } : {}),
    };
  }

  const VERSION_INFO = {
    major: '1',
    minor: '35',
    gitVersion: 'v1.35.0',
    gitCommit: 'hookgate-test',
    gitTreeState: 'clean',
    buildDate: '2026-01-01T00:00:00Z',
    goVersion: 'go1.25',
    compiler: 'gc',
    platform: 'linux/amd64',
  };

  /** Discovery documents (K28); undefined when the path is not a discovery path. */
  function discoveryDoc(
    path: string,
    accept: string | undefined,
  ): { body: unknown; contentType?: string } | undefined {
    const segs = path.split('/').filter(Boolean);
    if (path === '/version') return { body: VERSION_INFO };
    if (path === '/api' || path === '/apis') {
      if (wantsAggregated(accept)) {
        const body = aggregatedDiscovery(registry, path === '/api');
        return { body, contentType: AGGREGATED_CONTENT_TYPE };
      }
      return { body: path === '/api' ? apiVersions(serverAddress) : apiGroupList(registry) };
    }
    if (segs[0] === 'api' && segs.length === 2) {
      return { body: apiResourceList(registry, '', segs[1] ?? '') };
    }
    if (segs[0] === 'apis' && segs.length === 2)
      return { body: apiGroupDoc(registry, segs[1] ?? '') };
    if (segs[0] === 'apis' && segs.length === 3) {
      return { body: apiResourceList(registry, segs[1] ?? '', segs[2] ?? '') };
    }
    return undefined;
  }

  /** OpenAPI v3 documents (K29); v2 is 404, as kubectl tolerates. */
  function openApiDoc(path: string): { body: unknown; contentType?: string } | undefined {
    const segs = path.split('/').filter(Boolean);
    if (segs[0] !== 'openapi') return undefined;
    if (path === '/openapi/v3') return { body: openApiIndex(registry) };
    if (segs[1] !== 'v3') return { body: undefined };
    const gv = segs.slice(2);
    return gv[0] === 'api'
      ? { body: groupVersionDoc(registry, '', gv[1] ?? '') }
      : { body: groupVersionDoc(registry, gv[1] ?? '', gv[2] ?? '') };
  }

  function serveMeta(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    if (path === '/healthz' || path === '/livez' || path === '/readyz') {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
      return true;
    }
    const doc = discoveryDoc(path, req.headers.accept) ?? openApiDoc(path);
    if (!doc) return false;
    if (doc.body === undefined) throw notFoundPath();
    if (req.method !== 'GET' && req.method !== 'HEAD') throw methodNotAllowed(req.method ?? '');
    sendJson(
      res,
      200,
      doc.body,
      typeof doc.contentType === 'string' ? { 'Content-Type': doc.contentType } : {},
    );
    return true;
  }

  async function serveList(
    req: IncomingMessage,
    res: ServerResponse,
    t: Target,
    q: URLSearchParams,
  ): Promise<void> {
    // ListResource's order: decode the query (400s, the selectors last), default and
    // validate the options (422), then check the field labels (400).
    const decoded = decodeListOptions(q);
    const labels = parseLabelSelector(q.get('labelSelector'));
    const fieldReqs = parseFieldSelector(q.get('fieldSelector'));
    const opts = checkListOptions(decoded);
    // crConverter.ConvertFieldLabel: a cluster-scoped custom resource has no
    // metadata.namespace field label (core types' conversions all accept it).
    const allowed = [
      'metadata.name',
      ...(t.rt.custom && !t.rt.namespaced ? [] : ['metadata.namespace']),
      ...t.rt.selectableFields,
    ];
    const fields = fieldSelector(fieldReqs, allowed);
    if (opts.watch) {
      serveWatchRequest(req, res, t, opts, labels, fields);
      return;
    }
    const read = listRead(opts);
    if (read.minRv > 0n) {
      const left = new AbortController();
      res.once('close', () => left.abort());
      try {
        await waitUntilFresh(storage, read.minRv, left.signal);
      } catch (err) {
        if (left.signal.aborted) return;
        throw err;
      }
    }
    const page = listPage(
      storage,
      storageKey(t.rt),
      t.namespace,
      (o) => fromStorage(t.rt, o),
      (o) => labels(o) && fields(o),
      read,
    );
    const items = page.items.map((o) => withType(o, t.rt));
    // etcd's count includes objects a selector drops, so with one the API server leaves
    // remainingItemCount out (storage/continue.go PrepareContinueToken: Predicate.Empty()).
    const selected = [q.get('labelSelector'), q.get('fieldSelector')].some((s) => s?.trim());
    const metadata = {
      resourceVersion: String(page.rv),
      ...(page.continue ? { continue: page.continue } : {}),
      ...(page.remainingItemCount !== undefined && !selected
        ? { remainingItemCount: page.remainingItemCount }
        : {}),
    };
    if (wantsTable(req.headers.accept)) {
      sendJson(res, 200, { ...(toTable(t.rt, items) as object), metadata });
      return;
    }
    sendJson(res, 200, {
      apiVersion: t.rt.group ? `${t.rt.group}/${t.rt.version}` : t.rt.version,
      kind: t.rt.listKind,
      metadata,
      items,
    });
  }

  function serveWatchRequest(
    req: IncomingMessage,
    res: ServerResponse,
    t: Target,
    opts: ListOptions,
    labels: Selector,
    fields: Selector,
  ): void {
    watchResourceVersion(opts);
    serveWatch(
      storage,
      res,
      {
        rt: t.rt,
        ...(t.namespace !== undefined ? { namespace: t.namespace } : {}),
        resourceVersion: opts.resourceVersion,
        ...(opts.sendInitialEvents !== undefined
          ? { sendInitialEvents: opts.sendInitialEvents }
          : {}),
        allowWatchBookmarks: opts.allowWatchBookmarks,
        ...(opts.timeoutSeconds !== undefined
          ? { timeoutSeconds: Number(opts.timeoutSeconds) }
          : {}),
        labels,
        fields,
        table: wantsTable(req.headers.accept),
      },
      { bookmarkIntervalMs, track: (end) => trackWatch(storageKey(t.rt), end) },
    );
  }

  function deleteOptions(body: unknown, q: URLSearchParams): DeleteOptions {
    const b = (typeof body === 'object' && body !== null ? body : {}) as DeleteOptions;
    const policy = q.get('propagationPolicy') ?? b.propagationPolicy;
    const dryRun = q.getAll('dryRun');
    return {
      ...b,
      ...(policy ? { propagationPolicy: policy } : {}),
      ...(dryRun.length > 0 ? { dryRun } : {}),
    };
  }

  /** A PATCH's options: a server-side apply that creates needs `create` too (handlers/patch.go). */
  function patchOptions(
    req: IncomingMessage,
    q: URLSearchParams,
    user: UserInfo | undefined,
  ): WriteOptions {
    if (!user) return writeOptions(q);
    const url = new URL(req.url ?? '/', 'http://localhost');
    return { ...writeOptions(q), authorizeCreate: () => authorizeAs(user, 'PATCH', url, 'create') };
  }

  async function serveResource(
    req: IncomingMessage,
    res: ServerResponse,
    t: Target,
    q: URLSearchParams,
    raw: string,
    user: UserInfo | undefined,
  ): Promise<void> {
    const method = req.method ?? 'GET';
    const contentType = req.headers['content-type'] ?? 'application/json';
    if (user && t.rt.group === RBAC_GROUP && ['POST', 'PUT', 'PATCH'].includes(method)) {
      // Escalation prevention: what the write would store, checked before it is stored.
      const dry = { ...writeOptions(q), dryRun: true };
      const body = () => parseBody(raw, contentType);
      const would =
        method === 'POST'
          ? createObject(ctx, t, body(), dry)
          : method === 'PUT'
            ? updateObject(ctx, t, body(), dry)
            : patchObject(ctx, t, contentType, raw, dry);
      checkRbacWrite(storage, user, t.rt.plural, would.body);
    }
    if (!t.name) {
      if (method === 'GET') return await serveList(req, res, t, q);
      if (method === 'POST') {
        if (t.rt.namespaced && !t.namespace) throw methodNotAllowed(method);
        const out = createObject(ctx, t, parseBody(raw, contentType), writeOptions(q));
        return sendJson(res, out.code, out.body, warningHeaders(out.warnings));
      }
      throw methodNotAllowed(method);
    }
    if (method === 'GET') {
      const obj = getObject(ctx, t);
      return sendJson(
        res,
        200,
        wantsTable(req.headers.accept) ? toTable(t.rt, [obj], obj.metadata.resourceVersion) : obj,
      );
    }
    let out;
    if (method === 'PUT') out = updateObject(ctx, t, parseBody(raw, contentType), writeOptions(q));
    else if (method === 'PATCH')
      out = patchObject(ctx, t, contentType, raw, patchOptions(req, q, user));
    else if (method === 'DELETE' && !t.subresource)
      out = deleteObject(ctx, t, deleteOptions(parseBody(raw, contentType), q));
    else throw methodNotAllowed(method);
    sendJson(res, out.code, out.body, warningHeaders(out.warnings));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const entry: LoggedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      ...(req.headers['content-type'] ? { contentType: req.headers['content-type'] } : {}),
      ...(req.headers.accept ? { accept: req.headers.accept } : {}),
      status: 0,
    };
    requests.push(entry);
    const writeHead = res.writeHead.bind(res);
    res.writeHead = ((...args: Parameters<ServerResponse['writeHead']>) => {
      entry.status = args[0];
      return writeHead(...args);
    }) as ServerResponse['writeHead'];
    try {
      const raw = await readBody(req);
      if (raw) entry.body = raw;
      const user = authorizing ? admit(req, url, entry) : undefined;
      const facts: RequestFacts = {
        method: entry.method,
        path: entry.path,
        query: url.searchParams,
        watch: queryBool(url.searchParams.get('watch') ?? '0'),
      };
      const fault = faults.take(facts);
      if (fault.delayMs > 0) await new Promise((r) => setTimeout(r, fault.delayMs));
      if (fault.status !== undefined)
        return forceFault(res, facts, fault.status, fault.asWatchEvent === true);
      if (serveReview(req, res, url.pathname, raw)) return;
      if (serveTokenRequest(req, res, url.pathname, raw)) return;
      if (serveMeta(req, res, url.pathname)) return;
      const target = resolveTarget(url.pathname.split('/').filter(Boolean));
      if (!target) throw notFoundPath();
      await serveResource(req, res, target, url.searchParams, raw, user);
    } catch (err) {
      // Every 401 and 403 (authentication, RBAC, escalation) is in the log with its message.
      if (authorizing && err instanceof ApiError && (err.code === 401 || err.code === 403))
        entry.denied = err.status.message;
      sendError(res, err);
    }
  }

  /**
   * Authentication, then RBAC, before anything is served (the API server's filter
   * chain): the user, or a thrown 401 or 403.
   */
  function admit(req: IncomingMessage, url: URL, entry: LoggedRequest): UserInfo {
    const user = authn.authenticate(req.headers.authorization);
    if (!user) throw unauthorized();
    entry.user = user.name;
    authorizeAs(user, req.method ?? 'GET', url);
    return user;
  }

  /** RBAC for one request (optionally as another verb); a thrown 403 when denied. */
  function authorizeAs(user: UserInfo, method: string, url: URL, verb?: string): void {
    const attrs = requestAttributes(method, url.pathname, url.searchParams);
    if (verb) attrs.verb = verb;
    const decision = authorize(storage, user, attrs);
    if (decision.allowed) return;
    throw forbidden(
      attrs.resourceRequest ? { group: attrs.apiGroup, plural: attrs.resource } : undefined,
      attrs.name,
      forbiddenMessage(user, attrs, decision.reason),
    );
  }

  /** TokenRequest: POST …/serviceaccounts/<name>/token issues a bound token. */
  function serveTokenRequest(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    raw: string,
  ): boolean {
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/serviceaccounts\/([^/]+)\/token$/.exec(path);
    if (!m) return false;
    if (req.method !== 'POST') throw methodNotAllowed(req.method ?? '');
    const [, namespace = '', name = ''] = m;
    const sa = storage.get('/serviceaccounts', namespace, name);
    if (!sa) throw notFound({ group: '', plural: 'serviceaccounts' }, name);
    const body = (parseBody(raw, req.headers['content-type'] ?? 'application/json') ?? {}) as {
      spec?: { expirationSeconds?: number; audiences?: string[] };
    };
    const spec = body.spec ?? {};
    const issued = authn.issue(sa, {
      ...(typeof spec.expirationSeconds === 'number'
        ? { expirationSeconds: spec.expirationSeconds }
        : {}),
      ...(Array.isArray(spec.audiences) ? { audiences: spec.audiences } : {}),
    });
    sendJson(res, 201, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      metadata: { name, namespace, creationTimestamp: null },
      spec: { ...spec, expirationSeconds: spec.expirationSeconds ?? 3600 },
      status: issued,
    });
    return true;
  }

  /** TokenReview and SubjectAccessReview (create only; nothing is stored). */
  function serveReview(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    raw: string,
  ): boolean {
    if (req.method !== 'POST') return false;
    const body = () => parseBody(raw, req.headers['content-type'] ?? 'application/json');
    if (path === '/apis/authentication.k8s.io/v1/tokenreviews') {
      sendJson(res, 201, tokenReview(body(), authn));
      return true;
    }
    if (path === '/apis/authorization.k8s.io/v1/subjectaccessreviews') {
      sendJson(res, 201, subjectAccessReview(body(), storage));
      return true;
    }
    return false;
  }

  /**
   * The resource and object name a forced error names. A subresource's errors name
   * the object and its resource (the status store shares the main store's
   * qualifiedResource: `webhooktriggers.hookgate.dev "x"`, not "status").
   */
  function faultTarget(path: string): { gr: { group: string; plural: string }; name: string } {
    const segs = path.split('/').filter(Boolean);
    try {
      const t = resolveTarget(segs);
      if (t) return { gr: t.rt, name: t.name ?? '' };
    } catch {
      // Not a served resource: guess from the path below.
    }
    return {
      gr: { group: segs[0] === 'apis' ? (segs[1] ?? '') : '', plural: segs.at(-2) ?? '' },
      name: segs.at(-1) ?? '',
    };
  }

  function forceFault(
    res: ServerResponse,
    facts: RequestFacts,
    status: number,
    asWatchEvent: boolean,
  ): void {
    const { gr, name } = faultTarget(facts.path);
    const err = forcedError(status, gr, name);
    if (asWatchEvent && facts.watch) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      res.end(
        `${JSON.stringify({ type: 'ERROR', object: status === 410 ? { ...err.status, reason: 'Expired' } : err.status })}\n`,
      );
      return;
    }
    sendJson(res, err.code, err.status);
  }

  const tls = options.tls ? await selfSignedCertificate() : undefined;
  const onRequest = (req: IncomingMessage, res: ServerResponse) => void handle(req, res);
  const server = tls
    ? createHttpsServer({ cert: tls.cert, key: tls.key }, onRequest)
    : createServer(onRequest);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  serverAddress = `127.0.0.1:${port}`;

  function applyCrd(crd: Record<string, unknown>): void {
    const meta = (crd.metadata ?? {}) as { name?: string };
    const t: Target = { rt: CRD_TYPE, name: meta.name ?? '' };
    const existing = storage.get(
      'apiextensions.k8s.io/customresourcedefinitions',
      undefined,
      meta.name ?? '',
    );
    if (existing) {
      updateObject(
        ctx,
        t,
        { ...crd, metadata: { ...meta, resourceVersion: existing.metadata.resourceVersion } },
        { fieldValidation: 'Strict' },
      );
    } else createObject(ctx, { rt: CRD_TYPE }, crd, { fieldValidation: 'Strict' });
  }

  return {
    url,
    port,
    ...(tls ? { ca: tls.cert } : {}),
    requests,
    clearRequests: () => void requests.splice(0),
    faults,
    closeWatches: () => faults.closeWatches(),
    serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): string {
      const sa = storage.get('/serviceaccounts', namespace, name);
      if (!sa) throw new Error(`serviceaccounts "${name}" not found in namespace ${namespace}`);
      return authn.issue(sa, expirationSeconds ? { expirationSeconds } : {}).token;
    },
    writeKubeconfig(dir, as): string {
      mkdirSync(dir, { recursive: true });
      const path = join(dir, as?.file ?? 'kubeconfig');
      const user = as?.user ?? 'hookgate-test';
      writeFileSync(
        path,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters:',
          '  - name: hookgate-test',
          '    cluster:',
          `      server: ${url}`,
          // Plain http: client-node refuses http unless TLS verification is "skipped".
          tls
            ? `      certificate-authority-data: ${Buffer.from(tls.cert).toString('base64')}`
            : '      insecure-skip-tls-verify: true',
          'users:',
          `  - name: ${JSON.stringify(user)}`,
          '    user:',
          `      token: ${as?.token ?? ADMIN_TOKEN}`,
          'contexts:',
          '  - name: hookgate-test',
          '    context:',
          '      cluster: hookgate-test',
          `      user: ${JSON.stringify(user)}`,
          `      namespace: ${as?.namespace ?? 'default'}`,
          'current-context: hookgate-test',
          '',
        ].join('\n'),
      );
      return path;
    },
    applyCrdsFrom(dir: string): string[] {
      const names: string[] = [];
      for (const file of readdirSync(dir)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort()) {
        for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
          const obj = doc.toJS() as KubeObject | null;
          if (obj?.kind !== 'CustomResourceDefinition') continue;
          applyCrd(obj);
          names.push(obj.metadata.name ?? '');
        }
      }
      return names;
    },
    applyCrd,
    resourceVersion: () => storage.currentRv(),
    setHistoryWindow(n: number) {
      storage.historyWindow = n;
    },
    async close(): Promise<void> {
      for (const timer of teardowns) clearTimeout(timer);
      faults.closeWatches();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
