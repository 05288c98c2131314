// The chart's Grafana dashboard (charts/hookgate/dashboards/hookgate.json): the opt-in
// ConfigMap for the Grafana sidecar carries the file unchanged with the sidecar's
// labels; the JSON is well-formed for Grafana (unique ids, the datasource variable on
// every panel and target, a grid without overlaps); and every query is proven against a
// real Prometheus with the chart's own recording rules loaded, scraping a real operator,
// a queue-mode gateway and a worker that took traffic: each target parses, every metric
// it names is one those processes export (or the rules record), each returns data for
// concrete variable values, and each variable's label_values query finds values.
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { eventually } from '../support/eventually.ts';
import { trigger, workflow } from '../support/manifests.ts';
import { freePortRun } from '../support/ports.ts';
import {
  skipWithoutPrometheus,
  startPrometheus,
  type RunningPrometheus,
} from '../support/prometheus.ts';
import { startReceiver } from '../support/receiver.ts';
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.ts';
import { spawnRole, startTestCluster, type TestCluster } from '../support/test-cluster.ts';
import {
  chartDir,
  FULLNAME,
  NAMESPACE,
  render,
  renderError,
  tools,
  work,
  type ConfigMap,
  type K8sObject,
} from './chart.ts';

interface Datasource {
  type: string;
  uid: string;
}
interface Target {
  datasource?: Datasource;
  refId: string;
  expr: string;
  instant?: boolean;
}
interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: Datasource;
  gridPos?: GridPos;
  targets?: Target[];
}
interface Variable {
  name: string;
  type: string;
  datasource?: Datasource;
  query: string | { query: string };
  multi?: boolean;
  includeAll?: boolean;
  allValue?: string;
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  templating: { list: Variable[] };
  panels: Panel[];
}

const FILE = join(chartDir, 'dashboards', 'hookgate.json');
const dashboard = JSON.parse(readFileSync(FILE, 'utf8')) as Dashboard;
const DATASOURCE: Datasource = { type: 'prometheus', uid: '${datasource}' };
const CM_NAME = `${FULLNAME}-grafana-dashboard`;
const ON = ['grafana.dashboards.enabled=true', 'analytics.prometheus.rules.enabled=true'];

const variables = dashboard.templating.list;
const queryOf = (v: Variable) => (typeof v.query === 'string' ? v.query : v.query.query);
const targets = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p, t })));

/** Grafana's own variables the queries may use, and the test's value for each. */
const BUILTINS: Record<string, string> = {
  __rate_interval: '1m',
  __interval: '15s',
  __range: '5m',
};

/** The expression with every `$var` / `${var}` replaced; an unknown one throws. */
function substitute(expr: string, values: Record<string, string>): string {
  return expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced?: string, bare?: string) => {
    const name = (braced ?? bare) as string;
    const value = values[name] ?? BUILTINS[name];
    if (value === undefined) throw new Error(`unknown variable ${whole} in ${expr}`);
    return value;
  });
}

const AGGREGATIONS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
]);
/** Keywords followed by a parenthesised label list, not an expression. */
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const KEYWORDS = new Set(['offset', 'bool', 'and', 'or', 'unless', 'atan2', 'inf', 'nan']);

/** Index just past the bracket closing the one at `start` (strings inside skipped). */
function closing(expr: string, start: number, open: string, close: string): number {
  let depth = 0;
  for (let i = start; i < expr.length; i += 1) {
    const c = expr[i] as string;
    if (c === '"' || c === "'" || c === '`') i = endOfString(expr, i) - 1;
    else if (c === open) depth += 1;
    else if (c === close && --depth === 0) return i + 1;
  }
  throw new Error(`unbalanced ${open} in ${expr}`);
}
function endOfString(expr: string, start: number): number {
  const quote = expr[start];
  for (let i = start + 1; i < expr.length; i += 1) {
    if (expr[i] === '\\' && quote !== '`') i += 1;
    else if (expr[i] === quote) return i + 1;
  }
  throw new Error(`unterminated string in ${expr}`);
}

