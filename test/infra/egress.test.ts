// The component's `networkPolicyEgress` argument: turned into the chart's
// networkPolicy.egress values, checked with the chart's render-time rules as readable
// messages, and rendered by the real helm: the plan's values give the expected egress
// NetworkPolicies, whatever the plan accepts the chart renders, and what it refuses the
// chart refuses too.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ipBlockCidrProblem, isCidr } from '../../infra/cidr.ts';
import {
  DEFAULT_EGRESS,
  networkPolicyEgressValues,
  type NetworkPolicyEgressArgs,
} from '../../infra/egress.ts';
import {
  CHART_DIR,
  chartValues,
  resolveArgs,
  validateArgs,
  type PlanArgs,
} from '../../infra/plan.ts';
import { chartDir, helm, parseObjects, tools, work, type K8sObject } from '../charts/chart.ts';

const API = { cidrs: ['172.18.0.2/32'], ports: [6443] };
/** The chart's Redis, the ingress policies on, the API server given: the least that renders. */
const base: PlanArgs = {
  namespace: 'hooks',
  image: { tag: '0.1.0' },
  baseUrl: 'https://hooks.example.com',
  networkPolicy: true,
  networkPolicyEgress: { apiServer: API },
};
const OWN_REDIS = { existingSecret: { name: 'redis-creds' } };
const REDIS_PEERS = [{ ipBlock: { cidr: '10.1.2.3/32' } }];
const PROM_URL = 'http://prometheus-operated.monitoring.svc:9090';
const PROM_PEERS = [
  {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
    podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
  },
];

const chartDefaults = parse(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
  networkPolicy: { egress: Record<string, unknown> };
};
const schema = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')) as object;
const validateValues = new Ajv({ allErrors: true, strict: false }).compile(schema);

