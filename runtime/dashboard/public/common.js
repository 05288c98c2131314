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
// only. A cookie carries it too, for the live streams (EventSource sends no headers);
// the server takes the cookie for reads only.
const TOKEN_KEY = 'hookgate.adminToken';

/** @param {string} token */
export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = token
    ? `hookgate_admin_token=${encodeURIComponent(token)}; Path=/; SameSite=Strict${secure}`
    : 'hookgate_admin_token=; Path=/; Max-Age=0; SameSite=Strict';
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
 * @param {{ method?: string, body?: unknown }} [options]
 */
export async function requestJson(url, options = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
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
