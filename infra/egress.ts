// What the hookgate pods may connect to, as the component's `networkPolicyEgress`
// argument: the chart's `networkPolicy.egress.*` values (charts/hookgate/README.md,
// "Egress"; docs/adr/0031-egress-policy-asks-for-the-api-server.md). Plain data, checked
// before anything is created with the rules the chart's templates enforce at render time
// ("hookgate.egress.check" in templates/_egress.tpl), so `pulumi preview` stops with the
// same meaning, naming the argument. Absent: no egress policies (the chart default).
import { ipBlockCidrProblem } from './cidr.ts';

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    values?: string[];
  }[];
}

/** A NetworkPolicyPeer: an ipBlock, or a podSelector and/or a namespaceSelector. */
export interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}

/** A NetworkPolicyEgressRule; `to` is required (a rule without peers allows everything). */
export interface NetworkPolicyEgressRule {
  to: NetworkPolicyPeer[];
  ports?: { port?: number | string; endPort?: number; protocol?: 'TCP' | 'UDP' | 'SCTP' }[];
}

/** Peers and TCP ports of one destination (the chart's `{ to, ports }` blocks). */
export interface EgressPeers {
  to?: NetworkPolicyPeer[];
  ports?: number[];
}

export interface NetworkPolicyEgressArgs {
  /** Default true: giving the argument turns the policies on; false keeps it but off. */
  enabled?: boolean;
  /** The cluster DNS pods (default kube-system's k8s-app=kube-dns) and ports (default 53). */
  dns?: EgressPeers;
  /**
   * The Kubernetes API server's endpoints (`kubectl get endpoints kubernetes -n default`)
   * as CIDRs, and their ports (default 443 and 6443). Required unless `omit` (a policy of
   * your own allows the API server).
   */
  apiServer?: { cidrs?: string[]; ports?: number[]; omit?: boolean };
  /** With a Redis of your own (`redis: { url }` or `{ existingSecret }`): required. */
  externalRedis?: EgressPeers;
  /** With analytics from Prometheus: required (default port 9090). */
  prometheus?: EgressPeers;
  /** TCP ports of the public-internet rule of the gateway and the workers; empty: all. */
  internet?: { ports?: number[] };
  /** Extra rules for the gateway and the workers: what `outbound.allow` opens in-cluster. */
  outboundRules?: NetworkPolicyEgressRule[];
}

/** The chart's networkPolicy.egress values. */
export interface ChartEgress {
  enabled: boolean;
  dns: { to: NetworkPolicyPeer[]; ports: number[] };
  apiServer: { cidrs: string[]; ports: number[]; omit: boolean };
  externalRedis: { to: NetworkPolicyPeer[]; ports: number[] };
  prometheus: { to: NetworkPolicyPeer[]; ports: number[] };
  internet: { ports: number[] };
  outboundRules: NetworkPolicyEgressRule[];
}

/** The chart's defaults (values.yaml networkPolicy.egress), `enabled` aside. */
export const DEFAULT_EGRESS: Omit<ChartEgress, 'enabled'> = {
  dns: {
    to: [
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
      },
    ],
    ports: [53],
  },
  apiServer: { cidrs: [], ports: [443, 6443], omit: false },
  externalRedis: { to: [], ports: [6379] },
  prometheus: { to: [], ports: [9090] },
  internet: { ports: [] },
  outboundRules: [],
};

/** What the rest of the plan decides that the egress rules depend on. */
export interface EgressContext {
  /** The ingress NetworkPolicies (`networkPolicy`). */
  networkPolicy: boolean;
  /** A Redis of your own (`redis: { url }` or `{ existingSecret }`), not the chart's. */
  externalRedis: boolean;
  /** The Prometheus URL when the analytics API reads from Prometheus, else undefined. */
  analyticsPrometheusUrl: string | undefined;
}

const AT = 'networkPolicyEgress';
const MAX_PEERS = 64;
const MAX_PORTS = 32;
const PEER_KEYS = ['podSelector', 'namespaceSelector', 'ipBlock'];
const PROTOCOLS = ['TCP', 'UDP', 'SCTP'];
const PORT_NAME = /^[a-z0-9]([-a-z0-9]{0,13})$/;

/** Every problem with the argument (empty when valid). */
export function validateNetworkPolicyEgress(
  a: NetworkPolicyEgressArgs,
  c: EgressContext,
): string[] {
  const unknown = unknownKeys(a);
  // Unknown keys first: a misspelt key (apiServer.cidr) would read as a missing one.
  if (unknown.length > 0) return unknown;
  const v = networkPolicyEgressValues(a);
  return [...shapeProblems(v), ...(v.enabled ? requirementProblems(v, c) : [])];
}

/** The chart's values for the argument, the chart's defaults filled in. */
export function networkPolicyEgressValues(a: NetworkPolicyEgressArgs): ChartEgress {
  const d = DEFAULT_EGRESS;
  return {
    enabled: a.enabled ?? true,
    dns: withDefaults(d.dns, a.dns),
    apiServer: withDefaults(d.apiServer, a.apiServer),
    externalRedis: withDefaults(d.externalRedis, a.externalRedis),
    prometheus: withDefaults(d.prometheus, a.prometheus),
    internet: withDefaults(d.internet, a.internet),
    outboundRules: a.outboundRules ?? d.outboundRules,
  };
}

