// The component's `workerAutoscaling` argument: checked with readable messages, turned
// into the chart's worker.autoscaling values, and rendered by the real helm exactly as
// the same values given with --set (a KEDA ScaledObject for the worker Deployment).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateWorkerAutoscaling } from '../../infra/autoscaling.ts';
import { chartValues, resolveArgs, validateArgs, type PlanArgs } from '../../infra/plan.ts';
import { chartDir, helm, parseObjects, tools, work, type K8sObject } from '../charts/chart.ts';

const valid: PlanArgs = {
  namespace: 'hooks',
  image: { tag: '0.1.0' },
  baseUrl: 'https://hooks.example.com',
};
const PROM = 'http://prometheus-operated.monitoring.svc:9090';

describe('workerAutoscaling argument', () => {
  it('is optional: no autoscaling values without it (the chart default)', () => {
    expect(chartValues(resolveArgs(valid)).worker).not.toHaveProperty('autoscaling');
  });

  it('maps to the chart values, defaults filled in', () => {
    const values = chartValues(
      resolveArgs({ ...valid, workerAutoscaling: { prometheusUrl: PROM, maxReplicas: 20 } }),
    );
    expect(values.worker.autoscaling).toEqual({
      enabled: true,
      minReplicas: 1,
      maxReplicas: 20,
      jobsPerReplica: 0,
      oldestAgeSeconds: 0,
      prometheus: { serverAddress: PROM, selector: '', authenticationRef: '' },
    });
    expect(validateArgs({ ...valid, workerAutoscaling: { prometheusUrl: PROM } })).toEqual([]);
    // The analytics Prometheus serves when it names none.
    expect(
      validateArgs({
        ...valid,
        analytics: { prometheus: { url: PROM } },
        workerAutoscaling: {},
      }),
    ).toEqual([]);
  });

  it('refuses what the chart would refuse, with readable messages', () => {
    expect(validateArgs({ ...valid, workerAutoscaling: {} })).toEqual([
      'workerAutoscaling needs a Prometheus: workerAutoscaling.prometheusUrl or analytics.prometheus.url',
    ]);
    expect(
      validateWorkerAutoscaling(
        {
          minReplicas: 5,
          maxReplicas: 3,
          jobsPerReplica: -1,
          oldestAgeSeconds: 1.5,
          prometheusUrl: 'prometheus:9090',
          authenticationRef: 'Not A Name',
        },
        undefined,
      ),
    ).toEqual([
      'workerAutoscaling.jobsPerReplica must be a whole number >= 0, got -1',
      'workerAutoscaling.oldestAgeSeconds must be a whole number >= 0, got 1.5',
      'workerAutoscaling.minReplicas must not exceed workerAutoscaling.maxReplicas',
      'workerAutoscaling.prometheusUrl "prometheus:9090" must be an http(s) URL',
      'workerAutoscaling.authenticationRef "Not A Name" is not a name',
    ]);
    expect(validateWorkerAutoscaling({ maxReplicas: 0 }, PROM)).toEqual([
      'workerAutoscaling.maxReplicas must be a whole number >= 1, got 0',
      'workerAutoscaling.minReplicas must not exceed workerAutoscaling.maxReplicas',
    ]);
  });
});

describe.skipIf(!tools)('workerAutoscaling argument, rendered by helm', () => {
  async function template(args: string[]): Promise<K8sObject[]> {
    const r = await helm(['template', 'hookgate', chartDir, '--namespace', 'hooks', ...args]);
    expect(r.code, r.stderr).toBe(0);
    return parseObjects(r.stdout);
  }
  const workers = (objects: K8sObject[]) =>
    objects.filter(
      (o) =>
        o.kind === 'ScaledObject' ||
        (o.kind === 'Deployment' && o.metadata.name === 'hookgate-worker'),
    );

  it('renders what helm renders from the same values given with --set', async () => {
    const values = chartValues(
      resolveArgs({
        ...valid,
        workerAutoscaling: {
          prometheusUrl: PROM,
          minReplicas: 0,
          maxReplicas: 12,
          oldestAgeSeconds: 60,
          authenticationRef: 'prom-auth',
        },
      }),
    );
    const file = join(work, 'component-values-autoscaling.json');
    writeFileSync(file, JSON.stringify({ worker: values.worker }));
    const fromPulumi = await template(['-f', file]);
    const fromHelm = await template([
      ...['--set', 'worker.autoscaling.enabled=true'],
      ...['--set', `worker.autoscaling.prometheus.serverAddress=${PROM}`],
      ...['--set', 'worker.autoscaling.minReplicas=0'],
      ...['--set', 'worker.autoscaling.maxReplicas=12'],
      ...['--set', 'worker.autoscaling.oldestAgeSeconds=60'],
      ...['--set', 'worker.autoscaling.prometheus.authenticationRef=prom-auth'],
    ]);
    expect(workers(fromPulumi)).toEqual(workers(fromHelm));
    expect(workers(fromPulumi).map((o) => o.kind)).toEqual(['Deployment', 'ScaledObject']);
  });
});