describe('networkPolicyEgress argument', () => {
  it('is optional: without it the chart gets no egress values (egress stays open)', () => {
    const { networkPolicyEgress: _egress, ...without } = base;
    expect(chartValues(resolveArgs(without)).networkPolicy).toEqual({ enabled: true });
    expect(validateArgs(without)).toEqual([]);
  });

  it("fills in the chart's defaults, which are values.yaml's", () => {
    const { enabled, ...defaults } = chartDefaults.networkPolicy.egress;
    expect(enabled).toBe(false);
    expect(DEFAULT_EGRESS).toEqual(defaults);
  });

  it('maps to networkPolicy.egress, on unless enabled is false, given keys over defaults', () => {
    const values = chartValues(
      resolveArgs({
        ...base,
        redis: OWN_REDIS,
        networkPolicyEgress: {
          apiServer: API,
          dns: { ports: [53, 5353] },
          externalRedis: { to: REDIS_PEERS },
          internet: { ports: [443] },
          outboundRules: [{ to: [{ ipBlock: { cidr: '10.20.0.0/16' } }] }],
        },
      }),
    );
    expect(values.networkPolicy).toEqual({
      enabled: true,
      egress: {
        enabled: true,
        dns: { to: DEFAULT_EGRESS.dns.to, ports: [53, 5353] },
        apiServer: { cidrs: ['172.18.0.2/32'], ports: [6443], omit: false },
        externalRedis: { to: REDIS_PEERS, ports: [6379] },
        prometheus: { to: [], ports: [9090] },
        internet: { ports: [443] },
        outboundRules: [{ to: [{ ipBlock: { cidr: '10.20.0.0/16' } }] }],
      },
    });
    expect(networkPolicyEgressValues({ enabled: false }).enabled).toBe(false);
    // A key set to null (a YAML stack config) keeps the chart's default.
    expect(networkPolicyEgressValues({ dns: { to: null as never, ports: [53] } }).dns.to).toEqual(
      DEFAULT_EGRESS.dns.to,
    );
  });

  it('refuses what the chart refuses at render time, with readable messages', () => {
    expect(validateArgs({ ...base, networkPolicy: false })).toEqual([
      "networkPolicyEgress needs networkPolicy: true: the egress policies complete the ingress ones (and the chart Redis's policy, which allows Redis no egress at all)",
    ]);
    const noApi = validateArgs({ ...base, networkPolicyEgress: {} });
    expect(noApi).toHaveLength(1);
    expect(noApi[0]).toMatch(/^networkPolicyEgress\.apiServer\.cidrs is required: the operator/);
    expect(noApi[0]).toContain('kubectl get endpoints kubernetes -n default');
    expect(validateArgs({ ...base, networkPolicyEgress: { apiServer: { omit: true } } })).toEqual(
      [],
    );
    expect(
      validateArgs({ ...base, networkPolicyEgress: { apiServer: { ...API, omit: true } } }),
    ).toEqual(['networkPolicyEgress.apiServer: set cidrs or omit, not both']);
    const ownRedis = validateArgs({ ...base, redis: OWN_REDIS });
    expect(ownRedis).toHaveLength(1);
    expect(ownRedis[0]).toMatch(
      /^networkPolicyEgress\.externalRedis\.to is required with a Redis of your own/,
    );
    // The same with a URL (kept in the component's Secret): still a Redis of your own.
    expect(validateArgs({ ...base, redis: { url: 'redis://r:6379' } })).toEqual(ownRedis);
    expect(
      validateArgs({
        ...base,
        redis: OWN_REDIS,
        networkPolicyEgress: { apiServer: API, externalRedis: { to: REDIS_PEERS } },
      }),
    ).toEqual([]);
    const chartRedis = validateArgs({
      ...base,
      networkPolicyEgress: { apiServer: API, externalRedis: { to: REDIS_PEERS } },
    });
    expect(chartRedis).toHaveLength(1);
    expect(chartRedis[0]).toMatch(
      /^networkPolicyEgress\.externalRedis\.to is set but the chart runs its own Redis/,
    );
    expect(
      validateArgs({ ...base, networkPolicyEgress: { apiServer: API, dns: { to: [] } } }),
    ).toEqual([
      "networkPolicyEgress.dns.to is empty: no pod could resolve a name (Redis, the API server, callback hosts); name the cluster DNS pods, or leave it out for kube-system's k8s-app=kube-dns",
    ]);
  });

  it('asks for Prometheus peers exactly when analytics reads from Prometheus', () => {
    const prom = validateArgs({ ...base, analytics: { prometheus: { url: PROM_URL } } });
    expect(prom).toHaveLength(1);
    expect(prom[0]).toContain(
      `networkPolicyEgress.prometheus.to is required with analytics from Prometheus (${PROM_URL})`,
    );
    expect(
      validateArgs({
        ...base,
        analytics: { prometheus: { url: PROM_URL } },
        networkPolicyEgress: { apiServer: API, prometheus: { to: PROM_PEERS } },
      }),
    ).toEqual([]);
    // A URL with the memory backend: the gateways never query it.
    expect(
      validateArgs({ ...base, analytics: { backend: 'memory', prometheus: { url: PROM_URL } } }),
    ).toEqual([]);
  });

  it('checks CIDRs, peers, rules and ports as the chart does, naming the value', () => {
    expect(
      validateArgs({
        ...base,
        networkPolicyEgress: {
          apiServer: { cidrs: ['172.18.0.2', '10.0.0.0/08', '10.1/8'], ports: [0, 6443] },
          dns: { to: [{}], ports: [] },
          prometheus: {
            to: [
              { ipBlock: { cidr: '10.0.0.0/8' }, podSelector: {} },
              { ipBlock: { cidr: '::ffff:10.0.0.1/128', except: ['10.0.0.0/33'] } },
            ],
          },
          outboundRules: [
            { to: [] },
            {
              to: [{ ipBlock: { cidr: '10.20.0.0/16' } }],
              ports: [
                { port: 'https-port-name-too-long' },
                { port: 80, protocol: 'ICMP' as 'TCP' },
              ],
            },
          ],
        },
      }),
    ).toEqual([
      'networkPolicyEgress.dns.ports must be a list of 1 to 32 ports',
      'networkPolicyEgress.apiServer.ports: 0 is not a port from 1 to 65535',
      'networkPolicyEgress.apiServer.cidrs[0]: "172.18.0.2" needs an address and a prefix length, e.g. 10.0.0.1/32',
      'networkPolicyEgress.apiServer.cidrs[1]: "10.0.0.0/08" has no valid prefix length after the /',
      'networkPolicyEgress.apiServer.cidrs[2]: "10.1/8" is not an IPv4 or IPv6 address',
      'networkPolicyEgress.dns.to[0] is an empty peer: give an ipBlock, a podSelector and/or a namespaceSelector',
      'networkPolicyEgress.prometheus.to[0] has an ipBlock and a selector: a peer is either; make them two peers',
      'networkPolicyEgress.prometheus.to[1].ipBlock.cidr: "::ffff:10.0.0.1/128" is not an IPv4 or IPv6 address',
      'networkPolicyEgress.prometheus.to[1].ipBlock.except[0]: "10.0.0.0/33" has a prefix longer than 32',
      'networkPolicyEgress.outboundRules[0] has no `to`: an egress rule without peers allows every destination; name the destinations (for every public address the internet rule is already there)',
      'networkPolicyEgress.outboundRules[1].ports[0].port: "https-port-name-too-long" is neither a port from 1 to 65535 nor a port name',
      'networkPolicyEgress.outboundRules[1].ports[1].protocol must be TCP, UDP or SCTP, got "ICMP"',
    ]);
  });

  it('names a misspelt key instead of reporting the key it hides as missing', () => {
    expect(
      validateArgs({
        ...base,
        networkPolicyEgress: { apiServer: { cidr: ['172.18.0.2/32'] }, dnsTo: [] } as never,
      }),
    ).toEqual([
      'networkPolicyEgress: unknown key "dnsTo" (known: enabled, dns, apiServer, externalRedis, prometheus, internet, outboundRules)',
      'networkPolicyEgress.apiServer: unknown key "cidr" (known: cidrs, ports, omit)',
    ]);
  });

  it('with enabled false checks shapes only, as the chart renders nothing then', () => {
    expect(
      validateArgs({ ...base, networkPolicy: false, networkPolicyEgress: { enabled: false } }),
    ).toEqual([]);
    expect(
      validateArgs({
        ...base,
        networkPolicyEgress: { enabled: false, apiServer: { cidrs: ['x'] } },
      }),
    ).toEqual([
      'networkPolicyEgress.apiServer.cidrs[0]: "x" needs an address and a prefix length, e.g. 10.0.0.1/32',
    ]);
    // Peers are the chart's render-time checks, run only with the policies on.
    const peerless = {
      apiServer: API,
      dns: { to: [{}] },
      outboundRules: [{ ports: [{ port: 443 }] }],
    } as NetworkPolicyEgressArgs;
    expect(validateArgs({ ...base, networkPolicyEgress: { ...peerless, enabled: false } })).toEqual(
      [],
    );
    expect(validateArgs({ ...base, networkPolicyEgress: peerless })).toHaveLength(2);
  });

  it('a list given as a scalar (pulumi config set --path) is a message, not a crash', () => {
    expect(
      validateArgs({
        ...base,
        networkPolicyEgress: {
          apiServer: API,
          outboundRules: [
            { to: [{ ipBlock: { cidr: '10.20.0.0/16', except: '10.20.1.0/24' } }], ports: 443 },
          ],
        } as never,
      }),
    ).toEqual([
      'networkPolicyEgress.outboundRules[0].to[0].ipBlock.except must be a list of CIDRs',
      'networkPolicyEgress.outboundRules[0].ports must be a list of ports',
    ]);
  });
});

