// The ingress NetworkPolicy's defaults (ADR 0045): with networkPolicy.enabled the metrics
// port (no authentication) takes the release's namespace and the namespaces labelled
// hookgate.dev/metrics-scraper=true, the admin port the release's namespace, the webhook
// port everyone; `[]` still opens a port to every source. An admin Ingress with the
// namespace-only default fails the render (its controller would be shut out), and the
// install notes say what is open: everything when the policies are off.
import { describe, expect, it } from 'vitest';
import {
  FULLNAME,
  NAMESPACE,
  dryRunInstall,
  find,
  render,
  renderError,
  renderWithValues,
  tools,
  type K8sObject,
} from './chart.ts';

interface Peer {
  podSelector?: unknown;
  namespaceSelector?: unknown;
  ipBlock?: unknown;
}
interface IngressRule {
  ports: { port: string; protocol: string }[];
  from?: Peer[];
}
interface NetworkPolicy extends K8sObject {
  spec: { ingress: IngressRule[] };
}

const THIS_NAMESPACE: Peer = { podSelector: {} };
const LABELLED_SCRAPERS: Peer = {
  namespaceSelector: { matchLabels: { 'hookgate.dev/metrics-scraper': 'true' } },
};

/** The `from` of the hookgate pods' ingress rule for a named port (undefined: every source). */
async function fromOf(port: string, ...sets: string[]): Promise<Peer[] | undefined> {
  const objects = await render('networkPolicy.enabled=true', ...sets);
  const rule = find<NetworkPolicy>(objects, 'NetworkPolicy', FULLNAME).spec.ingress.find((r) =>
    r.ports.some((p) => p.port === port),
  );
  if (!rule) throw new Error(`no ingress rule for port ${port}`);
  return rule.from;
}

async function notes(...sets: string[]): Promise<string> {
  const r = await dryRunInstall(...sets);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.slice(r.stdout.indexOf('NOTES:'));
}

const ADMIN_INGRESS = [
  'ingress.enabled=true',
  'ingress.host=hooks.example.com',
  'ingress.tls.enabled=true',
  'admin.ingress.enabled=true',
];

describe.skipIf(!tools)('chart: the ingress NetworkPolicy of the hookgate pods', () => {
  it('admits scrapers of the metrics port from this namespace and labelled namespaces only', async () => {
    expect(await fromOf('metrics')).toEqual([THIS_NAMESPACE, LABELLED_SCRAPERS]);
  });

  it('admits the admin port from this namespace only', async () => {
    expect(await fromOf('admin')).toEqual([THIS_NAMESPACE]);
  });

  it('leaves the webhook port open to every source', async () => {
    expect(await fromOf('http')).toBeUndefined();
  });

  it('takes peers of your own in place of the defaults, and [] for every source', async () => {
    const prometheus = 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs';
    expect(await fromOf('metrics', prometheus)).toEqual([
      { namespaceSelector: { matchLabels: { team: 'obs' } } },
    ]);
    // `[]` in a values file (what the docs say), and null (--set cannot write an empty list).
    const open = await renderWithValues([], {
      networkPolicy: { enabled: true, metricsFrom: [], adminFrom: [] },
    });
    const rules = find<NetworkPolicy>(open, 'NetworkPolicy', FULLNAME).spec.ingress;
    expect(rules.map((r) => [r.ports[0]?.port, r.from])).toEqual([
      ['http', undefined],
      ['admin', undefined],
      ['metrics', undefined],
    ]);
    expect(await fromOf('metrics', 'networkPolicy.metricsFrom=null')).toBeUndefined();
    expect(await fromOf('admin', 'networkPolicy.adminFrom=null')).toBeUndefined();
  });

  it('refuses an admin Ingress while adminFrom keeps its namespace-only default', async () => {
    const error = await renderError('networkPolicy.enabled=true', ...ADMIN_INGRESS);
    expect(error).toContain(
      `admin.ingress.enabled publishes the admin port through your ingress controller, but networkPolicy.adminFrom admits the pods of namespace ${NAMESPACE} only (its default), so the admin Ingress would answer 502/504`,
    );
    expect(error).toContain('or set it to [] to admit every source');
    const controller = 'networkPolicy.adminFrom[0].namespaceSelector.matchLabels.name=ingress';
    expect(await fromOf('admin', ...ADMIN_INGRESS, controller)).toEqual([
      { namespaceSelector: { matchLabels: { name: 'ingress' } } },
    ]);
    // Without policies there is nothing to shut the controller out.
    expect((await render(...ADMIN_INGRESS)).some((o) => o.kind === 'NetworkPolicy')).toBe(false);
  });

  it('says in the install notes what is open', async () => {
    const off = await notes();
    expect(off).toContain(
      'No NetworkPolicy (networkPolicy.enabled is false): every pod in the cluster can reach the\nmetrics port (9090) of every hookgate pod, where /metrics answers without authentication',
    );
    expect(off).toContain('port (8081, each request authenticated)');
    const on = await notes('networkPolicy.enabled=true');
    expect(on).not.toContain('No NetworkPolicy');
    expect(on).toContain(
      'kubectl label namespace <prometheus-namespace> hookgate.dev/metrics-scraper=true',
    );
    expect(on).not.toContain('is empty: every pod in the cluster');
    const open = await notes(
      'networkPolicy.enabled=true',
      'networkPolicy.metricsFrom=null',
      'networkPolicy.adminFrom=null',
    );
    expect(open).toContain(
      'networkPolicy.metricsFrom is empty: every pod in the cluster can reach /metrics, which\nanswers without authentication.',
    );
    expect(open).toContain('networkPolicy.adminFrom is empty: every pod in the cluster can reach');
    expect(open).not.toContain('kubectl label namespace');
    const own = await notes(
      'networkPolicy.enabled=true',
      'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=obs',
    );
    expect(own).not.toContain('kubectl label namespace');
  });
});
