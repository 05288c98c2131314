// networkPolicy.egress: one egress NetworkPolicy per role, allowing only what the role
// connects to (DNS; Redis; the API server for the operator and, with admin.auth
// kubernetes, the gateway; Prometheus for the gateway's analytics; the public internet and
// outboundRules for the gateway and the workers), and the render-time checks of its values.
// The internet rule's except ranges are held against the outbound guard's own classes.
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { blockedRange } from '../../runtime/engine/outbound/guard.ts';
import { NEVER_CIDRS } from '../../runtime/engine/outbound/policy.ts';
import {
  FULLNAME,
  deployment,
  redisStatefulSet,
  render,
  renderError,
  renderValuesError,
  renderWithValues,
  tools,
  type K8sObject,
} from './chart.ts';

interface Peer {
  ipBlock?: { cidr: string; except?: string[] };
  podSelector?: { matchLabels?: Record<string, string> };
  namespaceSelector?: { matchLabels?: Record<string, string> };
}
interface EgressRule {
  to?: Peer[];
  ports?: { port: number | string; protocol?: string; endPort?: number }[];
}
interface NetworkPolicy extends K8sObject {
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    egress?: EgressRule[];
    ingress?: unknown[];
  };
}

const ON = [
  'networkPolicy.enabled=true',
  'networkPolicy.egress.enabled=true',
  'networkPolicy.egress.apiServer.cidrs={172.18.0.2/32}',
];

const DNS: EgressRule = {
  to: [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
      podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
    },
  ],
  ports: [
    { port: 53, protocol: 'UDP' },
    { port: 53, protocol: 'TCP' },
  ],
};
const CHART_REDIS: EgressRule = {
  to: [
    {
      podSelector: {
        matchLabels: {
          'app.kubernetes.io/name': 'hookgate',
          'app.kubernetes.io/instance': 'hg',
          'app.kubernetes.io/component': 'redis',
        },
      },
    },
  ],
  ports: [{ port: 6379, protocol: 'TCP' }],
};
const API_SERVER: EgressRule = {
  to: [{ ipBlock: { cidr: '172.18.0.2/32' } }],
  ports: [
    { port: 443, protocol: 'TCP' },
    { port: 6443, protocol: 'TCP' },
  ],
};
const V4_EXCEPT = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '168.63.129.16/32',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
];
const V6_EXCEPT = [
  '::/128',
  '::1/128',
  'fc00::/7',
  'fe80::/10',
  // V4_EXCEPT as NAT64 and 6to4 addresses carry it (a NAT64 gateway would reach 10.0.0.1
  // for 64:ff9b::a00:1).
  '64:ff9b::/104',
  '64:ff9b::a00:0/104',
  '64:ff9b::6440:0/106',
  '64:ff9b::7f00:0/104',
  '64:ff9b::a83f:8110/128',
  '64:ff9b::a9fe:0/112',
  '64:ff9b::ac10:0/108',
  '64:ff9b::c0a8:0/112',
  '2002::/24',
  '2002:a00::/24',
  '2002:6440::/26',
  '2002:7f00::/24',
  '2002:a83f:8110::/48',
  '2002:a9fe::/32',
  '2002:ac10::/28',
  '2002:c0a8::/32',
];
const INTERNET: EgressRule = {
  to: [
    { ipBlock: { cidr: '0.0.0.0/0', except: V4_EXCEPT } },
    { ipBlock: { cidr: '::/0', except: V6_EXCEPT } },
  ],
};

function egressPolicies(objects: K8sObject[]): Map<string, NetworkPolicy> {
  const policies = objects.filter(
    (o): o is NetworkPolicy =>
      o.kind === 'NetworkPolicy' && (o as NetworkPolicy).spec.policyTypes.includes('Egress'),
  );
  return new Map(policies.map((p) => [p.metadata.name, p]));
}

function rulesOf(objects: K8sObject[], role: string): EgressRule[] {
  const policy = egressPolicies(objects).get(`${FULLNAME}-${role}-egress`);
  if (!policy) throw new Error(`no egress policy for ${role}`);
  return policy.spec.egress ?? [];
}