/**
 * The metric names a PromQL expression selects: identifiers that are not functions,
 * aggregations, keywords, label lists, label matchers, strings, durations or numbers.
 */
function metricNames(expr: string): string[] {
  const names = new Set<string>();
  let i = 0;
  while (i < expr.length) {
    const c = expr[i] as string;
    if (c === '"' || c === "'" || c === '`') i = endOfString(expr, i);
    else if (c === '{') i = closing(expr, i, '{', '}');
    else if (c === '[') i = closing(expr, i, '[', ']');
    else if (/[0-9.]/.test(c))
      i += (/^[0-9.][0-9a-zA-Z_.]*/.exec(expr.slice(i)) as RegExpExecArray)[0].length;
    else if (/[a-zA-Z_:]/.test(c)) {
      const ident = (/^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(expr.slice(i)) as RegExpExecArray)[0];
      i += ident.length;
      let next = i;
      while (/\s/.test(expr[next] ?? '')) next += 1;
      const word = ident.toLowerCase();
      if (LABEL_LISTS.has(word)) {
        if (expr[next] === '(') i = closing(expr, next, '(', ')');
      } else if (!AGGREGATIONS.has(word) && !KEYWORDS.has(word) && expr[next] !== '(') {
        names.add(ident);
      }
    } else i += 1;
  }
  return [...names];
}

describe('the dashboard JSON is well-formed for Grafana', () => {
  it('is a dashboard with the datasource and the four hookgate variables', () => {
    expect(dashboard.uid).toBe('hookgate');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(variables.map((v) => [v.name, v.type])).toEqual([
      ['datasource', 'datasource'],
      ['namespace', 'query'],
      ['application', 'query'],
      ['environment', 'query'],
      ['endpoint', 'query'],
    ]);
    expect(variables[0]?.query).toBe('prometheus');
    for (const v of variables.slice(1)) {
      expect(v.datasource, v.name).toEqual(DATASOURCE);
      expect(queryOf(v), v.name).toMatch(/^label_values\(/);
    }
    for (const v of variables.slice(2))
      expect(v, v.name).toMatchObject({ multi: true, includeAll: true, allValue: '.*' });
  });

  it('has unique panel ids, the datasource variable on every panel and target, a grid without overlaps', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => Number.isInteger(id) && id > 0)).toBe(true);
    for (const p of dashboard.panels) {
      expect(p.datasource, p.title).toEqual(DATASOURCE);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      const refIds = (p.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, p.title).toBe(refIds.length);
      for (const t of p.targets ?? []) {
        expect(t.datasource, `${p.title} ${t.refId}`).toEqual(DATASOURCE);
        expect(t.expr.trim(), `${p.title} ${t.refId}`).not.toBe('');
      }
      const g = p.gridPos as GridPos;
      expect(g, p.title).toBeDefined();
      for (const k of ['x', 'y', 'w', 'h'] as const)
        expect(Number.isInteger(g[k]) && g[k] >= 0, `${p.title} gridPos.${k}`).toBe(true);
      expect(g.w > 0 && g.h > 0 && g.x + g.w <= 24, p.title).toBe(true);
    }
    const overlaps: string[] = [];
    dashboard.panels.forEach((a, i) =>
      dashboard.panels.slice(i + 1).forEach((b) => {
        const p = a.gridPos as GridPos;
        const q = b.gridPos as GridPos;
        if (p.x < q.x + q.w && q.x < p.x + p.w && p.y < q.y + q.h && q.y < p.y + p.h)
          overlaps.push(`${a.title} / ${b.title}`);
      }),
    );
    expect(overlaps).toEqual([]);
  });

  it('uses only its own variables and every target names a metric', () => {
    const values = Object.fromEntries(variables.map((v) => [v.name, 'x']));
    for (const { panel, t } of targets) {
      expect(() => substitute(t.expr, values), panel.title).not.toThrow();
      expect(metricNames(t.expr), `${panel.title}: ${t.expr}`).not.toEqual([]);
    }
  });

  it('reads metric names out of PromQL, not functions, labels or keywords', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, http_route) (rate(a_bucket{x=~"b{c}"}[5m] offset 1h))) / on (x) group_left (y) topk(3, b:c:rate5m) > bool 1e3 or vector(0)',
      ).sort(),
    ).toEqual(['a_bucket', 'b:c:rate5m']);
  });
});

