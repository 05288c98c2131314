// A thin JSON client for the Kubernetes API on top of @kubernetes/client-node's
// KubeConfig (which resolves the server, TLS and credentials). The generated API
// classes deserialize into class instances with Date fields and hide the HTTP status;
// the operator needs plain JSON, the status code of every failure (409, 404, 410) and
// exact control of the patch content types, so it talks HTTP itself, with undici's
// `request` (no WHATWG Request, Headers and streams per call, as `fetch` makes).
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { request } from 'undici';

/** A failed API call, carrying the HTTP status and the `Status` body's reason. */
export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string | undefined;
  readonly body: unknown;

  constructor(code: number, message: string, reason?: string, body?: unknown) {
    super(message);
    this.name = 'KubeApiError';
    this.code = code;
    this.reason = reason;
    this.body = body;
  }
}

export const isConflict = (err: unknown): boolean =>
  err instanceof KubeApiError && err.code === 409;
export const isNotFound = (err: unknown): boolean =>
  err instanceof KubeApiError && err.code === 404;

export type Verb = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RequestOptions {
  body?: unknown;
  /** Defaults to application/json (or json-patch+json etc. for PATCH). */
  contentType?: string;
  query?: Record<string, string | number | boolean | undefined>;
  signal?: AbortSignal;
}

/** The content types of the three PATCH flavours (RFC 6902, RFC 7386, strategic). */
export const PatchType = {
  json: 'application/json-patch+json',
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
} as const;

/** One RFC 7234 `Warning` header value: `299 - "text"` (the API server's form). */
export interface WarningHeader {
  code: number;
  agent: string;
  text: string;
}

const WARNING_VALUE = /\s*(\d{3}) ([^\s",]+) "((?:[^"\\]|\\.)*)"(?: "[^"]*")?\s*(?:,|$)/y;

/**
 * Parse `Warning` header values, each possibly a comma-separated list, as apimachinery's
 * net.ParseWarningHeaders does; parsing a value stops at the first malformed warning.
 */
export function parseWarningHeaders(values: readonly string[]): WarningHeader[] {
  const out: WarningHeader[] = [];
  for (const value of values) {
    WARNING_VALUE.lastIndex = 0;
    while (WARNING_VALUE.lastIndex < value.length) {
      const m = WARNING_VALUE.exec(value);
      if (!m) break;
      out.push({
        code: Number(m[1]),
        agent: m[2] ?? '',
        text: (m[3] ?? '').replace(/\\(.)/g, '$1'),
      });
    }
  }
  return out;
}

/** Default per-request timeout (client-go has none; we never want a call to hang forever). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

const METHODS: Record<Verb, HttpMethod> = {
  GET: HttpMethod.GET,
  POST: HttpMethod.POST,
  PUT: HttpMethod.PUT,
  PATCH: HttpMethod.PATCH,
  DELETE: HttpMethod.DELETE,
};

/** Distinct warning texts a client remembers, so as to report each once. */
const MAX_REMEMBERED_WARNINGS = 1000;

export class KubeClient {
  readonly config: KubeConfig;
  readonly #timeoutMs: number;
  readonly #onWarning: ((message: string) => void) | undefined;
  /** Warning texts already reported: each is reported once per client. */
  readonly #warned = new Set<string>();
  #dispatcher: ReturnType<RequestContext['getDispatcher']> | undefined;

  /**
   * `onWarning` receives each distinct 299 `Warning` the API server sends (a finalizer
   * name without a path, an unknown field, a deprecated version), once per client, as
   * client-go's warning handler logs them (deduplicated, as controller-runtime's
   * KubeAPIWarningLogger does by default).
   */
  constructor(
    config: KubeConfig,
    opts: { timeoutMs?: number; onWarning?: (message: string) => void } = {},
  ) {
    this.config = config;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#onWarning = opts.onWarning;
  }

  #handleWarnings(header: string | string[] | undefined): void {
    if (header === undefined || !this.#onWarning) return;
    for (const w of parseWarningHeaders(typeof header === 'string' ? [header] : header)) {
      // client-go's WarningLogger: only 299 warnings with a text.
      if (w.code !== 299 || w.text === '' || this.#warned.has(w.text)) continue;
      // Bounded: texts naming objects (a finalizer of each resource) must not grow it
      // for the life of the process; past the bound, new texts are still logged.
      if (this.#warned.size < MAX_REMEMBERED_WARNINGS) this.#warned.add(w.text);
      this.#onWarning(w.text);
    }
  }

  /** Issue one request and return the parsed JSON body. Non-2xx answers throw KubeApiError. */
  async request<T>(verb: Verb, path: string, opts: RequestOptions = {}): Promise<T> {
    const cluster = this.config.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/$/, '') + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const ctx = new RequestContext(url.toString(), METHODS[verb]);
    await this.config.applySecurityAuthentication(ctx);
    const headers = ctx.getHeaders();
    headers['Accept'] = 'application/json';
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] = opts.contentType ?? 'application/json';
    }
    // One timer per request, cleared as soon as the answer is read: AbortSignal.timeout
    // would keep a timer and its signal alive for the whole timeout after every call
    // (thousands of them at a few hundred requests per second).
    const timeout = new AbortController();
    const timer = setTimeout(
      () => timeout.abort(new DOMException('The operation timed out', 'TimeoutError')),
      this.#timeoutMs,
    );
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout.signal]) : timeout.signal;
    // client-node makes a fresh dispatcher (a connection pool with the kubeconfig's
    // TLS settings) for every request; reuse the first so connections are kept alive.
    this.#dispatcher ??= ctx.getDispatcher();
    const dispatcher = this.#dispatcher;
    let code: number;
    let text: string;
    try {
      const res = await request(url, {
        method: verb,
        headers,
        signal,
        ...(body !== undefined ? { body } : {}),
        ...(dispatcher ? { dispatcher } : {}),
      });
      code = res.statusCode;
      this.#handleWarnings(res.headers['warning']);
      text = await res.body.text();
    } finally {
      clearTimeout(timer);
    }
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    if (code < 200 || code >= 300) {
      const status = (parsed ?? {}) as { message?: unknown; reason?: unknown };
      const message =
        typeof status.message === 'string'
          ? status.message
          : `${verb} ${url.pathname}: HTTP ${code}`;
      throw new KubeApiError(
        code,
        message,
        typeof status.reason === 'string' ? status.reason : undefined,
        parsed,
      );
    }
    return parsed as T;
  }
}
