// What the dashboard's pages share: DOM helpers, the admin token, and JSON requests
// to the admin API that turn problem documents into readable messages.
// @ts-check

/** @param {string} id */
export const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * @param {string} tag
 * @param {Record<string, string>} [attrs]
 * @param {(Node | string)[]} [children]
 */
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c);
  return node;
}

// The admin API's bearer token (clusters; the dev server needs none), kept for this tab
// only, in this origin's sessionStorage (its port included: a page on the webhook
// listener of the same host cannot read it). It goes as `Authorization: Bearer`, on the
// live streams too (AuthorizedEventSource): no cookie, which every port of the host
// would share. A cookie an earlier dashboard set is removed.
const TOKEN_KEY = 'hookgate.adminToken';
document.cookie = 'hookgate_admin_token=; Path=/; Max-Age=0; SameSite=Strict';

/** @param {string} token */
export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** The stored token as request headers (none without one). */
function authorization() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** Binds the page's Token field (id admin-token) to the stored token; `onChange` after edits. */
export function bindToken(/** @type {() => void} */ onChange) {
  const field = /** @type {HTMLInputElement} */ ($('admin-token'));
  field.value = sessionStorage.getItem(TOKEN_KEY) ?? '';
  field.addEventListener('change', () => {
    setToken(field.value.trim());
    onChange();
  });
}

/** An answer that is not 2xx, with the problem document's detail when there is one. */
export class ApiError extends Error {
  /** @param {number} status @param {string} detail @param {unknown} body */
  constructor(status, detail, body) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.body = body;
  }
}

/**
 * @param {string} url
 * @param {{ method?: string, body?: unknown, headers?: Record<string, string> }} [options]
 *   `headers`: sent besides accept, content-type and the token (an Idempotency-Key)
 */
export async function requestJson(url, options = {}) {
  /** @type {Record<string, string>} */
  const headers = { ...options.headers, accept: 'application/json', ...authorization() };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, {
    method: options.method ?? 'GET',
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const detail = body && typeof body.detail === 'string' ? body.detail : res.statusText;
    throw new ApiError(res.status, detail, body);
  }
  return body;
}

/** @param {string} url */
export const getJson = (url) => requestJson(url);

/** Shows a message in the page's alert box (id problem), or hides it. @param {string} [message] */
export function showProblem(message) {
  const box = $('problem');
  box.hidden = !message;
  box.textContent = message ?? '';
}

/**
 * The detail of a problem document sent as SSE data (a live stream's last `revoked`
 * event: the token or the user's access was withdrawn). @param {unknown} data
 */
export function problemDetail(data) {
  try {
    const problem = JSON.parse(String(data));
    return typeof problem?.detail === 'string' ? problem.detail : String(problem?.title ?? data);
  } catch {
    return String(data);
  }
}

/**
 * An EventSource that sends the stored token (`Authorization: Bearer`), which an
 * EventSource cannot: fetch reads the stream. What the pages use of EventSource behaves
 * the same: `open`, one event per frame named by its `event` field (a MessageEvent with
 * `data` and `lastEventId`), `error`, `readyState`, `close()`. A stream that ends or a
 * connection that fails is reconnected after the server's `retry` (3 s until it says),
 * with `Last-Event-ID`: `error` with readyState CONNECTING. A refusal for now (429
 * execution-streams-exceeded, 503 streams-exhausted: the server's caps on open streams)
 * is retried the same way, after its Retry-After when that is later; a connection that
 * keeps failing waits twice as long each time, up to a minute (no storm against a
 * server that is down). Any other answer that is not 200 `text/event-stream` (a 204 at
 * the end of an execution's events, a 401, a 404) closes it for good: `error` with
 * readyState CLOSED.
 */
/** The longest wait between failed connections of an AuthorizedEventSource. */
const MAX_BACKOFF_MS = 60_000;

/** A Retry-After of seconds in milliseconds (0 when absent or an HTTP date). @param {string | null} value */
function retryAfterMs(value) {
  return value !== null && /^\d{1,6}$/.test(value.trim()) ? Number(value) * 1000 : 0;
}

export class AuthorizedEventSource extends EventTarget {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSED = 2;