describe('ipBlockCidrProblem', () => {
  it("takes the spellings the chart's cidrProblem takes, on top of isCidr's parsing", () => {
    for (const good of ['0.0.0.0/0', '10.0.0.1/32', '::/0', 'fd00:10::1/128', '1:2:3:4:5:6:7:8/64'])
      expect(ipBlockCidrProblem(good), good).toBeUndefined();
    // The chart's own list of refusals (test/charts/egress.test.ts), with the same reasons
    // where the chart names one for IPv4 (its finer IPv6 reasons read "not an address" here).
    for (const [bad, why] of [
      ['10.0.0.1', 'needs an address and a prefix length'],
      ['10.0.0.256/32', 'is not an IPv4 or IPv6 address'],
      ['10.0.0.0/33', 'has a prefix longer than 32'],
      ['10.0.0.0/08', 'has no valid prefix length'],
      ['10.0.0.0/8/8', 'needs an address and a prefix length'],
      ['fd00::/129', 'has a prefix longer than 128'],
      ['fd00:::1/64', 'is not an IPv4 or IPv6 address'],
      ['fd00::1::2/64', 'is not an IPv4 or IPv6 address'],
      ['1:2:3:4:5:6:7/128', 'is not an IPv4 or IPv6 address'],
      ['1:2:3:4:5:6:7:8:9/128', 'is not an IPv4 or IPv6 address'],
      ['fd00:12345::/64', 'is not an IPv4 or IPv6 address'],
      ['api.example.com/32', 'is not an IPv4 or IPv6 address'],
    ] as const) {
      expect(ipBlockCidrProblem(bad), bad).toContain(why);
    }
    // Spellings ipaddr.js reads (isCidr, trustedProxies) but the chart refuses.
    for (const loose of ['10.1/8', '167772161/32', '010.0.0.1/32', '::ffff:1.2.3.4/128']) {
      expect(isCidr(loose), loose).toBe(true);
      expect(ipBlockCidrProblem(loose), loose).toBeDefined();
    }
  });
});

