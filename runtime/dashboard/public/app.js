// hookgate analytics dashboard: plain JavaScript (no build step), read-only.
// Reads GET /api/analytics/options and /api/analytics/summary, and the gateway's live
// event stream (SSE at /webhook-events/<workflowId>/<pathSegment>). All data reaches
// the page through textContent / attributes, never as HTML.
// @ts-check
import {
  $,
  ApiError,
  AuthorizedEventSource,
  bindToken,
  el,
  getJson,
  problemDetail,
  showProblem,
} from './common.js';

const API = '/api/analytics';
const REFRESH_MS = 30_000;
const MAX_LOG = 500;

const SVG_NS = 'http://www.w3.org/2000/svg';
/** @param {string} tag @param {Record<string, string | number>} attrs */
function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

const fmtInt = new Intl.NumberFormat('en-US');
const fmt2 = new Intl.NumberFormat('en-US', {
  minimumFractionDigits: 2,
  maximumFractionDigits: 2,
});

// ---------------------------------------------------------------- filters

const state = {
  /** @type {string[]} */ applications: [],
  environment: '',
  window: '1h',
  method: '',
  status: '',
  consumer: '',
};

function readUrl() {
  const q = new URLSearchParams(location.search);
  state.applications = q
    .getAll('application')
    .flatMap((a) => a.split(','))
    .filter(Boolean);
  state.environment = q.get('environment') ?? '';
  state.window = q.get('window') ?? '1h';
  state.method = q.get('method') ?? '';
  state.status = q.get('status') ?? '';
  state.consumer = q.get('consumer') ?? '';
}

/** @param {boolean} [withDetail] all filters, or only those that scope the options */
function query(withDetail = true) {
  const q = new URLSearchParams();
  for (const a of state.applications) q.append('application', a);
  if (state.environment) q.set('environment', state.environment);
  q.set('window', state.window);
  if (withDetail) {
    if (state.method) q.set('method', state.method);
    if (state.status) q.set('status', state.status);
    if (state.consumer) q.set('consumer', state.consumer);
  }
  return q;
}

function writeUrl() {
  history.replaceState(null, '', `${location.pathname}?${query().toString()}`);
}

/**
 * Fill a select, keeping the chosen value even when it is not in the list.
 * @param {string} id @param {string} allLabel @param {(string|number)[]} values @param {string} chosen
 * @param {(v: string) => string} [label]
 */
function fillSelect(id, allLabel, values, chosen, label = (v) => v) {
  const select = /** @type {HTMLSelectElement} */ ($(id));
  const list = values.map(String);
  if (chosen && !list.includes(chosen)) list.push(chosen);
  select.replaceChildren(
    el('option', { value: '' }, [allLabel]),
    ...list.map((v) => el('option', { value: v }, [label(v)])),
  );
  select.value = chosen;
}

/** @param {string[]} apps @param {string} [none] what the menu says without any */
function fillApplications(apps, none = 'No applications with traffic in this window') {
  const all = [...new Set([...apps, ...state.applications])].sort();
  const menu = /** @type {HTMLElement} */ ($('applications').querySelector('.multiselect-menu'));
  menu.replaceChildren(
    ...(all.length === 0
      ? [el('p', { class: 'muted' }, [none])]
      : all.map((app) => {
          const box = el('input', { type: 'checkbox', value: app, name: 'application' });
          /** @type {HTMLInputElement} */ (box).checked = state.applications.includes(app);
          return el('label', {}, [box, app]);
        })),
  );
  const summary = /** @type {HTMLElement} */ ($('applications').querySelector('summary'));
  summary.textContent =
    state.applications.length === 0
      ? 'All applications'
      : state.applications.length <= 2
        ? state.applications.join(', ')
        : `${state.applications.length} applications`;
}

// ---------------------------------------------------------------- rendering

/** @param {string} id @param {string} text @param {string} [unit] @param {boolean} [bad] */
function setCard(id, text, unit, bad = false) {
  const value = /** @type {HTMLElement} */ ($(id).querySelector('.value'));
  value.replaceChildren(text, ...(unit ? [el('small', {}, [unit])] : []));
  value.classList.toggle('bad', bad);
}

/** @param {any} summary */
function renderCards(summary) {
  setCard('card-total-spans', fmtInt.format(summary.totalSpans));
  setCard(
    'card-p99',
    summary.avgP99LatencyMs === null ? '—' : fmt2.format(summary.avgP99LatencyMs),
    summary.avgP99LatencyMs === null ? '' : 'ms',
  );
  setCard('card-error-count', fmtInt.format(summary.errorCount), '', summary.errorCount > 0);
  setCard(
    'card-error-rate',
    summary.errorRatePercent === null ? '—' : fmt2.format(summary.errorRatePercent),
    summary.errorRatePercent === null ? '' : '%',
    (summary.errorRatePercent ?? 0) > 0,
  );
}