function inside(address: string, cidrs: string[]): boolean {
  const ip = ipaddr.parse(address);
  return cidrs.some((c) => {
    const [base, bits] = ipaddr.parseCIDR(c);
    return base.kind() === ip.kind() && ip.match(base, bits);
  });
}

/** The first and the last address of a CIDR. */
function ends(cidr: string): string[] {
  const [base, bits] = ipaddr.parseCIDR(cidr);
  if (base.kind() === 'ipv4') {
    return [
      ipaddr.IPv4.networkAddressFromCIDR(cidr).toString(),
      ipaddr.IPv4.broadcastAddressFromCIDR(cidr).toString(),
    ];
  }
  const first = ipaddr.IPv6.networkAddressFromCIDR(cidr);
  const last = ipaddr.IPv6.broadcastAddressFromCIDR(cidr);
  return bits === 128 ? [base.toString()] : [first.toString(), last.toString()];
}

describe.skipIf(!tools)('chart: egress NetworkPolicies', () => {
  it('renders none by default, nor with networkPolicy.enabled alone', async () => {
    expect([...egressPolicies(await render()).keys()]).toEqual([]);
    // The chart's Redis policy allows Redis no egress at all; it is the only one.
    expect([...egressPolicies(await render('networkPolicy.enabled=true')).keys()]).toEqual([
      `${FULLNAME}-redis`,
    ]);
  });

  it('needs networkPolicy.enabled', async () => {
    expect(
      await renderError(
        'networkPolicy.egress.enabled=true',
        'networkPolicy.egress.apiServer.cidrs={172.18.0.2/32}',
      ),
    ).toContain('networkPolicy.egress.enabled needs networkPolicy.enabled=true');
  });

  it('gives each role exactly what it connects to, selected by its Deployment labels', async () => {
    const objects = await render(...ON);
    expect([...egressPolicies(objects).keys()].sort()).toEqual([
      `${FULLNAME}-gateway-egress`,
      `${FULLNAME}-operator-egress`,
      `${FULLNAME}-redis`,
      `${FULLNAME}-worker-egress`,
    ]);
    for (const role of ['operator', 'gateway', 'worker']) {
      const policy = egressPolicies(objects).get(`${FULLNAME}-${role}-egress`);
      expect(policy?.spec.policyTypes, role).toEqual(['Egress']);
      expect(policy?.spec.ingress, role).toBeUndefined();
      expect(policy?.spec.podSelector, role).toEqual({
        matchLabels: deployment(objects, role).spec.selector.matchLabels,
      });
    }
    expect(rulesOf(objects, 'operator')).toEqual([DNS, CHART_REDIS, API_SERVER]);
    expect(rulesOf(objects, 'gateway')).toEqual([DNS, CHART_REDIS, API_SERVER, INTERNET]);
    expect(rulesOf(objects, 'worker')).toEqual([DNS, CHART_REDIS, INTERNET]);
  });

  it("reaches the chart's Redis pods on the port they listen on", async () => {
    const objects = await render(...ON);
    const sts = redisStatefulSet(objects);
    const peer = CHART_REDIS.to?.[0]?.podSelector?.matchLabels;
    expect(peer).toEqual(sts.spec.selector.matchLabels);
    expect(sts.spec.template.metadata.labels).toMatchObject(peer ?? { missing: 'labels' });
    const [redis] = sts.spec.template.spec.containers;
    expect(redis?.ports.map((p) => p.containerPort)).toEqual([6379]);
  });

  it('opens the API server to the gateway only when it authenticates admin requests with it', async () => {
    const objects = await render(...ON, 'admin.auth=token', 'admin.tokenSecret.name=admin-token');
    expect(rulesOf(objects, 'gateway')).toEqual([DNS, CHART_REDIS, INTERNET]);
    expect(rulesOf(objects, 'operator')).toEqual([DNS, CHART_REDIS, API_SERVER]);
  });

  it('renders no worker policy with inline executions; the gateway keeps the internet', async () => {
    const objects = await render(...ON, 'gateway.executions=inline');
    expect([...egressPolicies(objects).keys()].sort()).toEqual([
      `${FULLNAME}-gateway-egress`,
      `${FULLNAME}-operator-egress`,
      `${FULLNAME}-redis`,
    ]);
    expect(rulesOf(objects, 'gateway')).toEqual([DNS, CHART_REDIS, API_SERVER, INTERNET]);
  });

  it('requires the API server address, saying how to find it, or an explicit omit', async () => {
    const missing = await renderError(
      'networkPolicy.enabled=true',
      'networkPolicy.egress.enabled=true',
    );
    expect(missing).toContain('networkPolicy.egress.apiServer.cidrs is required');
    expect(missing).toContain('kubectl get endpoints kubernetes -n default');
    expect(missing).toContain('apiServer.omit=true');

    const omitted = await render(
      'networkPolicy.enabled=true',
      'networkPolicy.egress.enabled=true',
      'networkPolicy.egress.apiServer.omit=true',
    );
    expect(rulesOf(omitted, 'operator')).toEqual([DNS, CHART_REDIS]);
    expect(rulesOf(omitted, 'gateway')).toEqual([DNS, CHART_REDIS, INTERNET]);

    expect(await renderError(...ON, 'networkPolicy.egress.apiServer.omit=true')).toContain(
      'networkPolicy.egress.apiServer: set cidrs or omit, not both',
    );

    const dual = await render(
      'networkPolicy.enabled=true',
      'networkPolicy.egress.enabled=true',
      'networkPolicy.egress.apiServer.cidrs={10.0.0.1/32,fd00:10::1/128}',
      'networkPolicy.egress.apiServer.ports={6443}',
    );
    expect(rulesOf(dual, 'operator')[2]).toEqual({
      to: [{ ipBlock: { cidr: '10.0.0.1/32' } }, { ipBlock: { cidr: 'fd00:10::1/128' } }],
      ports: [{ port: 6443, protocol: 'TCP' }],
    });
  });

  it('reaches an external Redis through the peers and ports given, and requires them', async () => {
    const external = ['redis.enabled=false', 'externalRedis.existingSecret.name=my-redis'];
    expect(await renderError(...ON, ...external)).toContain(
      'networkPolicy.egress.externalRedis.to is required with externalRedis',
    );
    const to = [
      { ipBlock: { cidr: '10.1.2.0/28' } },
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'data' } },
        podSelector: { matchLabels: { app: 'redis' } },
      },
    ];
    const objects = await renderWithValues([...ON, ...external], {
      networkPolicy: { egress: { externalRedis: { to, ports: [6380, 16380] } } },
    });
    const redis: EgressRule = {
      to,
      ports: [
        { port: 6380, protocol: 'TCP' },
        { port: 16380, protocol: 'TCP' },
      ],
    };
    expect(rulesOf(objects, 'operator')).toEqual([DNS, redis, API_SERVER]);
    expect(rulesOf(objects, 'gateway')).toEqual([DNS, redis, API_SERVER, INTERNET]);
    expect(rulesOf(objects, 'worker')).toEqual([DNS, redis, INTERNET]);
    // No Redis of the chart, so no policy for it.
    expect(egressPolicies(objects).has(`${FULLNAME}-redis`)).toBe(false);

    expect(
      await renderError(...ON, 'networkPolicy.egress.externalRedis.to[0].ipBlock.cidr=10.0.0.0/8'),
    ).toContain('externalRedis.to is set but the chart runs its own Redis');
  });

  it('excepts exactly the ranges the outbound guard refuses by default', async () => {
    const objects = await render(...ON);
    const [v4, v6] = (rulesOf(objects, 'worker')[2]?.to ?? []).map((p) => p.ipBlock);
    expect(v4).toEqual({ cidr: '0.0.0.0/0', except: V4_EXCEPT });
    expect(v6).toEqual({ cidr: '::/0', except: V6_EXCEPT });
    // No ports: http nodes and callbacks may use any port.
    expect(rulesOf(objects, 'worker')[2]?.ports).toBeUndefined();
    const except = [...(v4?.except ?? []), ...(v6?.except ?? [])];

    // Every excepted address is one the guard refuses with no allow-list...
    for (const cidr of except) {
      for (const address of ends(cidr)) {
        expect(blockedRange(address), `${address} (${cidr})`).toBeDefined();
      }
    }
    // ...every address the guard never allows is excepted...
    for (const cidr of NEVER_CIDRS) {
      for (const address of ends(cidr)) expect(inside(address, except), cidr).toBe(true);
    }
    // ...and public addresses, next to the excepted ranges too, are not.
    for (const address of [
      '8.8.8.8',
      '1.1.1.1',
      '9.255.255.255',
      '11.0.0.0',
      '100.63.255.255',
      '100.128.0.0',
      '168.63.129.15',
      '172.32.0.1',
      '192.169.0.1',
      '2606:4700:4700::1111',
      '2a00:1450:4001::1',
    ]) {
      expect(blockedRange(address), address).toBeUndefined();
      expect(inside(address, except), address).toBe(false);
    }
    // NAT64 of a public address (8.8.8.8) stays open at the network level, for IPv6-only
    // clusters whose operators open NAT64 in the guard (which refuses it by default).
    expect(inside('64:ff9b::808:808', except)).toBe(false);
  });

  it('adds outboundRules and internet ports to the gateway and workers, never to the operator', async () => {
    const extra = [
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'billing' } } }],
        ports: [{ port: 8443, protocol: 'TCP' }],
      },
      { to: [{ ipBlock: { cidr: '10.20.0.0/16', except: ['10.20.99.0/24'] } }] },
    ];
    const objects = await renderWithValues(
      [...ON, 'networkPolicy.egress.internet.ports={443,80}'],
      {
        networkPolicy: { egress: { outboundRules: extra } },
      },
    );
    const internet: EgressRule = {
      ...INTERNET,
      ports: [
        { port: 443, protocol: 'TCP' },
        { port: 80, protocol: 'TCP' },
      ],
    };
    expect(rulesOf(objects, 'worker')).toEqual([DNS, CHART_REDIS, internet, ...extra]);
    expect(rulesOf(objects, 'gateway')).toEqual([DNS, CHART_REDIS, API_SERVER, internet, ...extra]);
    expect(rulesOf(objects, 'operator')).toEqual([DNS, CHART_REDIS, API_SERVER]);
  });

  it('opens Prometheus to the gateway when it reads analytics from it, and requires it then', async () => {
    const analytics = ['analytics.prometheus.url=http://prometheus-operated.monitoring.svc:9090'];
    expect(await renderError(...ON, ...analytics)).toContain(
      'networkPolicy.egress.prometheus.to is required',
    );
    const to = [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
      },
    ];
    const objects = await renderWithValues([...ON, ...analytics], {
      networkPolicy: { egress: { prometheus: { to } } },
    });
    const prometheus: EgressRule = { to, ports: [{ port: 9090, protocol: 'TCP' }] };
    expect(rulesOf(objects, 'gateway')).toEqual([
      DNS,
      CHART_REDIS,
      API_SERVER,
      prometheus,
      INTERNET,
    ]);
    expect(rulesOf(objects, 'worker')).toEqual([DNS, CHART_REDIS, INTERNET]);
    expect(rulesOf(objects, 'operator')).toEqual([DNS, CHART_REDIS, API_SERVER]);
  });

  it('takes other DNS peers and ports (NodeLocal DNSCache, OpenShift)', async () => {
    const to = [{ ipBlock: { cidr: '169.254.20.10/32' } }];
    const objects = await renderWithValues(ON, {
      networkPolicy: { egress: { dns: { to, ports: [53, 5353] } } },
    });
    const dns: EgressRule = {
      to,
      ports: [
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
        { port: 5353, protocol: 'UDP' },
        { port: 5353, protocol: 'TCP' },
      ],
    };
    for (const role of ['operator', 'gateway', 'worker']) {
      expect(rulesOf(objects, role)[0], role).toEqual(dns);
    }
  });

  it('refuses malformed CIDRs, naming the value', async () => {
    const at = 'networkPolicy.egress.apiServer.cidrs[0]';
    for (const [bad, why] of [
      ['10.0.0.1', 'needs an address and a prefix length'],
      ['10.0.0.256/32', 'is not an IPv4 or IPv6 address'],
      ['10.0.0.0/33', 'has a prefix longer than 32'],
      ['10.0.0.0/08', 'has no valid prefix length'],
      ['10.0.0.0/8/8', 'needs an address and a prefix length'],
      ['fd00::/129', 'has a prefix longer than 128'],
      ['fd00:::1/64', 'is not an IPv6 address'],
      ['fd00::1::2/64', 'is not an IPv6 address'],
      ['1:2:3:4:5:6:7/128', 'is not an IPv6 address'],
      ['1:2:3:4:5:6:7:8:9/128', 'is not an IPv6 address'],
      ['fd00:12345::/64', 'is not an IPv6 address'],
      ['api.example.com/32', 'is not an IPv4 or IPv6 address'],
    ]) {
      const stderr = await renderError(
        'networkPolicy.enabled=true',
        'networkPolicy.egress.enabled=true',
        `networkPolicy.egress.apiServer.cidrs={${bad}}`,
      );
      expect(stderr, bad).toContain(`${at}: "${bad}" ${why}`);
    }
    for (const good of [
      '0.0.0.0/0',
      '10.0.0.1/32',
      '::/0',
      'fd00:10::1/128',
      '1:2:3:4:5:6:7:8/64',
    ]) {
      const objects = await render(
        'networkPolicy.enabled=true',
        'networkPolicy.egress.enabled=true',
        `networkPolicy.egress.apiServer.cidrs={${good}}`,
      );
      expect(rulesOf(objects, 'operator')[2]?.to, good).toEqual([{ ipBlock: { cidr: good } }]);
    }
    // In peers too: the cidr and each except.
    expect(
      await renderValuesError(ON, {
        networkPolicy: {
          egress: {
            outboundRules: [{ to: [{ ipBlock: { cidr: '10.20.0.0/16', except: ['10.20.1.0'] } }] }],
          },
        },
      }),
    ).toContain(
      'networkPolicy.egress.outboundRules[0].to[0].ipBlock.except[0]: "10.20.1.0" needs an address and a prefix length',
    );
    expect(
      await renderError(...ON, 'networkPolicy.egress.dns.to[0].ipBlock.cidr=169.254.20.10'),
    ).toContain('networkPolicy.egress.dns.to[0].ipBlock.cidr: "169.254.20.10" needs an address');
  });

  it('refuses rules and peers that would allow more than they look like', async () => {
    expect(
      await renderValuesError(ON, {
        networkPolicy: { egress: { outboundRules: [{ ports: [{ port: 8080 }] }] } },
      }),
    ).toContain(
      'networkPolicy.egress.outboundRules[0] has no `to`: an egress rule without peers allows every destination',
    );
    expect(
      await renderValuesError(ON, {
        networkPolicy: {
          egress: {
            outboundRules: [
              {
                to: [{ ipBlock: { cidr: '10.0.0.0/8' }, podSelector: { matchLabels: { a: 'b' } } }],
              },
            ],
          },
        },
      }),
    ).toContain('networkPolicy.egress.outboundRules[0].to[0] has an ipBlock and a selector');
    expect(
      await renderValuesError(ON, {
        networkPolicy: {
          egress: { outboundRules: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }, {}] }] },
        },
      }),
    ).toContain('networkPolicy.egress.outboundRules[0].to[1] is an empty peer');
    expect(
      await renderValuesError(ON, { networkPolicy: { egress: { dns: { to: [] } } } }),
    ).toContain('networkPolicy.egress.dns.to is empty: no pod could resolve a name');
  });

  it('the schema refuses unknown keys, ports out of range or left out, and bad protocols', async () => {
    expect(await renderError(...ON, 'networkPolicy.egress.apiServer.cidr=10.0.0.1/32')).toMatch(
      /additional properties 'cidr' not allowed/,
    );
    expect(await renderError(...ON, 'networkPolicy.egress.internet.ports={0}')).toMatch(
      /\/networkPolicy\/egress\/internet\/ports\/0/,
    );
    expect(await renderError(...ON, 'networkPolicy.egress.apiServer.ports=null')).toMatch(
      /\/networkPolicy\/egress\/apiServer'?: missing property 'ports'/,
    );
    expect(
      await renderValuesError(ON, {
        networkPolicy: {
          egress: {
            outboundRules: [
              {
                to: [{ ipBlock: { cidr: '10.0.0.0/8' } }],
                ports: [{ port: 80, protocol: 'ICMP' }],
              },
            ],
          },
        },
      }),
    ).toMatch(/\/networkPolicy\/egress\/outboundRules\/0\/ports\/0\/protocol/);
  });
});
