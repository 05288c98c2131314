// hookgate Flow Management: the webhook triggers with their state and URLs, one
// trigger's page with Test and Deploy (Send Test Request) and its recent executions,
// each execution's per-run log, followed live while it runs. Plain JavaScript, no
// build step; data reaches the page through textContent and attributes only.
// @ts-check
import {
  $,
  ApiError,
  AuthorizedEventSource,
  bindToken,
  el,
  getJson,
  problemDetail,
  requestJson,
  showProblem,
} from './common.js';

/** @typedef {{ type: string, status: string, reason?: string, message?: string }} Condition */
/** @typedef {{ namespace: string, name: string, spec: any, status: any }} Trigger */

const EXECUTIONS = 20;
const FINISHED = new Set(['succeeded', 'failed']);
const RUN_EVENTS = [
  'queued',
  'attempt.started',
  'attempt.failed',
  'node.started',
  'node.finished',
  'respond',
  'completed',
  'failed',
];

const state = {
  /** @type {Trigger | null} */ trigger: null,
  /** @type {AuthorizedEventSource | null} */ run: null,
  /** @type {string | null} */ runId: null,
  /** A Replay or Retry in flight: both buttons are disabled until it is answered. */
  rerunning: false,
  /**
   * The Idempotency-Key of a replay sent without a 2xx answer (none came, or a refusal):
   * the next click on that execution's Replay sends it again, so that a replay which
   * started although its answer was lost is answered again rather than run twice.
   * @type {{ id: string, key: string } | null}
   */
  replayKey: null,
};

/** The Replay and Retry buttons of the execution log. */
const RUN_ACTIONS = ['replay', 'retry-dead'];

/** A new Idempotency-Key: 128 random bits (getRandomValues also works over plain HTTP). */
function newIdempotencyKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

const errorText = (/** @type {unknown} */ error) =>
  error instanceof Error ? error.message : String(error);

// ---------------------------------------------------------------- list

/** @param {Trigger} t */
const readyOf = (t) =>
  /** @type {Condition[]} */ (t.status?.conditions ?? []).find((c) => c.type === 'Ready');

/** @param {Condition | undefined} ready @param {boolean} [asReady] label as the Ready state */
function stateBadge(ready, asReady = true) {
  const status = ready?.status ?? 'Unknown';
  const label = !asReady
    ? status
    : status === 'True'
      ? 'Ready'
      : status === 'False'
        ? 'Not ready'
        : 'Pending';
  const badge = el('span', { class: `badge ${status.toLowerCase()}` }, [label]);
  if (ready?.reason) badge.setAttribute('title', `${ready.reason}: ${ready.message ?? ''}`);
  return badge;
}

/** @param {string} text @param {string} label */
function copyButton(text, label) {
  const button = el('button', { type: 'button', class: 'button small', 'aria-label': label }, [
    'Copy',
  ]);
  button.addEventListener('click', () => void copy(text, button));
  return button;
}

/** @param {string} text @param {HTMLElement} button */
async function copy(text, button) {
  const label = button.dataset.label ?? button.textContent ?? 'Copy';
  button.dataset.label = label;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed';
  }
  setTimeout(() => (button.textContent = label), 2000);
}

/** @param {Trigger} t */
const authOf = (t) => t.spec.auth?.signature?.preset ?? t.spec.auth?.method ?? 'none';

/**
 * @typedef {{ file: string, document: number, line?: number, column?: number,
 *   object?: string, field: string, message: string }} ManifestProblem
 */

/** `file:line:column`, as editors and `hookgate validate` print a position. @param {ManifestProblem} p */
const positionOf = (p) =>
  p.line === undefined ? p.file : `${p.file}:${p.line}${p.column ? `:${p.column}` : ''}`;

/** Which answer of the manifest problems is the latest asked for (reloads may cross). */
let manifestProblemsAsked = 0;

/**
 * The refused documents of a watched manifest folder (hookgate dev). Nothing shown when
 * there are none, or when this reader may not see them (401, 403: a cluster-wide
 * permission; 404: a server without the list); any other failure is said in the panel.
 */