/** The defaults, overridden by each key given (a key set to undefined or null is not given). */
function withDefaults<T extends object>(defaults: T, given: Partial<T> | undefined): T {
  const set = Object.entries(given ?? {}).filter(
    ([, value]) => value !== undefined && value !== null,
  );
  return { ...defaults, ...(Object.fromEntries(set) as Partial<T>) };
}

/** Keys the chart's schema would refuse (additionalProperties: false), as messages. */
function unknownKeys(a: NetworkPolicyEgressArgs): string[] {
  const known: Record<string, string[]> = {
    '': ['enabled', ...Object.keys(DEFAULT_EGRESS)],
    ...Object.fromEntries(
      Object.entries(DEFAULT_EGRESS)
        .filter(([, value]) => !Array.isArray(value))
        .map(([key, value]) => [key, Object.keys(value as object)]),
    ),
  };
  const errors: string[] = [];
  const check = (path: string, value: unknown, keys: string[]) => {
    if (value === undefined || value === null) return;
    for (const key of Object.keys(value)) {
      if (!keys.includes(key))
        errors.push(`${AT}${path}: unknown key "${key}" (known: ${keys.join(', ')})`);
    }
  };
  check('', a, known[''] ?? []);
  for (const [key, keys] of Object.entries(known)) {
    if (key !== '') check(`.${key}`, (a as Record<string, unknown>)[key], keys);
  }
  return errors;
}

/** The length of a list (0 for anything else, which shapeProblems reports). */
function size(list: unknown): number {
  return Array.isArray(list) ? list.length : 0;
}

/** The rules that tie the argument to the rest of the plan (the chart's render checks). */
function requirementProblems(v: ChartEgress, c: EgressContext): string[] {
  const errors: string[] = [];
  if (!c.networkPolicy)
    errors.push(
      `${AT} needs networkPolicy: true: the egress policies complete the ingress ones (and the chart Redis's policy, which allows Redis no egress at all)`,
    );
  if (size(v.dns.to) === 0)
    errors.push(
      `${AT}.dns.to is empty: no pod could resolve a name (Redis, the API server, callback hosts); name the cluster DNS pods, or leave it out for kube-system's k8s-app=kube-dns`,
    );
  if (v.apiServer.omit && size(v.apiServer.cidrs) > 0)
    errors.push(`${AT}.apiServer: set cidrs or omit, not both`);
  if (!v.apiServer.omit && size(v.apiServer.cidrs) === 0)
    errors.push(
      `${AT}.apiServer.cidrs is required: the operator (and the gateway with adminAuth kubernetes) talks to the Kubernetes API server, whose address the chart cannot guess. List its endpoints as CIDRs (\`kubectl get endpoints kubernetes -n default\`: 172.18.0.2:6443 -> cidrs [172.18.0.2/32], ports [6443]), or set apiServer.omit: true when a policy of your own allows it`,
    );
  if (!c.externalRedis && size(v.externalRedis.to) > 0)
    errors.push(
      `${AT}.externalRedis.to is set but the chart runs its own Redis (redis: { chart }), which the policies reach by its pod labels: unset it, or give a Redis of your own`,
    );
  if (c.externalRedis && size(v.externalRedis.to) === 0)
    errors.push(
      `${AT}.externalRedis.to is required with a Redis of your own (redis: { url } or { existingSecret }): the chart cannot derive its address. List it as peers, e.g. [{ ipBlock: { cidr: 10.1.2.3/32 } }], and its ports in externalRedis.ports`,
    );
  if (c.analyticsPrometheusUrl !== undefined && size(v.prometheus.to) === 0)
    errors.push(
      `${AT}.prometheus.to is required with analytics from Prometheus (${c.analyticsPrometheusUrl}): the gateways query it, and the policies open no private address. List it as peers, e.g. a namespaceSelector on its namespace with a podSelector on its pods, and its pods' port in prometheus.ports`,
    );
  return errors;
}

/**
 * What the chart refuses: its schema's shapes always, its peer checks (empty peers,
 * rules without `to`, CIDRs in peers) when the policies are on, as the chart runs them.
 */
