// The component's `networkPolicyIngress` argument: the chart's networkPolicy.gatewayFrom,
// .adminFrom and .metricsFrom (ADR 0045), checked before anything is created, and
// rendered by the real helm: the component's values give the NetworkPolicy a helm user
// gets with the same keys, and the keys left out keep the chart's defaults.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chartValues, resolveArgs, validateArgs, type PlanArgs } from '../../infra/plan.ts';
import { chartDir, helm, parseObjects, tools, work, type K8sObject } from '../charts/chart.ts';

const base: PlanArgs = {
  namespace: 'hooks',
  image: { tag: '0.1.0' },
  baseUrl: 'https://hooks.example.com',
  networkPolicy: true,
};
const PROMETHEUS = [{ namespaceSelector: { matchLabels: { team: 'observability' } } }];

interface NetworkPolicy extends K8sObject {
  spec: { ingress: { ports: { port: string }[]; from?: unknown[] }[] };
}

async function ingressRules(values: unknown, file: string): Promise<NetworkPolicy['spec']> {
  const path = join(work, file);
  writeFileSync(path, JSON.stringify(values));
  const r = await helm(['template', 'hookgate', chartDir, '--namespace', 'hooks', '-f', path]);
  expect(r.code, r.stderr).toBe(0);
  const np = parseObjects(r.stdout).find(
    (o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'hookgate',
  ) as NetworkPolicy | undefined;
  if (!np) throw new Error('no NetworkPolicy/hookgate rendered');
  return np.spec;
}

describe('networkPolicyIngress argument', () => {
  it('is optional: without it the chart keeps its defaults', () => {
    expect(chartValues(resolveArgs(base)).networkPolicy).toEqual({ enabled: true });
    expect(validateArgs(base)).toEqual([]);
  });

  it('maps the keys given, and only those, to networkPolicy.*From', () => {
    const values = chartValues(
      resolveArgs({ ...base, networkPolicyIngress: { metricsFrom: PROMETHEUS, adminFrom: [] } }),
    );
    expect(values.networkPolicy).toEqual({ enabled: true, metricsFrom: PROMETHEUS, adminFrom: [] });
  });

  it('refuses what the chart would: without networkPolicy, unknown keys, bad peers', () => {
    expect(
      validateArgs({ ...base, networkPolicy: false, networkPolicyIngress: { adminFrom: [] } }),
    ).toEqual([
      'networkPolicyIngress needs networkPolicy: true: it sets the peers of the ingress NetworkPolicy, which only networkPolicy creates',
    ]);
    expect(
      validateArgs({
        ...base,
        networkPolicyIngress: { metricFrom: [] } as unknown as PlanArgs['networkPolicyIngress'],
      }),
    ).toEqual([
      'networkPolicyIngress has unknown keys metricFrom: it has gatewayFrom, adminFrom, metricsFrom',
    ]);
    expect(
      validateArgs({
        ...base,
        networkPolicyIngress: {
          metricsFrom: [{}],
          adminFrom: [{ ipBlock: { cidr: '10.0.0.0/8' }, podSelector: {} }],
        },
      }),
    ).toEqual([
      'networkPolicyIngress.adminFrom[0] has an ipBlock and a selector: a peer is either; make them two peers',
      'networkPolicyIngress.metricsFrom[0] is an empty peer: give an ipBlock, a podSelector and/or a namespaceSelector',
    ]);
  });

  it.skipIf(!tools)('renders what a helm user gets with the same keys', async () => {
    const component = chartValues(
      resolveArgs({ ...base, networkPolicyIngress: { metricsFrom: PROMETHEUS, adminFrom: [] } }),
    );
    const fromPulumi = await ingressRules(component, 'ingress-component.json');
    const fromHelm = await ingressRules(
      {
        config: { baseUrl: 'https://hooks.example.com' },
        image: { tag: '0.1.0' },
        networkPolicy: { enabled: true, metricsFrom: PROMETHEUS, adminFrom: [] },
      },
      'ingress-helm.json',
    );
    expect(fromPulumi).toEqual(fromHelm);
    expect(fromPulumi.ingress.map((r) => [r.ports[0]?.port, r.from])).toEqual([
      ['http', undefined],
      ['admin', undefined],
      ['metrics', PROMETHEUS],
    ]);
    // Without the argument, the chart's defaults (ADR 0045).
    const defaults = await ingressRules(
      chartValues(resolveArgs(base)),
      'ingress-component-default.json',
    );
    expect(defaults.ingress.map((r) => [r.ports[0]?.port, r.from])).toEqual([
      ['http', undefined],
      ['admin', [{ podSelector: {} }]],
      [
        'metrics',
        [
          { podSelector: {} },
          { namespaceSelector: { matchLabels: { 'hookgate.dev/metrics-scraper': 'true' } } },
        ],
      ],
    ]);
  });
});