describe.skipIf(!tools)('chart: the Grafana dashboard ConfigMap', () => {
  const dashboards = (objects: K8sObject[]) =>
    objects.filter((o): o is ConfigMap => o.kind === 'ConfigMap' && o.metadata.name === CM_NAME);

  it('is off by default, also with the recording rules on', async () => {
    expect(dashboards(await render())).toEqual([]);
    expect(dashboards(await render('analytics.prometheus.rules.enabled=true'))).toEqual([]);
  });

  it('on: one ConfigMap with the sidecar label and the file, unchanged, as valid JSON', async () => {
    const [cm, ...more] = dashboards(await render(...ON));
    expect(more).toEqual([]);
    expect(cm?.metadata.namespace).toBe(NAMESPACE);
    expect(cm?.metadata.labels).toMatchObject({
      grafana_dashboard: '1',
      'app.kubernetes.io/instance': 'hg',
      'app.kubernetes.io/part-of': 'hookgate',
    });
    expect(cm?.metadata.annotations).toBeUndefined();
    expect(Object.keys(cm?.data ?? {})).toEqual(['hookgate.json']);
    expect(JSON.parse(cm?.data['hookgate.json'] ?? '')).toEqual(dashboard);
  });

  it('takes the label, its value, a target namespace, a folder and extra metadata', async () => {
    const [cm] = dashboards(
      await render(
        ...ON,
        'grafana.dashboards.label=dashboards.example.com/grafana',
        'grafana.dashboards.labelValue=hookgate',
        'grafana.dashboards.namespace=monitoring',
        'grafana.dashboards.folder=Webhooks',
        'grafana.dashboards.folderAnnotation=k8s-sidecar-target-directory',
        'grafana.dashboards.labels.team=platform',
        'grafana.dashboards.annotations.owner=hooks',
      ),
    );
    expect(cm?.metadata.namespace).toBe('monitoring');
    expect(cm?.metadata.labels).toMatchObject({
      'dashboards.example.com/grafana': 'hookgate',
      team: 'platform',
    });
    expect(cm?.metadata.labels?.grafana_dashboard).toBeUndefined();
    expect(cm?.metadata.annotations).toEqual({
      owner: 'hooks',
      'k8s-sidecar-target-directory': 'Webhooks',
    });
    // A number on the command line is still a label value (a string).
    const [numeric] = dashboards(await render(...ON, 'grafana.dashboards.labelValue=2'));
    expect(numeric?.metadata.labels?.grafana_dashboard).toBe('2');
  });

  it('refuses to render without the recording rules its request panels read', async () => {
    expect(await renderError('grafana.dashboards.enabled=true')).toContain(
      'grafana.dashboards.enabled needs analytics.prometheus.rules.enabled',
    );
    expect(await renderError(...ON, 'grafana.dashboards.label=bad label')).toMatch(/label/);
  });
});

interface PromAnswer<T> {
  status: string;
  error?: string;
  data: T;
}
interface Sample {
  metric: Record<string, string>;
}

const ADMIN_TOKEN = 'grafana-dashboard-admin-token-0123456789';
const BASE = '/webhook/default_production_';