async function loadManifestProblems() {
  const asked = ++manifestProblemsAsked;
  /** @type {ManifestProblem[]} */
  let items = [];
  /** @type {string | undefined} */
  let failure;
  try {
    items = (await getJson('/api/manifests/errors')).items ?? [];
  } catch (error) {
    if (!(error instanceof ApiError && [401, 403, 404].includes(error.status)))
      failure = `Could not read the manifest problems: ${errorText(error)}`;
  }
  if (asked !== manifestProblemsAsked) return;
  $('manifest-problem-list').replaceChildren(
    ...(failure === undefined
      ? items.map((p) =>
          el('li', {}, [
            el('code', {}, [positionOf(p)]),
            ` ${p.object ? `${p.object}: ` : ''}${p.field ? `${p.field}: ` : ''}${p.message}`,
          ]),
        )
      : [el('li', {}, [failure])]),
  );
  $('manifest-problems').hidden = failure === undefined && items.length === 0;
}

async function loadList() {
  void loadManifestProblems();
  const { items } = await getJson('/api/triggers');
  const rows = /** @type {Trigger[]} */ (items).map((t) => {
    const link = el('a', { href: pageUrl(t) }, [`${t.namespace}/${t.name}`]);
    link.addEventListener('click', (event) => {
      event.preventDefault();
      void openTrigger(t.namespace, t.name, true);
    });
    const url = t.status?.url ?? '';
    return el('tr', {}, [
      el('th', { scope: 'row' }, [link]),
      el('td', {}, [stateBadge(readyOf(t))]),
      el(
        'td',
        { class: 'url' },
        url ? [el('code', {}, [url]), ' ', copyButton(url, `Copy the URL of ${t.name}`)] : ['—'],
      ),
      el('td', {}, [(t.spec.methods ?? []).join(', ')]),
      el('td', {}, [authOf(t)]),
      el('td', {}, [t.spec.response?.mode ?? '']),
    ]);
  });
  $('triggers')
    .querySelector('tbody')
    ?.replaceChildren(...rows);
  $('triggers-empty').hidden = rows.length > 0;
}

// ---------------------------------------------------------------- one trigger

/** The trigger's admin API path. @param {{ namespace: string, name: string }} t */
const triggerApi = (t) =>
  `/api/triggers/${encodeURIComponent(t.namespace)}/${encodeURIComponent(t.name)}`;

/** @param {{ namespace: string, name: string }} t */
const pageUrl = (t) => `/dashboard/flows?trigger=${encodeURIComponent(`${t.namespace}/${t.name}`)}`;

/**
 * Empties the trigger's page (summary, status, URL, credentials, test form, learned
 * schemas, executions): what is on it came from the trigger read before, maybe another
 * one or for a reader no longer allowed, and stays off unless this read succeeds.
 */
function clearTrigger() {
  state.trigger = null;
  $('trigger-summary').textContent = '';
  $('conditions').replaceChildren();
  $('trigger-url').textContent = '';
  $('cred-status').textContent = '';
  $('cred-toggle').hidden = true;
  $('cred-detail').hidden = true;
  $('cred-detail').textContent = '';
  $('test-method').replaceChildren();
  /** @type {HTMLTextAreaElement} */ ($('test-body')).value = '';
  $('body-check').textContent = '';
  $('send-test').setAttribute('disabled', '');
  $('learning').hidden = true;
  for (const id of ['learning-summary', 'proposal-input', 'proposal-output', 'proposal-manifest'])
    $(id).textContent = '';
  $('executions').querySelector('tbody')?.replaceChildren();
  $('executions-empty').hidden = true;
}

/** Which trigger read is the latest asked for: an earlier one that answers later loses. */
let triggerAsked = 0;

/** @param {string} namespace @param {string} name @param {boolean} push */
async function openTrigger(namespace, name, push) {
  const asked = ++triggerAsked;
  if (push) history.pushState(null, '', pageUrl({ namespace, name }));
  closeRun();
  clearTrigger();
  $('list-view').hidden = true;
  $('detail-view').hidden = false;
  $('trigger-title').textContent = `${namespace}/${name}`;
  $('test-response').hidden = true;
  $('run').hidden = true;
  /** @type {Trigger} */
  let trigger;
  try {
    trigger = await getJson(triggerApi({ namespace, name }));
  } catch (error) {
    if (asked !== triggerAsked) return;
    clearTrigger();
    showProblem(
      error instanceof ApiError && error.status === 404
        ? `WebhookTrigger ${namespace}/${name} does not exist (deleted?).`
        : `Could not load ${namespace}/${name}: ${errorText(error)}`,
    );
    return;
  }
  if (asked !== triggerAsked) return;
  state.trigger = trigger;
  renderTrigger(trigger);
  showProblem();
  try {
    await Promise.all([loadExecutions(), loadProposal()]);
  } catch (error) {
    if (asked !== triggerAsked) return;
    // The trigger stays shown; without its executions nothing is sent from this page.
    state.trigger = null;
    $('send-test').setAttribute('disabled', '');
    showProblem(`Could not load ${namespace}/${name}: ${errorText(error)}`);
  }
}

