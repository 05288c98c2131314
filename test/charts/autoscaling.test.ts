// worker.autoscaling (docs/scaling.md, ADR 0023): off by default; on, a KEDA
// ScaledObject scales the worker Deployment (which then sets no replicas) on the queue
// gauges in Prometheus; values that cannot work fail the render. And the queue alerts
// of the opt-in PrometheusRule pass `promtool check rules`.
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  EXTERNAL_REDIS_SECRET,
  FULLNAME,
  deployment,
  render,
  renderError,
  tools,
  work,
  type K8sObject,
} from './chart.ts';

const PROMTOOL = process.env.PROMTOOL_BIN ?? '/usr/bin/promtool';
const PROM = 'http://prometheus-operated.monitoring.svc:9090';

interface Trigger {
  type: string;
  name: string;
  metricType: string;
  authenticationRef?: { name: string };
  metadata: Record<string, string>;
}
interface ScaledObject extends K8sObject {
  spec: {
    scaleTargetRef: { apiVersion: string; kind: string; name: string };
    minReplicaCount: number;
    maxReplicaCount: number;
    pollingInterval: number;
    cooldownPeriod: number;
    triggers: Trigger[];
  };
}
interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
}
interface PrometheusRule extends K8sObject {
  spec: { groups: { name: string; interval: string; rules: Rule[] }[] };
}

const scaledObjects = (objects: K8sObject[]) =>
  objects.filter((o): o is ScaledObject => o.kind === 'ScaledObject');

/** Runs promtool in the work dir: its exit code (0 or 1) and output. */
function promtool(...args: string[]): Promise<{ code: number; text: string }> {
  return new Promise((resolve) => {
    execFile(PROMTOOL, args, { cwd: work }, (err, stdout, stderr) =>
      resolve({ code: err ? 1 : 0, text: stdout + stderr }),
    );
  });
}

/** Whether promtool is here to run; under CI its absence fails the test. */
function havePromtool(): boolean {
  if (existsSync(PROMTOOL)) return true;
  if (process.env.CI === 'true') throw new Error(`${PROMTOOL} is missing`);
  console.warn(`skipped promtool check: ${PROMTOOL} is missing`);
  return false;
}

/**
 * `promtool test rules` on `groups`: one test of series a minute apart, evaluated every
 * minute; asserts that every expectation of `test.alert_rule_test` holds.
 */
async function expectAlerts(
  name: string,
  groups: unknown,
  test: { input_series: unknown[]; alert_rule_test: unknown[] },
): Promise<void> {
  writeFileSync(join(work, `${name}.yaml`), stringify({ groups }));
  const tests = join(work, `${name}.test.yaml`);
  writeFileSync(
    tests,
    stringify({
      rule_files: [`${name}.yaml`],
      evaluation_interval: '1m',
      tests: [{ interval: '1m', ...test }],
    }),
  );
  const tested = await promtool('test', 'rules', tests);
  expect(tested.text).toContain('SUCCESS');
  expect(tested.code, tested.text).toBe(0);
}