describe.skipIf(!tools || !redisAvailable() || skipWithoutPrometheus())(
  'every dashboard query against a real Prometheus scraping hookgate',
  () => {
    let cluster: TestCluster;
    let redis: RedisServer;
    let prometheus: RunningPrometheus;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    const children: ChildProcess[] = [];
    let gateway = 0;

    const query = async <T>(path: string, params: Record<string, string>) => {
      const res = await fetch(`${prometheus.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(params),
      });
      return (await res.json()) as PromAnswer<T>;
    };
    const instant = (expr: string) => query<{ result: Sample[] }>('/api/v1/query', { query: expr });
    const exported = async () => {
      const res = await fetch(`${prometheus.url}/api/v1/label/__name__/values`);
      return new Set(((await res.json()) as PromAnswer<string[]>).data);
    };

    /** Values of a `label_values(selector, label)` variable query, asked as Grafana does. */
    const labelValues = async (q: string): Promise<string[]> => {
      const m = /^label_values\((.*),\s*(\w+)\)$/.exec(q);
      if (!m) throw new Error(`not a label_values(selector, label) query: ${q}`);
      const params = new URLSearchParams({ 'match[]': m[1] as string });
      const res = await fetch(`${prometheus.url}/api/v1/label/${m[2]}/values?${params}`);
      const answer = (await res.json()) as PromAnswer<string[]>;
      expect(answer.status, `${q}: ${answer.error}`).toBe('success');
      return answer.data.sort();
    };

    function start(
      role: 'operator' | 'gateway' | 'worker',
      port: number,
      env: Record<string, string> = {},
    ) {
      children.push(
        spawnRole(cluster, redis.url, role, port, {
          HOOKGATE_OUTBOUND_ALLOW: `127.0.0.1:${receiver.port}`,
          ...env,
        }),
      );
    }
    const apply = async (plural: string, body: object) =>
      expect(
        (
          await fetch(
            `${cluster.server.url}/apis/hookgate.dev/v1alpha1/namespaces/default/${plural}`,
            {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(body),
            },
          )
        ).status,
      ).toBe(201);
    const post = (segment: string, body = '{"n":1}', headers: Record<string, string> = {}) =>
      fetch(`http://127.0.0.1:${gateway}${BASE}${segment}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });

    beforeAll(async () => {
      // The chart's own recording rules, evaluated every second.
      const rule = (await render(...ON, 'analytics.prometheus.rules.interval=1s')).find(
        (o) => o.kind === 'PrometheusRule',
      ) as K8sObject & { spec: { groups: unknown[] } };
      const rules = join(work, 'dashboard-rules.yaml');
      writeFileSync(rules, stringify({ groups: rule.spec.groups }));

      cluster = await startTestCluster({ crds: true });
      writeFileSync(join(cluster.dir, 'admin-token'), `${ADMIN_TOKEN}\n`);
      redis = await startRedis();
      receiver = await startReceiver();
      const port = await freePortRun(8);
      gateway = port + 1;
      const worker = port + 2;
      // What a ServiceMonitor in the release's namespace gives every series.
      prometheus = await startPrometheus(
        [`127.0.0.1:${port}`, `127.0.0.1:${gateway}`, `127.0.0.1:${worker}`],
        { labels: { namespace: NAMESPACE }, ruleFiles: [rules] },
      );
      start('operator', port);
      start('gateway', gateway);
      start('worker', worker);
      await apply('workflows', workflow('orders'));
      await apply(
        'workflows',
        workflow('broken', {
          application: 'billing',
          nodes: [{ id: 'a', type: 'transform', expression: '$error("boom")' }],
          retry: { attempts: 2, backoff: { initial: '100ms' }, on: ['nodeError'] },
        }),
      );
      // A workflow whose successes leave no record (ADR 0041): counted as discarded.
      await apply('workflows', workflow('lean', { executionRecords: { succeeded: 'Discard' } }));
      await apply(
        'webhooktriggers',
        trigger('ingest', { pathSegment: 'ingest', rateLimit: { requestsPerMinute: 5 } }),
      );
      await apply(
        'webhooktriggers',
        trigger('lean', { workflowRef: { name: 'lean' }, pathSegment: 'ingest' }),
      );
      await apply(
        'webhooktriggers',
        trigger('callback', { pathSegment: 'callback', response: { mode: 'asyncCallback' } }),
      );
      await apply(
        'webhooktriggers',
        trigger('sync', {
          workflowRef: { name: 'broken' },
          pathSegment: 'sync',
          response: { mode: 'waitForCompletion' },
        }),
      );
      // The routes are served (404 before), OPTIONS is not one of their methods.
      for (const path of ['orders/ingest', 'orders/callback', 'broken/sync', 'lean/ingest'])
        await eventually(
          async () =>
            expect(
              (await fetch(`http://127.0.0.1:${gateway}${BASE}${path}`, { method: 'OPTIONS' }))
                .status,
            ).toBe(405),
          30_000,
          100,
        );

      // Traffic: allowed and rate-limited requests, a 404, an execution that fails,
      // retries and is dead-lettered (answered 5xx), a callback delivered.
      const statuses: number[] = [];
      for (let i = 0; i < 8; i += 1) statuses.push(await post('orders/ingest'));
      statuses.push(await post('orders/nowhere'));
      statuses.push(await post('lean/ingest'));
      statuses.push(await post('broken/sync'));
      statuses.push(
        await post('orders/callback', '{"n":2}', { 'x-callback-url': `${receiver.url}/hook` }),
      );
      expect(statuses).toContain(429);
      expect(statuses.some((s) => s >= 500)).toBe(true);
      await eventually(() => expect(receiver.received.length).toBe(1), 10_000);
    }, 90_000);

    afterAll(async () => {
      for (const c of children) c.kill('SIGKILL');
      await prometheus?.stop();
      await receiver?.close();
      await cluster?.close();
      await redis?.stop();
    });

    it("every variable's label_values query finds values", async () => {
      const chosen: Record<string, string> = {};
      for (const v of variables.slice(1)) {
        const q = substitute(queryOf(v), chosen);
        let values: string[] = [];
        await eventually(
          async () => {
            values = await labelValues(q);
            expect(values, v.name).not.toEqual([]);
          },
          20_000,
          250,
        );
        // The next variable's query sees this one as Grafana would (a single value, or
        // a multi-value as the regex alternation of every value).
        chosen[v.name] = v.multi ? `(${values.join('|')})` : (values[0] as string);
      }
      expect(chosen).toMatchObject({
        namespace: NAMESPACE,
        application: '(billing|shop)',
        environment: '(production)',
      });
      expect(chosen.endpoint).toContain(`${BASE}orders/ingest`);
    });

    it('every target parses, names only exported metrics, and returns data', async () => {
      const all = { namespace: NAMESPACE, application: '.*', environment: '.*', endpoint: '.*' };
      const concrete = {
        namespace: NAMESPACE,
        application: 'shop|billing',
        environment: 'production',
        endpoint: `${BASE}orders/ingest|${BASE}broken/sync|${BASE}orders/callback`,
      };
      // Empty with this traffic: no reconcile failed.
      const mayBeEmpty = new Set(['Operator reconcile errors']);
      const referenced = new Set(targets.flatMap(({ t }) => metricNames(t.expr)));
      // Every name one scrape plus one rule evaluation after the traffic.
      await eventually(
        async () => {
          const names = await exported();
          expect([...referenced].filter((n) => !names.has(n))).toEqual([]);
        },
        30_000,
        500,
      ).catch(() => undefined);
      const names = await exported();
      const missing = [...referenced].filter((n) => !names.has(n));
      expect(missing, `metrics the dashboard names that hookgate does not export`).toEqual([]);

      for (const { panel, t } of targets) {
        const what = `${panel.title} (${t.refId}): ${t.expr}`;
        const answer = await instant(substitute(t.expr, all));
        expect(answer.status, `${what}: ${answer.error}`).toBe('success');
      }
      await eventually(
        async () => {
          const empty: string[] = [];
          for (const { panel, t } of targets) {
            if (mayBeEmpty.has(panel.title)) continue;
            const answer = await instant(substitute(t.expr, concrete));
            expect(answer.status, `${panel.title}: ${answer.error}`).toBe('success');
            if (answer.data.result.length === 0) empty.push(`${panel.title} (${t.refId})`);
          }
          expect(empty, 'targets without data for the concrete selection').toEqual([]);
        },
        30_000,
        1000,
      );
    }, 90_000);
  },
);