/** @param {Trigger} t */
function renderTrigger(t) {
  const spec = t.spec;
  $('trigger-summary').textContent =
    `${(spec.methods ?? []).join(', ')} · auth ${authOf(t)} · ${spec.response?.mode ?? ''}` +
    (spec.requireHttps ? ' · HTTPS only' : '');
  const conditions = /** @type {Condition[]} */ (t.status?.conditions ?? []);
  $('conditions').replaceChildren(
    ...conditions.map((c) =>
      el('li', {}, [
        el('strong', {}, [c.type]),
        ' ',
        stateBadge(c, false),
        c.reason ? ` ${c.reason}` : '',
        c.message ? el('span', { class: 'muted' }, [` — ${c.message}`]) : '',
      ]),
    ),
  );
  $('trigger-url').textContent = t.status?.url ?? 'not deployed yet';
  renderCredentials(t);
  const methods = /** @type {HTMLSelectElement} */ ($('test-method'));
  const served = spec.methods ?? ['POST'];
  methods.replaceChildren(...served.map((m) => el('option', { value: m }, [m])));
  // The example body goes with the first method that carries one.
  methods.value = served.find((m) => !carriesNoBody(m)) ?? served[0] ?? 'POST';
  const body = /** @type {HTMLTextAreaElement} */ ($('test-body'));
  body.value = JSON.stringify(exampleBody(spec), null, 2);
  checkBody();
}

/** GET and HEAD requests carry no body: the API refuses one (400). */
const carriesNoBody = (/** @type {string} */ method) => method === 'GET' || method === 'HEAD';

/** Whether the endpoint's auth needs saved credentials for a test request. */
const needsCredentials = (/** @type {any} */ spec) =>
  ['apiKey', 'bearer', 'oauth2'].includes(spec.auth?.method ?? 'none');

/** @param {Trigger} t */
function renderCredentials(t) {
  const saved = t.spec.testCredentials;
  const toggle = $('cred-toggle');
  const detail = $('cred-detail');
  detail.hidden = true;
  toggle.setAttribute('aria-pressed', 'false');
  toggle.textContent = 'Show';
  if (!needsCredentials(t.spec)) {
    $('cred-status').textContent =
      t.spec.auth?.method === 'signature'
        ? 'Signed endpoint: test requests are signed with its first active secret.'
        : 'No authentication: no credentials needed.';
    toggle.hidden = true;
    return;
  }
  if (!saved) {
    $('cred-status').textContent =
      'No test credentials saved. Save them in the trigger (spec.testCredentials) to send test requests.';
    toggle.hidden = true;
    return;
  }
  $('cred-status').textContent = `Test credentials saved (${saved.type}).`;
  // The value stays on the server: what can be shown is where it comes from.
  detail.textContent =
    `${saved.type === 'apiKey' ? `Header ${saved.header ?? 'X-API-Key'}, ` : 'Authorization: Bearer, '}` +
    `from Secret ${saved.secretRef.name}, key ${saved.secretRef.key}. The value itself never leaves the server.`;
  toggle.hidden = false;
}

/** The body the editor starts with: the input fields' example values, or the example. */
function exampleBody(/** @type {any} */ spec) {
  const input = spec.schema?.input;
  if (input?.example) {
    try {
      return JSON.parse(input.example);
    } catch {
      return {};
    }
  }
  /** @type {Record<string, unknown>} */
  const body = {};
  for (const field of input?.fields ?? []) {
    body[field.name] = field.value ?? placeholder(field.type);
  }
  return body;
}

/** @param {string} type */
const placeholder = (type) =>
  ({ string: '', number: 0, integer: 0, boolean: false, object: {}, array: [] })[type] ?? null;

/** @param {unknown} value @param {string} type */
function hasType(value, type) {
  switch (type) {
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    default:
      return typeof value === type;
  }
}