describe.skipIf(!tools)('chart: worker autoscaling', () => {
  it('is off by default: no ScaledObject, the worker Deployment keeps worker.replicas', async () => {
    const objects = await render();
    expect(scaledObjects(objects)).toEqual([]);
    expect(deployment(objects, 'worker').spec.replicas).toBe(2);
  });

  it('renders a KEDA ScaledObject on the queue depth for the worker Deployment, which sets no replicas', async () => {
    const objects = await render(
      'worker.autoscaling.enabled=true',
      `analytics.prometheus.url=${PROM}`,
      'worker.autoscaling.maxReplicas=20',
    );
    const [scaled, ...more] = scaledObjects(objects);
    expect(more).toEqual([]);
    expect(scaled?.apiVersion).toBe('keda.sh/v1alpha1');
    expect(scaled?.metadata).toMatchObject({ name: `${FULLNAME}-worker`, namespace: 'hooks' });
    expect(scaled?.spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: `${FULLNAME}-worker` },
      minReplicaCount: 1,
      maxReplicaCount: 20,
      pollingInterval: 15,
      cooldownPeriod: 300,
      triggers: [
        {
          type: 'prometheus',
          name: 'queue-depth',
          metricType: 'AverageValue',
          metadata: {
            serverAddress: PROM,
            query: `max(hookgate_queue_depth{namespace="hooks",service="${FULLNAME}-metrics"})`,
            // worker.concurrency: one worker per 32 jobs waiting or running.
            threshold: '32',
            activationThreshold: '0',
            ignoreNullValues: 'true',
          },
        },
      ],
    });
    // KEDA owns the replica count; a `replicas` here would fight it on every upgrade.
    expect(deployment(objects, 'worker').spec).not.toHaveProperty('replicas');
    expect(deployment(objects, 'gateway').spec.replicas).toBe(2);
  });

  it('takes its own Prometheus, selector, authentication, target and an age trigger', async () => {
    const [scaled] = scaledObjects(
      await render(
        'worker.autoscaling.enabled=true',
        'worker.autoscaling.prometheus.serverAddress=https://thanos.example:9090',
        'worker.autoscaling.prometheus.selector=cluster="eu"\\,namespace="hooks"',
        'worker.autoscaling.prometheus.authenticationRef=prom-auth',
        'worker.autoscaling.jobsPerReplica=50',
        'worker.autoscaling.oldestAgeSeconds=90',
        'worker.autoscaling.minReplicas=0',
      ),
    );
    expect(scaled?.spec.minReplicaCount).toBe(0);
    expect(scaled?.spec.triggers).toEqual([
      {
        type: 'prometheus',
        name: 'queue-depth',
        metricType: 'AverageValue',
        authenticationRef: { name: 'prom-auth' },
        metadata: {
          serverAddress: 'https://thanos.example:9090',
          query: 'max(hookgate_queue_depth{cluster="eu",namespace="hooks"})',
          threshold: '50',
          activationThreshold: '0',
          ignoreNullValues: 'true',
        },
      },
      {
        type: 'prometheus',
        name: 'queue-oldest-age',
        metricType: 'Value',
        authenticationRef: { name: 'prom-auth' },
        metadata: {
          serverAddress: 'https://thanos.example:9090',
          query: 'max(hookgate_queue_oldest_age_seconds{cluster="eu",namespace="hooks"})',
          threshold: '90',
          activationThreshold: '90',
          ignoreNullValues: 'true',
        },
      },
    ]);
  });

  it('renders nothing with inline executions (no workers), and refuses values that cannot work', async () => {
    const inline = await render(
      'worker.autoscaling.enabled=true',
      `analytics.prometheus.url=${PROM}`,
      'gateway.executions=inline',
    );
    expect(scaledObjects(inline)).toEqual([]);
    expect(await renderError('worker.autoscaling.enabled=true')).toContain(
      'worker.autoscaling.enabled needs worker.autoscaling.prometheus.serverAddress',
    );
    expect(
      await renderError(
        'worker.autoscaling.enabled=true',
        `analytics.prometheus.url=${PROM}`,
        'worker.autoscaling.minReplicas=5',
        'worker.autoscaling.maxReplicas=3',
      ),
    ).toContain('must not exceed');
    expect(await renderError('worker.autoscaling.maxReplicas=0')).toMatch(/maxReplicas/);
    expect(await renderError('worker.autoscaling.replicas=3')).toMatch(/replicas/);
    expect(
      await renderError('worker.autoscaling.prometheus.serverAddress=prometheus:9090'),
    ).toMatch(/serverAddress/);
  });

  it('adds the queue alerts to the PrometheusRule in queue mode; promtool checks them and tests when they fire', async () => {
    const objects = await render(
      'analytics.prometheus.rules.enabled=true',
      'gateway.maxQueued=5000',
      'analytics.prometheus.selector=namespace="hooks"',
    );
    const rule = objects.find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    const queue = rule?.spec.groups.find((g) => g.name === 'hookgate.queue');
    expect(queue?.rules.map((r) => [r.alert, r.expr, r.for, r.labels?.severity])).toEqual([
      [
        'HookgateQueueOldestJobAge',
        'max by (namespace) (hookgate_queue_oldest_age_seconds{namespace="hooks"}) > 300',
        '5m',
        'warning',
      ],
      [
        'HookgateQueueNearBound',
        'max by (namespace) (hookgate_queue_depth{namespace="hooks"}) >= 4000',
        '5m',
        'warning',
      ],
    ]);
    // Inline executions have no queue to alert on; 0 turns each alert off.
    const inline = await render(
      'analytics.prometheus.rules.enabled=true',
      'gateway.executions=inline',
    );
    const inlineRule = inline.find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    expect(inlineRule?.spec.groups.map((g) => g.name)).toEqual([
      'hookgate.requests',
      'hookgate.ratelimit',
      'hookgate.streams',
    ]);
    const ageOnly = await render(
      'analytics.prometheus.rules.enabled=true',
      'analytics.prometheus.rules.alerts.queueDepthShare=0',
    );
    const ageRule = ageOnly.find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    expect(ageRule?.spec.groups[1]?.rules.map((r) => r.alert)).toEqual([
      'HookgateQueueOldestJobAge',
    ]);

    if (!havePromtool()) return;
    const file = join(work, 'queue-rules.yaml');
    writeFileSync(file, stringify({ groups: rule?.spec.groups }));
    const out = await promtool('check', 'rules', file);
    expect(out.text).toContain('SUCCESS: 10 rules found');
    expect(out.code).toBe(0);

    // The alerts themselves, on series as two replicas report them (promtool test rules):
    // an age that grows past 300 s fires after 5 more minutes; a depth at 80 % of the
    // bound fires after 5 minutes, one just under it never does (another namespace).
    await expectAlerts('queue-rules', rule?.spec.groups, {
      input_series: [
        // 0, 60, 120 … s: over 300 from minute 6, so firing from minute 11.
        {
          series: 'hookgate_queue_oldest_age_seconds{namespace="hooks",pod="a"}',
          values: '0+60x15',
        },
        {
          series: 'hookgate_queue_oldest_age_seconds{namespace="hooks",pod="b"}',
          values: '0+59x15',
        },
        { series: 'hookgate_queue_depth{namespace="hooks",pod="a"}', values: '4000x15' },
        { series: 'hookgate_queue_depth{namespace="hooks",pod="b"}', values: '3990x15' },
        { series: 'hookgate_queue_depth{namespace="other",pod="c"}', values: '3999x15' },
      ],
      alert_rule_test: [
        { eval_time: '10m', alertname: 'HookgateQueueOldestJobAge', exp_alerts: [] },
        {
          eval_time: '12m',
          alertname: 'HookgateQueueOldestJobAge',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: 'hooks' },
              exp_annotations: {
                summary: 'The oldest queued execution has waited over 300 s',
                description:
                  'Workers in hooks do not keep up: the oldest job not done is 12m 0s old. Add workers (worker.replicas or worker.autoscaling) or look for a stuck dependency.',
              },
            },
          ],
        },
        { eval_time: '4m', alertname: 'HookgateQueueNearBound', exp_alerts: [] },
        {
          eval_time: '6m',
          alertname: 'HookgateQueueNearBound',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: 'hooks' },
              exp_annotations: {
                summary: 'The execution queue is near gateway.maxQueued (5000)',
                description:
                  'The queue in hooks holds 4000 jobs; at 5000 gateways answer 503 engine-overloaded with Retry-After.',
              },
            },
          ],
        },
      ],
    });
  });

  it('alerts when replicas leave queued executions unconfirmed (gateway.ackReplicas); promtool tests when it fires', async () => {
    // Off by default: no replica acknowledgements asked for, no group.
    const plain = (await render('analytics.prometheus.rules.enabled=true')).find(
      (o): o is PrometheusRule => o.kind === 'PrometheusRule',
    );
    expect(plain?.spec.groups.map((g) => g.name)).not.toContain('hookgate.replicas');
    const objects = await render(
      ...EXTERNAL_REDIS_SECRET,
      'analytics.prometheus.rules.enabled=true',
      'gateway.ackReplicas=1',
      'analytics.prometheus.selector=namespace="hooks"',
    );
    const rule = objects.find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    const group = rule?.spec.groups.find((g) => g.name === 'hookgate.replicas');
    expect(group?.rules.map((r) => [r.alert, r.expr, r.for])).toEqual([
      [
        'HookgateReplicaAcksUnconfirmed',
        'sum by (namespace) (rate(hookgate_queue_replica_acks_total{result!="confirmed",namespace="hooks"}[5m])) / sum by (namespace) (rate(hookgate_queue_replica_acks_total{namespace="hooks"}[5m])) > 0.01',
        '5m',
      ],
    ]);
    expect(
      await renderError('analytics.prometheus.rules.alerts.replicaAcksUnconfirmedShare=2'),
    ).toMatch(/replicaAcksUnconfirmedShare/);

    if (!havePromtool()) return;
    // Two gateways of "hooks": 100 and 95 confirmed a minute, one of them 5 unconfirmed a
    // minute from minute 10 (2.5 % of the namespace's): fires 5 minutes later. "other":
    // none unconfirmed, never.
    await expectAlerts('replica-rules', [group], {
      input_series: [
        {
          series: 'hookgate_queue_replica_acks_total{namespace="hooks",pod="a",result="confirmed"}',
          values: '0+100x30',
        },
        {
          series: 'hookgate_queue_replica_acks_total{namespace="hooks",pod="b",result="confirmed"}',
          values: '0+95x30',
        },
        {
          series:
            'hookgate_queue_replica_acks_total{namespace="hooks",pod="a",result="unconfirmed"}',
          values: '0x10 0+5x20',
        },
        {
          series: 'hookgate_queue_replica_acks_total{namespace="other",pod="c",result="confirmed"}',
          values: '0+100x30',
        },
        {
          series:
            'hookgate_queue_replica_acks_total{namespace="other",pod="c",result="unconfirmed"}',
          values: '0x30',
        },
      ],
      alert_rule_test: [
        { eval_time: '9m', alertname: 'HookgateReplicaAcksUnconfirmed', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'HookgateReplicaAcksUnconfirmed',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: 'hooks' },
              exp_annotations: {
                summary: 'Redis replicas do not confirm queued executions',
                description:
                  '2.5% of the executions queued in hooks were answered 503 store-unavailable: fewer than gateway.ackReplicas (1) Redis replicas confirmed them within gateway.ackTimeoutMs. A replica is down or lags; see hookgate_queue_replica_acks_total.',
              },
            },
          ],
        },
      ],
    });
  });
  it("alerts when gateways decide without the rate limiter's store; promtool tests when it fires", async () => {
    const off = (
      await render(
        'analytics.prometheus.rules.enabled=true',
        'analytics.prometheus.rules.alerts.rateLimiterUnavailableShare=0',
      )
    ).find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    expect(off?.spec.groups.map((g) => g.name)).not.toContain('hookgate.ratelimit');
    const rule = (
      await render(
        'analytics.prometheus.rules.enabled=true',
        'analytics.prometheus.selector=namespace="hooks"',
      )
    ).find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    const group = rule?.spec.groups.find((g) => g.name === 'hookgate.ratelimit');
    expect(group?.rules.map((r) => [r.alert, r.expr, r.for])).toEqual([
      [
        'HookgateRateLimiterUnavailable',
        'sum by (namespace) (rate(hookgate_rate_limit_decisions_total{decision=~"failed_open|failed_closed",namespace="hooks"}[5m])) / sum by (namespace) (rate(hookgate_rate_limit_decisions_total{namespace="hooks"}[5m])) > 0.01 and sum by (namespace) (increase(hookgate_rate_limit_decisions_total{decision=~"failed_open|failed_closed",namespace="hooks"}[5m])) >= 5',
        '5m',
      ],
    ]);
    expect(
      await renderError('analytics.prometheus.rules.alerts.rateLimiterUnavailableShare=2'),
    ).toMatch(/rateLimiterUnavailableShare/);

    if (!havePromtool()) return;
    // "hooks": 100 allowed a minute, 30 a minute failed open from minute 10 (Redis lost):
    // fires 5 minutes later. "other": 1,000 allowed a minute and one failed open every 4
    // minutes (a slow answer now and then, 0.025 %): never. "quiet": 3 allowed a minute
    // and one failed open every 3 minutes (a share of 10 %, but 1-2 in 5 minutes): never.
    await expectAlerts('ratelimit-rules', [group], {
      input_series: [
        {
          series:
            'hookgate_rate_limit_decisions_total{namespace="hooks",pod="a",decision="allowed"}',
          values: '0+100x30',
        },
        {
          series:
            'hookgate_rate_limit_decisions_total{namespace="hooks",pod="a",decision="failed_open"}',
          values: '0x10 0+30x20',
        },
        {
          series:
            'hookgate_rate_limit_decisions_total{namespace="other",pod="c",decision="allowed"}',
          values: '0+1000x30',
        },
        {
          series:
            'hookgate_rate_limit_decisions_total{namespace="other",pod="c",decision="failed_open"}',
          values: '0 0 0 0 1 1 1 1 2 2 2 2 3 3 3 3 4 4 4 4 5 5 5 5 6 6 6 6 7 7 7',
        },
        {
          series:
            'hookgate_rate_limit_decisions_total{namespace="quiet",pod="q",decision="allowed"}',
          values: '0+3x30',
        },
        {
          series:
            'hookgate_rate_limit_decisions_total{namespace="quiet",pod="q",decision="failed_open"}',
          values: '0 0 0 1 1 1 2 2 2 3 3 3 4 4 4 5 5 5 6 6 6 7 7 7 8 8 8 9 9 9 10',
        },
      ],
      alert_rule_test: [
        { eval_time: '9m', alertname: 'HookgateRateLimiterUnavailable', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'HookgateRateLimiterUnavailable',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: 'hooks' },
              exp_annotations: {
                summary: 'The rate limiter cannot reach Redis',
                description:
                  'Gateways in hooks decided 23.08% of the requests of rate-limited endpoints without the limiter\'s store: failureMode open lets them through with no limit (decision="failed_open"), closed answers 503 rate-limit-unavailable. See hookgate_redis_command_failures_total and the Redis circuit breaker.',
              },
            },
          ],
        },
      ],
    });
  });
  it('alerts when a gateway keeps refusing event streams at the process cap; promtool tests when it fires', async () => {
    const off = (
      await render(
        'analytics.prometheus.rules.enabled=true',
        'analytics.prometheus.rules.alerts.streamsExhaustedMinRefusals=0',
      )
    ).find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    expect(off?.spec.groups.map((g) => g.name)).not.toContain('hookgate.streams');
    const rule = (
      await render(
        'analytics.prometheus.rules.enabled=true',
        'analytics.prometheus.selector=namespace="hooks"',
      )
    ).find((o): o is PrometheusRule => o.kind === 'PrometheusRule');
    const group = rule?.spec.groups.find((g) => g.name === 'hookgate.streams');
    expect(group?.rules.map((r) => [r.alert, r.expr, r.for])).toEqual([
      [
        'HookgateStreamsExhausted',
        'sum by (namespace, pod) (increase(hookgate_streams_refused_total{cap="process",namespace="hooks"}[5m])) >= 10',
        '5m',
      ],
    ]);
    expect(
      await renderError('analytics.prometheus.rules.alerts.streamsExhaustedMinRefusals=-1'),
    ).toMatch(/streamsExhaustedMinRefusals/);

    if (!havePromtool()) return;
    // Pod "a" refuses 10 streams a minute at its process cap from minute 10: fires 5
    // minutes after its 5-minute increase reaches 10. Pod "b" refuses one every minute
    // (5 in 5 minutes): never. Pod "c" refuses 100 a minute by the per-execution cap (one
    // caller's channels): never.
    await expectAlerts('stream-rules', [group], {
      input_series: [
        {
          series:
            'hookgate_streams_refused_total{namespace="hooks",pod="a",listener="webhook",cap="process"}',
          values: '0x10 0+10x20',
        },
        {
          series:
            'hookgate_streams_refused_total{namespace="hooks",pod="b",listener="admin",cap="process"}',
          values: '0+1x30',
        },
        {
          series:
            'hookgate_streams_refused_total{namespace="hooks",pod="c",listener="webhook",cap="execution"}',
          values: '0+100x30',
        },
      ],
      alert_rule_test: [
        { eval_time: '9m', alertname: 'HookgateStreamsExhausted', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'HookgateStreamsExhausted',
          exp_alerts: [
            {
              exp_labels: { severity: 'warning', namespace: 'hooks', pod: 'a' },
              exp_annotations: {
                summary: 'A gateway refuses event streams, its open streams at the process cap',
                description:
                  'a in hooks refused 50 event streams in 5 minutes with 503 streams-exhausted: it has hookgate_streams_max streams open (config.budgets.streamsPerProcess). Add gateway replicas, raise the cap with the memory for it (each stream may buffer config.budgets.streamBufferBytes), or look for clients that open streams and keep them (hookgate_streams_open by listener).',
              },
            },
          ],
        },
      ],
    });
  });
});
