// The request duration histogram must expose exactly what prom-client's Histogram
// would, over the same buckets and observations, plus a `_created` per label set.
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LATENCY_BUCKETS_SECONDS } from '../../runtime/analytics/definitions.ts';
import { RequestDurationHistogram } from '../../runtime/analytics/request-histogram.ts';

const labelNames = ['route', 'status', 'consumer'] as const;
type Label = (typeof labelNames)[number];

function pair(): {
  ours: RequestDurationHistogram<Label>;
  theirs: Histogram<Label>;
  registries: [Registry, Registry];
} {
  const registries: [Registry, Registry] = [new Registry(), new Registry()];
  const config = { name: 'req_seconds', help: 'Request duration.', labelNames };
  const ours = new RequestDurationHistogram({ ...config, registers: [registries[0]] });
  const theirs = new Histogram({
    ...config,
    buckets: [...LATENCY_BUCKETS_SECONDS],
    registers: [registries[1]],
  });
  return { ours, theirs, registries };
}

describe('RequestDurationHistogram', () => {
  it('exposes what a prom-client Histogram exposes for the same observations', async () => {
    const { ours, theirs, registries } = pair();
    const start = Date.now();
    const labelSets: Record<Label, string>[] = [
      { route: '/webhook/a/b', status: '202', consumer: 'acme' },
      { route: '/webhook/a/b', status: '401', consumer: 'anonymous' },
      { route: 'unmatched', status: '404', consumer: 'quo"te\\back\nslash' },
    ];
    // Every bound exactly, between bounds, below the first, above the last, zero.
    const values = [0, 0.0004, 30, 31, 1e6, ...LATENCY_BUCKETS_SECONDS.map((b) => b * 0.99)];
    values.push(...LATENCY_BUCKETS_SECONDS);
    values.forEach((value, i) => {
      const labels = labelSets[i % labelSets.length] as Record<Label, string>;
      ours.observe([labels.route, labels.status, labels.consumer], value);
      theirs.observe({ ...labels }, value);
    });
    const end = Date.now();
    expect(withoutCreated(await registries[0].metrics())).toBe(await registries[1].metrics());
    const json = async (r: Registry) =>
      (await r.getMetricsAsJSON()).map((m) => ({
        ...m,
        values: m.values
          .filter((v) => !(v as { metricName?: string }).metricName?.endsWith('_created'))
          .map(({ value, labels }) => ({ value, labels })),
      }));
    expect(await json(registries[0])).toEqual(await json(registries[1]));
    // `_created`: once per label set, after its `_count`, when it was first observed.
    const created = (await registries[0].metrics())
      .split('\n')
      .filter((line) => line.startsWith('req_seconds_created{'));
    expect(created).toHaveLength(labelSets.length);
    for (const line of created) {
      const seconds = Number(line.slice(line.lastIndexOf(' ') + 1));
      expect(seconds * 1000).toBeGreaterThanOrEqual(start);
      expect(seconds * 1000).toBeLessThanOrEqual(end);
    }
  });

  it('keeps a label set`s _created until it is forgotten, then starts it again', async () => {
    const { ours, registries } = pair();
    const createdOf = async () =>
      /req_seconds_created\{[^}]*\} (\S+)/.exec(await registries[0].metrics())?.[1];
    ours.observe(['r', '200', 'c'], 0.1);
    const first = await createdOf();
    await new Promise((r) => setTimeout(r, 5));
    ours.observe(['r', '200', 'c'], 0.1);
    expect(await createdOf()).toBe(first);
    ours.forget('route', 'r');
    ours.observe(['r', '200', 'c'], 0.1);
    expect(Number(await createdOf())).toBeGreaterThan(Number(first));
  });

  it('refuses a value that is not a finite number, as prom-client does', () => {
    const { ours, theirs } = pair();
    const labels = { route: 'r', status: '200', consumer: 'c' };
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => theirs.observe(labels, bad)).toThrow(TypeError);
      expect(() => ours.observe(['r', '200', 'c'], bad)).toThrow(TypeError);
    }
  });

  it('refuses a wrong number of label values', () => {
    expect(() => pair().ours.observe(['r', '200'], 1)).toThrow(/3 label values/);
  });

  it('forgets everything on reset', async () => {
    const { ours, theirs, registries } = pair();
    const labels = { route: 'r', status: '200', consumer: 'c' };
    ours.observe(['r', '200', 'c'], 0.2);
    theirs.observe(labels, 0.2);
    registries[0].resetMetrics();
    registries[1].resetMetrics();
    ours.observe(['r', '500', 'c'], 1);
    theirs.observe({ ...labels, status: '500' }, 1);
    expect(withoutCreated(await registries[0].metrics())).toBe(await registries[1].metrics());
  });
});

function withoutCreated(exposition: string): string {
  return exposition
    .split('\n')
    .filter((line) => !line.startsWith('req_seconds_created{'))
    .join('\n');
}