/** Checks the editor's text: JSON first, then the manual input fields. @returns {boolean} */
function checkBody() {
  const text = /** @type {HTMLTextAreaElement} */ ($('test-body')).value;
  const out = $('body-check');
  /** @type {string[]} */
  const problems = [];
  let parsed;
  if (text.trim() !== '') {
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      problems.push(`Not valid JSON: ${errorText(error)}`);
    }
  }
  const fields = state.trigger?.spec.schema?.input?.fields ?? [];
  if (problems.length === 0 && state.trigger?.spec.schema?.mode !== 'automatic') {
    const object = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {};
    for (const field of fields) {
      const value = object[field.name];
      if (value === undefined) {
        if (field.required) problems.push(`${field.name} is required`);
      } else if (!hasType(value, field.type)) {
        problems.push(
          `${field.name} must be ${field.type === 'integer' ? 'an' : 'a'} ${field.type}`,
        );
      }
    }
  }
  out.textContent =
    problems.length === 0 ? 'The body matches the input schema.' : problems.join('; ');
  out.className = problems.length === 0 ? 'check ok' : 'check bad';
  const blocked =
    problems.length > 0 ||
    !state.trigger ||
    (needsCredentials(state.trigger.spec) && !state.trigger.spec.testCredentials);
  const send = $('send-test');
  if (blocked) send.setAttribute('disabled', '');
  else send.removeAttribute('disabled');
  return problems.length === 0;
}

async function sendTest() {
  const t = state.trigger;
  if (!t || !checkBody()) return;
  const text = /** @type {HTMLTextAreaElement} */ ($('test-body')).value;
  const method = /** @type {HTMLSelectElement} */ ($('test-method')).value;
  const send = $('send-test');
  send.setAttribute('disabled', '');
  send.textContent = 'Sending…';
  try {
    const result = await requestJson(`${triggerApi(t)}/test`, {
      method: 'POST',
      body: {
        method,
        ...(text.trim() && !carriesNoBody(method) ? { body: JSON.parse(text) } : {}),
      },
    });
    renderResponse(result);
    showProblem();
    void loadExecutions();
    void loadProposal();
  } catch (error) {
    $('test-response').hidden = true;
    showProblem(
      error instanceof ApiError && error.status === 404
        ? `The trigger is no longer deployed: ${error.message}`
        : `The test request was refused: ${errorText(error)}`,
    );
  } finally {
    send.textContent = 'Send Test Request';
    checkBody();
  }
}

/** @param {{ response: { statusCode: number, headers: Record<string, unknown>, body: unknown }, durationMs: number }} result */
function renderResponse(result) {
  const { response } = result;
  const status = $('response-status');
  status.textContent = `${response.statusCode}`;
  status.className = `status-code s${String(response.statusCode)[0]}xx`;
  $('response-time').textContent = ` in ${result.durationMs.toFixed(1)} ms`;
  $('response-headers').replaceChildren(
    ...Object.entries(response.headers).flatMap(([k, v]) => [
      el('dt', {}, [k]),
      el('dd', {}, [Array.isArray(v) ? v.join(', ') : String(v)]),
    ]),
  );
  $('response-body').textContent =
    typeof response.body === 'string' ? response.body : JSON.stringify(response.body, null, 2);
  $('test-response').hidden = false;
}

// ---------------------------------------------------------------- schema learning

/** Automatic IO learning: the schemas proposed from the samples so far. */
async function loadProposal() {
  const t = state.trigger;
  const panel = $('learning');
  panel.hidden = !t?.spec.schema?.learning?.enabled;
  if (!t || panel.hidden) return;
  try {
    const p = await getJson(`${triggerApi(t)}/schema-proposal`);
    if (state.trigger !== t) return;
    $('learning-summary').textContent =
      `Learning from traffic: ${p.samples.requests} request(s) and ${p.samples.responses} response(s) recorded.`;
    const show = (/** @type {unknown} */ schema) =>
      schema ? JSON.stringify(schema, null, 2) : 'No samples yet.';
    $('proposal-input').textContent = show(p.input);
    $('proposal-output').textContent = show(p.output);
    $('proposal-manifest').textContent = p.manifest;
  } catch (error) {
    if (state.trigger !== t) return;
    $('learning-summary').textContent = `No proposal: ${errorText(error)}`;
  }
}

async function resetSamples() {
  const t = state.trigger;
  if (!t) return;
  try {
    await requestJson(`${triggerApi(t)}/schema-proposal/samples`, { method: 'DELETE' });
    $('learning-status').textContent = 'Samples forgotten.';
    await loadProposal();
  } catch (error) {
    showProblem(`Could not forget the samples: ${errorText(error)}`);
  }
}

// ---------------------------------------------------------------- executions