/** @param {string} method */
const methodBadge = (method) => el('span', { class: `method ${method}` }, [method]);
/** @param {number} code */
const codeBadge = (code) =>
  el('span', { class: `code s${String(code)[0]} s${code}` }, [String(code)]);

/**
 * @param {string} id @param {number} columns @param {HTMLElement[]} rows
 * @param {string} [none] what the table says without rows
 */
function fillTable(id, columns, rows, none = 'No requests') {
  const body = /** @type {HTMLElement} */ ($(id).querySelector('tbody'));
  body.replaceChildren(
    ...(rows.length > 0
      ? rows
      : [el('tr', {}, [el('td', { class: 'empty', colspan: String(columns) }, [none])])]),
  );
}

/** @param {any[]} rows */
function renderByCount(rows) {
  fillTable(
    'top-by-count',
    4,
    rows.map((r) => {
      const bar = el('span', { class: 'bar' }, [el('span')]);
      /** @type {HTMLElement} */ (bar.firstChild).style.width = `${Math.min(100, r.sharePercent)}%`;
      return el('tr', {}, [
        el('td', {}, [methodBadge(r.method)]),
        el('td', { class: 'path', title: r.path }, [r.path]),
        el('td', { class: 'num' }, [codeBadge(r.statusCode)]),
        el('td', { class: 'num' }, [
          el('span', { class: 'share' }, [
            el('span', { class: 'count' }, [fmtInt.format(r.count)]),
            bar,
            el('span', { class: 'pct' }, [`${fmt2.format(r.sharePercent)}%`]),
          ]),
        ]),
      ]);
    }),
  );
}

/** @param {any[]} rows */
function renderByLatency(rows) {
  fillTable(
    'top-by-latency',
    5,
    rows.map((r) =>
      el('tr', {}, [
        el('td', {}, [methodBadge(r.method)]),
        el('td', { class: 'path', title: r.path }, [r.path]),
        el('td', { class: 'num' }, [codeBadge(r.statusCode)]),
        el('td', { class: 'num count' }, [fmtInt.format(r.count)]),
        el('td', { class: 'num latency' }, [`${fmt2.format(r.avgLatencyMs)} ms`]),
      ]),
    ),
  );
}

/** A nice axis maximum and step for `max`. @param {number} max */
function niceScale(max) {
  if (max <= 0) return { top: 4, step: 1 };
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  return { top: Math.ceil(max / step) * step, step };
}

/** @param {{at: string, requests: number, errors: number}[]} points */
function renderChart(points) {
  const box = $('chart');
  const width = Math.max(box.clientWidth - 24, 300);
  const height = Math.max(box.clientHeight - 12, 160);
  const pad = { left: 48, right: 8, top: 10, bottom: 24 };
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none' });
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const max = Math.max(0, ...points.map((p) => p.requests));
  const { top, step } = niceScale(max);
  const y = (v) => pad.top + plotH - (v / top) * plotH;
  const grid = svg('g', { class: 'grid' });
  const axis = svg('g', { class: 'axis' });
  for (let v = 0; v <= top + 1e-9; v += step) {
    grid.append(svg('line', { x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }));
    const label = svg('text', { x: pad.left - 8, y: y(v) + 4, 'text-anchor': 'end' });
    label.textContent = fmtInt.format(v);
    axis.append(label);
  }
  root.append(grid, axis);
  const n = Math.max(points.length, 1);
  const slot = plotW / n;
  const barW = Math.max(1, slot * 0.72);
  const bars = svg('g', { class: 'bars' });
  points.forEach((p, i) => {
    const x = pad.left + i * slot + (slot - barW) / 2;
    const ok = p.requests - p.errors;
    if (ok > 0) {
      bars.append(
        svg('rect', {
          class: 'bar-ok',
          x,
          width: barW,
          y: y(p.requests),
          height: y(p.errors) - y(p.requests),
        }),
      );
    }
    if (p.errors > 0) {
      bars.append(
        svg('rect', {
          class: 'bar-err',
          x,
          width: barW,
          y: y(p.errors),
          height: y(0) - y(p.errors),
        }),
      );
    }
    const title = svg('title');
    title.textContent = `${new Date(p.at).toLocaleTimeString()}: ${p.requests} requests, ${p.errors} errors`;
    const hit = svg('rect', {
      x: pad.left + i * slot,
      width: slot,
      y: pad.top,
      height: plotH,
      fill: 'transparent',
    });
    hit.append(title);
    bars.append(hit);
  });
  root.append(bars);
  const ticks = Math.min(6, points.length);
  for (let t = 0; t < ticks; t += 1) {
    const i = Math.round((t * (points.length - 1)) / Math.max(ticks - 1, 1));
    const p = points[i];
    if (!p) continue;
    const label = svg('text', {
      x: pad.left + i * slot + slot / 2,
      y: height - 6,
      'text-anchor': t === 0 ? 'start' : t === ticks - 1 ? 'end' : 'middle',
    });
    const d = new Date(p.at);
    label.textContent = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    axis.append(label);
  }
  if (max === 0) {
    const empty = svg('text', {
      class: 'empty',
      x: width / 2,
      y: height / 2,
      'text-anchor': 'middle',
    });
    empty.textContent = 'No requests in this window';
    root.append(empty);
  }
  box.replaceChildren(root);
}