  /** @type {number} */ readyState = AuthorizedEventSource.CONNECTING;
  #url;
  #retryMs = 3000;
  /** Connections that failed or were refused for now since the last one opened. */
  #failures = 0;
  #lastEventId = '';
  /** @type {AbortController | null} */ #request = null;
  /** @type {number} */ #timer = 0;

  /** @param {string} url */
  constructor(url) {
    super();
    this.#url = url;
    void this.#connect();
  }

  get url() {
    return this.#url;
  }

  close() {
    this.readyState = AuthorizedEventSource.CLOSED;
    clearTimeout(this.#timer);
    this.#request?.abort();
  }

  async #connect() {
    const request = new AbortController();
    this.#request = request;
    /** @type {Record<string, string>} */
    const headers = { accept: 'text/event-stream', ...authorization() };
    if (this.#lastEventId) headers['last-event-id'] = this.#lastEventId;
    /** @type {Response} */
    let res;
    try {
      res = await fetch(this.#url, { headers, cache: 'no-store', signal: request.signal });
    } catch {
      this.#failures++;
      this.#reconnect();
      return;
    }
    if (this.readyState === AuthorizedEventSource.CLOSED) return;
    if (res.status === 429 || res.status === 503) {
      void res.body?.cancel().catch(() => {});
      this.#failures++;
      this.#reconnect(retryAfterMs(res.headers.get('retry-after')));
      return;
    }
    const type = res.headers.get('content-type') ?? '';
    if (res.status !== 200 || !/^text\/event-stream\b/i.test(type) || !res.body) {
      void res.body?.cancel().catch(() => {});
      this.readyState = AuthorizedEventSource.CLOSED;
      this.dispatchEvent(new Event('error'));
      return;
    }
    this.readyState = AuthorizedEventSource.OPEN;
    this.#failures = 0;
    this.dispatchEvent(new Event('open'));
    try {
      await this.#read(res.body);
    } catch {
      // The connection broke (or close() aborted it): reconnected below unless closed.
    }
    this.#reconnect();
  }

  /** @param {number} [atLeastMs] the refusal's Retry-After */
  #reconnect(atLeastMs = 0) {
    if (this.readyState === AuthorizedEventSource.CLOSED) return;
    this.readyState = AuthorizedEventSource.CONNECTING;
    this.dispatchEvent(new Event('error'));
    if (this.readyState === AuthorizedEventSource.CLOSED) return;
    const backoff = Math.min(this.#retryMs * 2 ** Math.max(0, this.#failures - 1), MAX_BACKOFF_MS);
    this.#timer = window.setTimeout(
      () => void this.#connect(),
      Math.max(this.#failures > 0 ? backoff : this.#retryMs, atLeastMs),
    );
  }

  /**
   * Reads frames as the SSE parser does (lines end with CRLF, LF or CR; `:` comments;
   * `event`, `data`, `id`, `retry`; a blank line dispatches), until the stream ends.
   * @param {ReadableStream<Uint8Array>} body
   */
  async #read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let event = '';
    let data = '';
    let hasData = false;
    // The `id` of the frame being read: the last event ID only once the frame ends (as an
    // EventSource does), so a stream cut within a frame resumes before that frame.
    let idBuffer = this.#lastEventId;
    // A chunk that ended with CR: an LF that starts the next one is the same line end.
    let afterCr = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done || this.readyState === AuthorizedEventSource.CLOSED) return;
      const chunk = afterCr && value.startsWith('\n') ? value.slice(1) : value;
      afterCr = chunk.endsWith('\r');
      buffer += chunk;
      const lines = buffer.split(/\r\n|\r|\n/);
      // The last piece has no line end yet.
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        if (this.readyState === AuthorizedEventSource.CLOSED) return;
        if (line === '') {
          this.#lastEventId = idBuffer;
          if (hasData) {
            const type = event || 'message';
            const detail = { data, lastEventId: this.#lastEventId, origin: location.origin };
            this.dispatchEvent(new MessageEvent(type, detail));
          }
          event = '';
          data = '';
          hasData = false;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = text;
        else if (field === 'data') {
          data = hasData ? `${data}\n${text}` : text;
          hasData = true;
        } else if (field === 'id' && !text.includes('\0')) idBuffer = text;
        else if (field === 'retry' && /^\d+$/.test(text)) this.#retryMs = Number(text);
      }
    }
  }
}