/** @param {string | undefined} from @param {string | undefined} to */
function duration(from, to) {
  if (!from || !to) return '—';
  const ms = Date.parse(to) - Date.parse(from);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

async function loadExecutions() {
  const t = state.trigger;
  if (!t) return;
  const q = new URLSearchParams({ trigger: `${t.namespace}/${t.name}`, limit: String(EXECUTIONS) });
  const { items } = await getJson(`/api/executions?${q}`);
  if (state.trigger !== t) return;
  const rows = /** @type {any[]} */ (items).map((x) => {
    const open = el('button', { type: 'button', class: 'link' }, [x.id]);
    open.addEventListener('click', () => void openRun(x.id));
    return el('tr', {}, [
      el('th', { scope: 'row' }, [open]),
      el('td', {}, [el('span', { class: `badge ${x.status}` }, [x.status])]),
      el('td', {}, [new Date(x.createdAt).toLocaleString()]),
      el('td', { class: 'num' }, [duration(x.startedAt ?? x.createdAt, x.finishedAt)]),
    ]);
  });
  $('executions')
    .querySelector('tbody')
    ?.replaceChildren(...rows);
  $('executions-empty').hidden = rows.length > 0;
}

/** @param {string} id */
async function openRun(id) {
  closeRun();
  state.runId = id;
  $('run').hidden = false;
  $('run-title').textContent = `Execution log · ${id}`;
  const execution = await renderRun(id);
  if (execution && !FINISHED.has(execution.status)) followRun(id);
  $('run-title').focus?.();
}

/** @param {string} id */
async function renderRun(id) {
  let x;
  try {
    x = await getJson(`/api/executions/${encodeURIComponent(id)}`);
  } catch (error) {
    showProblem(`Could not load execution ${id}: ${errorText(error)}`);
    return null;
  }
  if (state.runId !== id) return null;
  $('run-summary').textContent =
    `${x.status} · started ${new Date(x.createdAt).toLocaleString()} · ` +
    `${duration(x.startedAt ?? x.createdAt, x.finishedAt)}` +
    (x.attempt && x.attempt > 1 ? ` · attempt ${x.attempt}` : '') +
    (x.replayOf ? ` · replay of ${x.replayOf}` : '');
  $('run-log').replaceChildren(
    ...x.log.map((/** @type {any} */ n) =>
      el('li', { class: `node ${n.status}` }, [
        el('div', { class: 'node-head' }, [
          el('strong', {}, [n.nodeId]),
          ` (${n.type}) `,
          el('span', { class: `badge ${n.status}` }, [n.status]),
          el('span', { class: 'muted' }, [
            ` ${n.durationMs !== undefined ? `${n.durationMs} ms` : 'running'}` +
              (n.attempts > 1 ? ` · ${n.attempts} tries` : ''),
          ]),
        ]),
        ...(n.inputSummary ? [el('p', {}, ['Input: ', el('code', {}, [n.inputSummary])])] : []),
        ...(n.outputSummary ? [el('p', {}, ['Output: ', el('code', {}, [n.outputSummary])])] : []),
        ...(n.error ? [el('p', { class: 'error' }, [`Error: ${n.error}`])] : []),
      ]),
    ),
  );
  $('retry-dead').hidden = !x.deadLetteredAt;
  $('run-action-status').textContent = x.deadLetteredAt
    ? `Dead-lettered ${new Date(x.deadLetteredAt).toLocaleString()} after ${x.attempt ?? 1} attempt(s).`
    : '';
  const failure = $('run-error');
  failure.hidden = !x.error;
  failure.textContent = x.error ? JSON.stringify(x.error, null, 2) : '';
  return x;
}

/** Follows a running execution: each event re-reads it; the stream ends with it. @param {string} id */
function followRun(id) {
  const source = new AuthorizedEventSource(`/api/executions/${encodeURIComponent(id)}/events`);
  state.run = source;
  const live = $('run-live');
  live.hidden = false;
  live.textContent = 'Live';
  live.className = 'status connected';
  let pending = 0;
  const refresh = (/** @type {string} */ kind) => {
    clearTimeout(pending);
    pending = window.setTimeout(async () => {
      await renderRun(id);
      if (kind === 'completed' || kind === 'failed') {
        closeRun(false);
        void loadExecutions();
      }
    }, 50);
  };
  for (const kind of RUN_EVENTS) source.addEventListener(kind, () => refresh(kind));
  // Access withdrawn while following (docs/security.md): stop, and say why.
  source.addEventListener('revoked', (event) => {
    closeRun(false);
    live.textContent = 'Stopped';
    showProblem(`Live updates ended: ${problemDetail(/** @type {MessageEvent} */ (event).data)}`);
  });
  source.addEventListener('error', () => {
    if (source.readyState === AuthorizedEventSource.CLOSED) closeRun(false);
  });
}

function closeRun(forget = true) {
  state.run?.close();
  state.run = null;
  const live = $('run-live');
  live.textContent = 'Finished';
  live.className = 'status disconnected';
  if (forget) {
    live.hidden = true;
    state.runId = null;
  }
}

/**
 * Replay (any execution) or retry out of the dead-letter list: a new execution linked
 * to this one, through the trigger as it is now; its log opens. Both buttons are
 * disabled until the answer (a double click sent two: two replays); a replay carries
 * an Idempotency-Key, new for each replay asked, the same again after one without a
 * 2xx answer (state.replayKey). A retry needs none: its entry leaves the list, so a
 * second one is refused.
 * @param {'replay' | 'retry'} action
 */
async function rerun(action) {
  const id = state.runId;
  if (!id || state.rerunning) return;
  state.rerunning = true;
  for (const button of RUN_ACTIONS) $(button).setAttribute('disabled', '');
  /** @type {Record<string, string>} */
  const headers = {};
  if (action === 'replay') {
    const key = state.replayKey?.id === id ? state.replayKey.key : newIdempotencyKey();
    state.replayKey = { id, key };
    headers['idempotency-key'] = key;
  }
  const url =
    action === 'replay'
      ? `/api/executions/${encodeURIComponent(id)}/replay`
      : `/api/dead-letters/${encodeURIComponent(id)}/retry`;
  try {
    const answer = await requestJson(url, { method: 'POST', headers });
    if (action === 'replay') state.replayKey = null;
    showProblem();
    await loadExecutions();
    await openRun(answer.executionId);
    $('run-action-status').textContent = `${action === 'replay' ? 'Replay' : 'Retry'} of ${id}.`;
  } catch (error) {
    showProblem(`${action === 'replay' ? 'Replay' : 'Retry'} refused: ${errorText(error)}`);
  } finally {
    state.rerunning = false;
    for (const button of RUN_ACTIONS) $(button).removeAttribute('disabled');
  }
}

// ---------------------------------------------------------------- start

async function route() {
  const wanted = new URLSearchParams(location.search).get('trigger');
  const slash = wanted?.indexOf('/') ?? -1;
  if (wanted && slash > 0) {
    await openTrigger(wanted.slice(0, slash), wanted.slice(slash + 1), false);
    return;
  }
  closeRun();
  triggerAsked++;
  state.trigger = null;
  $('detail-view').hidden = true;
  $('list-view').hidden = false;
  try {
    await loadList();
    showProblem();
  } catch (error) {
    // The rows of an earlier read: maybe for a reader no longer allowed (401, 403).
    $('triggers').querySelector('tbody')?.replaceChildren();
    $('triggers-empty').hidden = true;
    showProblem(`Could not load the triggers: ${errorText(error)}`);
  }
}

$('back').addEventListener('click', (event) => {
  event.preventDefault();
  history.pushState(null, '', '/dashboard/flows');
  void route();
});
$('copy-url').addEventListener('click', () => {
  const url = state.trigger?.status?.url;
  if (url) void copy(url, $('copy-url'));
});
$('cred-toggle').addEventListener('click', () => {
  const detail = $('cred-detail');
  detail.hidden = !detail.hidden;
  $('cred-toggle').setAttribute('aria-pressed', String(!detail.hidden));
  $('cred-toggle').textContent = detail.hidden ? 'Show' : 'Hide';
});
$('test-body').addEventListener('input', () => checkBody());
$('send-test').addEventListener('click', () => void sendTest());
$('reload-executions').addEventListener('click', () => void loadExecutions());
$('replay').addEventListener('click', () => void rerun('replay'));
$('reload-proposal').addEventListener('click', () => void loadProposal());
$('reset-samples').addEventListener('click', () => void resetSamples());
$('copy-manifest').addEventListener(
  'click',
  () => void copy($('proposal-manifest').textContent ?? '', $('copy-manifest')),
);
$('retry-dead').addEventListener('click', () => void rerun('retry'));
$('refresh').addEventListener('click', () => void route());
window.addEventListener('popstate', () => void route());
bindToken(() => void route());
void route();