// ---------------------------------------------------------------- loading

let loading = 0;
/** The query whose figures are on the page ('' when none are). */
let shown = '';
/** The chart's points on the page (redrawn when the window is resized), or none. */
/** @type {{at: string, requests: number, errors: number}[] | null} */
let chartPoints = null;

/**
 * Takes the figures off the page (cards, top lists, chart, when they were read): a load
 * failed and what is on the page answered other filters, or a reader no longer allowed.
 */
function clearFigures() {
  for (const id of ['card-total-spans', 'card-p99', 'card-error-count', 'card-error-rate']) {
    setCard(id, '—');
  }
  fillTable('top-by-count', 4, [], 'Not loaded');
  fillTable('top-by-latency', 5, [], 'Not loaded');
  $('chart').replaceChildren();
  chartPoints = null;
  $('updated').textContent = '';
  shown = '';
}

/** Takes the values the last answer offered (applications, consumers, routes...) off too. */
function clearOptions() {
  fillApplications([], 'Not loaded');
  fillSelect('method', 'All methods', [], state.method);
  fillSelect('status', 'All status codes', [], state.status);
  fillSelect('consumer', 'All consumers', [], state.consumer);
  fillRoutes([]);
}

async function load() {
  const ticket = ++loading;
  writeUrl();
  document.body.dataset.state = 'loading';
  const asked = query().toString();
  try {
    const [options, result] = await Promise.all([
      getJson(`${API}/options?${query(false).toString()}`),
      getJson(`${API}/summary?${asked}`),
    ]);
    if (ticket !== loading) return;
    fillApplications(options.applications);
    fillSelect('environment', 'All environments', options.environments, state.environment);
    fillSelect('method', 'All methods', options.methods, state.method);
    fillSelect('status', 'All status codes', options.statusCodes, state.status);
    fillSelect('consumer', 'All consumers', options.consumers, state.consumer);
    fillRoutes(options.routes);
    renderCards(result.summary);
    renderByCount(result.topByRequestCount);
    renderByLatency(result.topByLatency);
    renderChart(result.timeseries.points);
    chartPoints = result.timeseries.points;
    shown = asked;
    showProblem();
    $('updated').textContent = `Updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.state = 'ready';
  } catch (error) {
    if (ticket !== loading) return;
    // A refresh of the same filters that failed (Prometheus blinking) keeps its figures,
    // with when they were read; figures of other filters, or for a reader now refused
    // (a token cleared or withdrawn: 401, 403), go.
    const refused = error instanceof ApiError && (error.status === 401 || error.status === 403);
    if (refused || asked !== shown) clearFigures();
    if (refused) clearOptions();
    showProblem(
      `Could not load analytics: ${error instanceof Error ? error.message : String(error)}`,
    );
    document.body.dataset.state = 'error';
  }
}

function bindFilters() {
  for (const id of ['environment', 'window', 'method', 'status', 'consumer']) {
    $(id).addEventListener('change', (event) => {
      const target = /** @type {HTMLSelectElement} */ (event.target);
      /** @type {Record<string, unknown>} */ (state)[id] = target.value;
      void load();
    });
  }
  $('applications').addEventListener('change', () => {
    const boxes = $('applications').querySelectorAll('input[type=checkbox]');
    state.applications = [...boxes]
      .filter((b) => /** @type {HTMLInputElement} */ (b).checked)
      .map((b) => /** @type {HTMLInputElement} */ (b).value);
    void load();
  });
  document.addEventListener('click', (event) => {
    const multi = /** @type {HTMLDetailsElement} */ ($('applications'));
    if (multi.open && !multi.contains(/** @type {Node} */ (event.target))) multi.open = false;
  });
  $('reset').addEventListener('click', () => {
    Object.assign(state, {
      applications: [],
      environment: '',
      window: '1h',
      method: '',
      status: '',
      consumer: '',
    });
    /** @type {HTMLSelectElement} */ ($('window')).value = '1h';
    void load();
  });
  $('refresh').addEventListener('click', () => void load());
  bindToken(() => {
    reopenStream();
    void load();
  });
  setInterval(() => {
    if (/** @type {HTMLInputElement} */ ($('auto-refresh')).checked) void load();
  }, REFRESH_MS);
  // The chart is drawn to the box's size: a resize redraws it, without asking again.
  let resize = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resize);
    resize = window.setTimeout(() => {
      if (chartPoints) renderChart(chartPoints);
    }, 200);
  });
}

// ---------------------------------------------------------------- live event stream

const live = {
  /** @type {AuthorizedEventSource | null} */ source: null,
  count: 0,
  /** @type {number | null} */ connectedAt: null,
  /** @type {number} */ timer: 0,
  /** @type {AudioContext | null} */ audio: null,
};

/** @param {string[]} routes */
function fillRoutes(routes) {
  $('live-routes').replaceChildren(
    ...routes.filter((r) => r.startsWith('/webhook/')).map((r) => el('option', { value: r })),
  );
  const input = /** @type {HTMLInputElement} */ ($('live-path'));
  if (!input.value && routes[0]?.startsWith('/webhook/')) input.value = routes[0];
}

/** /webhook/<id>/<segment> (or the events URL itself) -> the events URL. @param {string} path */
export function eventsUrl(path) {
  const clean = path
    .trim()
    .replace(/^https?:\/\/[^/]+/, '')
    .replace(/\?.*$/, '');
  const rest = clean.replace(/^\/(webhook-events|webhook)\//, '');
  if (!rest || rest === clean) return null;
  return `/webhook-events/${rest}`;
}

/** @param {'connected' | 'connecting' | 'disconnected'} status */
function setLiveStatus(status) {
  const badge = $('live-status');
  badge.className = `status ${status}`;
  badge.textContent = {
    connected: 'Connected',
    connecting: 'Connecting…',
    disconnected: 'Disconnected',
  }[status];
  /** @type {HTMLButtonElement} */ ($('live-connect')).disabled = status !== 'disconnected';
  /** @type {HTMLButtonElement} */ ($('live-disconnect')).disabled = status === 'disconnected';
  updateEmpty();
}

function updateEmpty() {
  const empty = $('live-empty');
  const connected = live.source !== null;
  empty.hidden = live.count > 0 && $('live-log').childElementCount > 0;
  empty.textContent = connected
    ? 'Waiting for events…'
    : 'Not connected. Choose a webhook path and connect to watch its requests and responses.';
}

function tickDuration() {
  const seconds =
    live.connectedAt === null ? 0 : Math.floor((Date.now() - live.connectedAt) / 1000);
  const mm = String(Math.floor(seconds / 60)).padStart(2, '0');
  const ss = String(seconds % 60).padStart(2, '0');
  const hh = Math.floor(seconds / 3600);
  $('live-duration').textContent =
    hh > 0
      ? `${hh}:${String(Math.floor(seconds / 60) % 60).padStart(2, '0')}:${ss}`
      : `${mm}:${ss}`;
}

function beep() {
  const ctx = live.audio;
  if (!ctx) return;
  const osc = ctx.createOscillator();
  const gain = ctx.createGain();
  osc.type = 'sine';
  osc.frequency.value = 880;
  gain.gain.setValueAtTime(0.0001, ctx.currentTime);
  gain.gain.exponentialRampToValueAtTime(0.2, ctx.currentTime + 0.01);
  gain.gain.exponentialRampToValueAtTime(0.0001, ctx.currentTime + 0.15);
  osc.connect(gain).connect(ctx.destination);
  osc.start();
  osc.stop(ctx.currentTime + 0.16);
}

/** One line of summary per event kind. @param {string} kind @param {any} data */
function describe(kind, data) {
  if (kind === 'connected') return `Monitoring ${data.path ?? ''}`;
  if (kind === 'request') {
    return [data.method, data.path, data.consumer ? `· ${data.consumer}` : '']
      .filter(Boolean)
      .join(' ');
  }
  const parts = [String(data.statusCode ?? '')];
  if (typeof data.latencyMs === 'number') parts.push(`${fmt2.format(data.latencyMs)} ms`);
  if (data.problem) parts.push(String(data.problem));
  if (data.executionId) parts.push(`execution ${data.executionId}`);
  return parts.join(' · ');
}

/** @param {string} kind @param {MessageEvent} event */
function onLiveEvent(kind, event) {
  /** @type {any} */
  let data;
  try {
    data = JSON.parse(event.data);
  } catch {
    data = { raw: String(event.data) };
  }
  live.count += 1;
  $('live-count').textContent = fmtInt.format(live.count);
  const at = typeof data.at === 'string' ? new Date(data.at) : new Date();
  const time =
    at.toLocaleTimeString([], { hour12: false }) +
    `.${String(at.getMilliseconds()).padStart(3, '0')}`;
  const pre = el('pre', {}, [JSON.stringify(data, null, 2)]);
  const entry = el('li', { class: `event ${kind}`, 'data-kind': kind }, [
    el('details', {}, [
      el('summary', {}, [
        el('span', { class: 'time' }, [time]),
        el('span', { class: `kind ${kind}` }, [kind]),
        el('span', { class: 'what' }, [describe(kind, data)]),
      ]),
      pre,
    ]),
  ]);
  const log = $('live-log');
  log.prepend(entry);
  while (log.childElementCount > MAX_LOG) log.lastElementChild?.remove();
  updateEmpty();
  if (kind === 'request' && /** @type {HTMLInputElement} */ ($('live-sound')).checked) beep();
}

function connect() {
  const path = /** @type {HTMLInputElement} */ ($('live-path')).value;
  const url = eventsUrl(path);
  if (!url) {
    $('live-endpoint').textContent =
      'Enter a webhook path like /webhook/<workflow-id>/<path-segment>';
    return;
  }
  openStream(url);
}

/**
 * The token changed: a stream open under the old one is opened again under the new one
 * (a stream's token is sent once, when it opens), so that clearing the token or
 * changing it to one that may not watch the route ends it (401, 403: closed).
 */
function reopenStream() {
  if (live.source) openStream(live.source.url);
}

/** @param {string} url the events URL */
function openStream(url) {
  disconnect();
  const source = new AuthorizedEventSource(url);
  live.source = source;
  setLiveStatus('connecting');
  $('live-endpoint').textContent = url;
  source.addEventListener('open', () => {
    if (live.source !== source) return;
    live.connectedAt = Date.now();
    setLiveStatus('connected');
    tickDuration();
    clearInterval(live.timer);
    live.timer = window.setInterval(tickDuration, 1000);
  });
  for (const kind of ['connected', 'request', 'response']) {
    source.addEventListener(kind, (event) =>
      onLiveEvent(kind, /** @type {MessageEvent} */ (event)),
    );
  }
  // Access withdrawn while the stream was open (docs/security.md): no reconnecting.
  source.addEventListener('revoked', (event) => {
    if (live.source !== source) return;
    const detail = problemDetail(/** @type {MessageEvent} */ (event).data);
    disconnect();
    $('live-endpoint').textContent = `${url}: access ended: ${detail}`;
  });
  source.addEventListener('error', () => {
    if (live.source !== source) return;
    if (source.readyState === AuthorizedEventSource.CLOSED) {
      disconnect();
      $('live-endpoint').textContent = `${url}: the stream closed (no endpoint at this path?)`;
    } else {
      setLiveStatus('connecting');
    }
  });
}

function disconnect() {
  live.source?.close();
  live.source = null;
  live.connectedAt = null;
  clearInterval(live.timer);
  tickDuration();
  setLiveStatus('disconnected');
}

function bindLive() {
  $('live-connect').addEventListener('click', connect);
  $('live-disconnect').addEventListener('click', disconnect);
  $('live-path').addEventListener('keydown', (event) => {
    if (/** @type {KeyboardEvent} */ (event).key === 'Enter') connect();
  });
  $('live-clear').addEventListener('click', () => {
    $('live-log').replaceChildren();
    live.count = 0;
    $('live-count').textContent = '0';
    updateEmpty();
  });
  $('live-sound').addEventListener('change', (event) => {
    const on = /** @type {HTMLInputElement} */ (event.target).checked;
    if (on && !live.audio && typeof AudioContext !== 'undefined') live.audio = new AudioContext();
    if (on) void live.audio?.resume();
  });
  setLiveStatus('disconnected');
}

// ---------------------------------------------------------------- start

readUrl();
/** @type {HTMLSelectElement} */ ($('window')).value = state.window;
bindFilters();
bindLive();
void load();