function shapeProblems(v: ChartEgress): string[] {
  const errors: string[] = [];
  const portLists: [string, number[], number][] = [
    ['dns.ports', v.dns.ports, 1],
    ['apiServer.ports', v.apiServer.ports, 1],
    ['externalRedis.ports', v.externalRedis.ports, 1],
    ['prometheus.ports', v.prometheus.ports, 1],
    ['internet.ports', v.internet.ports, 0],
  ];
  for (const [key, ports, min] of portLists)
    errors.push(...portsProblems(`${AT}.${key}`, ports, min));
  const cidrs: unknown = v.apiServer.cidrs;
  if (!Array.isArray(cidrs) || cidrs.length > MAX_PEERS)
    errors.push(`${AT}.apiServer.cidrs must be a list of at most ${MAX_PEERS} CIDRs`);
  else
    cidrs.forEach((cidr, i) => errors.push(...cidrProblems(`${AT}.apiServer.cidrs[${i}]`, cidr)));
  if (v.enabled) {
    errors.push(...peersProblems(`${AT}.dns.to`, v.dns.to));
    errors.push(...peersProblems(`${AT}.externalRedis.to`, v.externalRedis.to));
    errors.push(...peersProblems(`${AT}.prometheus.to`, v.prometheus.to));
  }
  const rules: unknown = v.outboundRules;
  if (!Array.isArray(rules) || rules.length > MAX_PEERS)
    errors.push(`${AT}.outboundRules must be a list of at most ${MAX_PEERS} rules`);
  else
    rules.forEach((rule: NetworkPolicyEgressRule, i) =>
      errors.push(...ruleProblems(`${AT}.outboundRules[${i}]`, rule ?? {}, v.enabled)),
    );
  return errors;
}

function portsProblems(at: string, ports: unknown, min: number): string[] {
  if (!Array.isArray(ports) || ports.length < min || ports.length > MAX_PORTS)
    return [`${at} must be a list of ${min} to ${MAX_PORTS} ports`];
  return ports
    .filter((p) => !isPort(p))
    .map((p) => `${at}: ${JSON.stringify(p)} is not a port from 1 to 65535`);
}

function isPort(p: unknown): boolean {
  return typeof p === 'number' && Number.isInteger(p) && p >= 1 && p <= 65535;
}

function cidrProblems(at: string, cidr: unknown): string[] {
  const why = typeof cidr === 'string' ? ipBlockCidrProblem(cidr) : 'is not a string';
  return why ? [`${at}: ${JSON.stringify(cidr)} ${why}`] : [];
}

/** The chart's "hookgate.egress.peersCheck", and its schema's list bound and peer keys. */
export function peersProblems(at: string, peers: NetworkPolicyPeer[]): string[] {
  if (!Array.isArray(peers) || peers.length > MAX_PEERS)
    return [`${at} must be a list of at most ${MAX_PEERS} NetworkPolicy peers`];
  const errors: string[] = [];
  peers.forEach((peer, i) => {
    const here = `${at}[${i}]`;
    const keys = Object.keys(peer ?? {});
    const unknown = keys.filter((k) => !PEER_KEYS.includes(k));
    if (unknown.length > 0) {
      errors.push(
        `${here} has unknown keys ${unknown.join(', ')}: a peer has ${PEER_KEYS.join(', ')}`,
      );
    } else if (keys.length === 0) {
      errors.push(
        `${here} is an empty peer: give an ipBlock, a podSelector and/or a namespaceSelector`,
      );
    } else if (peer.ipBlock && (peer.podSelector || peer.namespaceSelector)) {
      errors.push(`${here} has an ipBlock and a selector: a peer is either; make them two peers`);
    }
    if (peer?.ipBlock) {
      errors.push(...cidrProblems(`${here}.ipBlock.cidr`, peer.ipBlock.cidr));
      const excepts: unknown = peer.ipBlock.except ?? [];
      if (!Array.isArray(excepts)) errors.push(`${here}.ipBlock.except must be a list of CIDRs`);
      else
        excepts.forEach((except, j) => {
          errors.push(...cidrProblems(`${here}.ipBlock.except[${j}]`, except));
        });
    }
  });
  return errors;
}

function ruleProblems(at: string, rule: NetworkPolicyEgressRule, checkPeers: boolean): string[] {
  const unknown = Object.keys(rule).filter((k) => k !== 'to' && k !== 'ports');
  const errors =
    unknown.length > 0
      ? [`${at} has unknown keys ${unknown.join(', ')}: a rule has to, ports`]
      : [];
  if (!checkPeers) {
    // The chart checks a rule's peers only when the policies are on.
  } else if (!Array.isArray(rule.to) || rule.to.length === 0) {
    errors.push(
      `${at} has no \`to\`: an egress rule without peers allows every destination; name the destinations (for every public address the internet rule is already there)`,
    );
  } else {
    errors.push(...peersProblems(`${at}.to`, rule.to));
  }
  const ports: unknown = rule.ports ?? [];
  if (!Array.isArray(ports)) return [...errors, `${at}.ports must be a list of ports`];
  (ports as NonNullable<NetworkPolicyEgressRule['ports']>).forEach((p, j) => {
    const here = `${at}.ports[${j}]`;
    const named = typeof p.port === 'string' && PORT_NAME.test(p.port);
    if (p.port !== undefined && !isPort(p.port) && !named)
      errors.push(
        `${here}.port: ${JSON.stringify(p.port)} is neither a port from 1 to 65535 nor a port name`,
      );
    if (p.endPort !== undefined && !isPort(p.endPort))
      errors.push(`${here}.endPort: ${JSON.stringify(p.endPort)} is not a port from 1 to 65535`);
    if (p.protocol !== undefined && !PROTOCOLS.includes(p.protocol))
      errors.push(`${here}.protocol must be TCP, UDP or SCTP, got ${JSON.stringify(p.protocol)}`);
  });
  return errors;
}