describe.skipIf(!tools)('networkPolicyEgress argument, rendered by helm', () => {
  interface EgressRule {
    to?: unknown[];
    ports?: { port: number | string; protocol?: string }[];
  }
  interface NetworkPolicy extends K8sObject {
    spec: { policyTypes: string[]; egress?: EgressRule[] };
  }

  let n = 0;
  /** helm template of the plan's chart values for the arguments: exit code, objects, stderr. */
  async function renderPlan(args: PlanArgs) {
    const file = join(work, `plan-egress-${n++}.json`);
    writeFileSync(file, JSON.stringify(chartValues(resolveArgs(args))));
    const r = await helm(['template', 'hookgate', chartDir, '--namespace', 'hooks', '-f', file]);
    return { code: r.code, stderr: r.stderr, objects: r.code === 0 ? parseObjects(r.stdout) : [] };
  }
  /** The per-role egress policies (the chart Redis's own policy also denies its egress). */
  function egressPolicies(objects: K8sObject[]): Map<string, NetworkPolicy> {
    return new Map(
      objects
        .filter((o): o is NetworkPolicy => o.kind === 'NetworkPolicy')
        .filter((o) => o.metadata.name.endsWith('-egress'))
        .map((o) => [o.metadata.name, o]),
    );
  }

  it('renders the egress NetworkPolicies the plan asks for', async () => {
    const { code, stderr, objects } = await renderPlan({
      ...base,
      redis: OWN_REDIS,
      analytics: { prometheus: { url: PROM_URL } },
      networkPolicyEgress: {
        apiServer: API,
        externalRedis: { to: REDIS_PEERS, ports: [6380] },
        prometheus: { to: PROM_PEERS },
        internet: { ports: [443] },
        outboundRules: [
          { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: [{ port: 8443, protocol: 'TCP' }] },
        ],
      },
    });
    expect(code, stderr).toBe(0);
    const policies = egressPolicies(objects);
    expect([...policies.keys()].sort()).toEqual([
      'hookgate-gateway-egress',
      'hookgate-operator-egress',
      'hookgate-worker-egress',
    ]);
    const rules = (role: string) => policies.get(`hookgate-${role}-egress`)?.spec.egress ?? [];
    const redis = { to: REDIS_PEERS, ports: [{ port: 6380, protocol: 'TCP' }] };
    const api = {
      to: [{ ipBlock: { cidr: '172.18.0.2/32' } }],
      ports: [{ port: 6443, protocol: 'TCP' }],
    };
    // Operator: DNS, Redis, the API server, nothing else.
    expect(rules('operator').slice(1)).toEqual([redis, api]);
    expect(rules('operator')[0]?.to).toEqual(DEFAULT_EGRESS.dns.to);
    // Gateway: + Prometheus, the internet on 443, the outbound rule.
    const gateway = rules('gateway');
    expect(gateway.slice(1, 4)).toEqual([
      redis,
      api,
      { to: PROM_PEERS, ports: [{ port: 9090, protocol: 'TCP' }] },
    ]);
    expect(gateway[4]?.ports).toEqual([{ port: 443, protocol: 'TCP' }]);
    expect(gateway[5]).toEqual({
      to: [{ ipBlock: { cidr: '10.20.0.0/16' } }],
      ports: [{ port: 8443, protocol: 'TCP' }],
    });
    // Workers: no API server, no Prometheus.
    expect(rules('worker')).toHaveLength(4);
    expect(rules('worker')[1]).toEqual(redis);
    expect(rules('worker')[3]).toEqual(gateway[5]);
  });

  it('renders whatever the plan accepts, and the schema takes its values', async () => {
    const accepted: PlanArgs[] = [
      base,
      { ...base, networkPolicyEgress: { apiServer: { omit: true } } },
      { ...base, networkPolicyEgress: { enabled: false } },
      { ...base, adminAuth: 'none', executions: 'inline' },
      {
        ...base,
        redis: { url: 'redis://r:6379' },
        analytics: { backend: 'prometheus', prometheus: { url: PROM_URL } },
        networkPolicyEgress: {
          apiServer: { cidrs: ['fd00:10::1/128', '10.0.0.1/32'], ports: [443] },
          dns: { to: [{ ipBlock: { cidr: '169.254.20.10/32' } }], ports: [53, 5353] },
          externalRedis: { to: REDIS_PEERS },
          prometheus: { to: PROM_PEERS, ports: [9091] },
          outboundRules: [
            {
              to: [{ ipBlock: { cidr: '10.20.0.0/16', except: ['10.20.1.0/24'] } }],
              ports: [{ port: 'https' }, { port: 30000, endPort: 30010, protocol: 'UDP' }],
            },
          ],
        },
      },
    ];
    for (const args of accepted) {
      expect(validateArgs(args), JSON.stringify(args)).toEqual([]);
      const values = chartValues(resolveArgs(args));
      expect(validateValues(values), JSON.stringify(validateValues.errors)).toBe(true);
      const { code, stderr, objects } = await renderPlan(args);
      expect(code, stderr).toBe(0);
      const on = args.networkPolicyEgress?.enabled !== false;
      const roles = args.executions === 'inline' ? 2 : 3;
      expect(egressPolicies(objects).size, JSON.stringify(args)).toBe(on ? roles : 0);
    }
  });

  it('refuses what the chart refuses: each message has the meaning of the chart one', async () => {
    // [arguments, what the plan says, what helm says]
    const refused: [PlanArgs, string, string][] = [
      [
        { ...base, networkPolicy: false },
        'networkPolicyEgress needs networkPolicy: true',
        'networkPolicy.egress.enabled needs networkPolicy.enabled=true',
      ],
      [
        { ...base, networkPolicyEgress: {} },
        'networkPolicyEgress.apiServer.cidrs is required',
        'networkPolicy.egress.apiServer.cidrs is required',
      ],
      [
        { ...base, networkPolicyEgress: { apiServer: { ...API, omit: true } } },
        'networkPolicyEgress.apiServer: set cidrs or omit, not both',
        'networkPolicy.egress.apiServer: set cidrs or omit, not both',
      ],
      [
        { ...base, redis: OWN_REDIS },
        'networkPolicyEgress.externalRedis.to is required',
        'networkPolicy.egress.externalRedis.to is required',
      ],
      [
        { ...base, networkPolicyEgress: { apiServer: API, externalRedis: { to: REDIS_PEERS } } },
        'networkPolicyEgress.externalRedis.to is set but the chart runs its own Redis',
        'networkPolicy.egress.externalRedis.to is set but the chart runs its own Redis',
      ],
      [
        { ...base, analytics: { prometheus: { url: PROM_URL } } },
        'networkPolicyEgress.prometheus.to is required',
        'networkPolicy.egress.prometheus.to is required',
      ],
      [
        { ...base, networkPolicyEgress: { apiServer: { cidrs: ['10.0.0.0/08'] } } },
        '"10.0.0.0/08" has no valid prefix length',
        '"10.0.0.0/08" has no valid prefix length',
      ],
      [
        { ...base, networkPolicyEgress: { apiServer: { cidrs: ['::ffff:1.2.3.4/128'] } } },
        '"::ffff:1.2.3.4/128" is not an IPv4 or IPv6 address',
        '"::ffff:1.2.3.4/128" is not an IPv4 or IPv6 address',
      ],
      [
        { ...base, networkPolicyEgress: { apiServer: API, outboundRules: [{ to: [] }] } },
        'networkPolicyEgress.outboundRules[0] has no `to`',
        'networkPolicy.egress.outboundRules[0] has no `to`',
      ],
      [
        { ...base, networkPolicyEgress: { apiServer: API, dns: { to: [{}] } } },
        'networkPolicyEgress.dns.to[0] is an empty peer',
        'networkPolicy.egress.dns.to[0] is an empty peer',
      ],
    ];
    for (const [args, plan, chart] of refused) {
      const errors = validateArgs(args);
      expect(errors, plan).toHaveLength(1);
      expect(errors[0]).toContain(plan);
      const { code, stderr } = await renderPlan(args);
      expect(code, `helm rendered what the plan refuses: ${plan}`).not.toBe(0);
      expect(stderr).toContain(chart);
    }
  });
});
