// Who may reach the hookgate pods' ports, as the component's `networkPolicyIngress`
// argument: the chart's networkPolicy.gatewayFrom, .adminFrom and .metricsFrom (chart
// README, "Network policies"; docs/adr/0045-network-policy-admits-metrics-and-admin-from-the-namespace.md).
// A key left out keeps the chart's default (webhooks: every source; admin: the release's
// namespace; metrics: that namespace and the namespaces labelled
// hookgate.dev/metrics-scraper=true); `[]` admits every source. Checked before anything is
// created, as the chart's schema would, so `pulumi preview` stops naming the key.
import { peersProblems, type NetworkPolicyPeer } from './egress.ts';

export interface NetworkPolicyIngressArgs {
  /** Peers allowed on the webhook port; chart default: every source. */
  gatewayFrom?: NetworkPolicyPeer[];
  /** Peers allowed on the gateway's admin port; chart default: the release's namespace. */
  adminFrom?: NetworkPolicyPeer[];
  /** Peers allowed on every role's metrics port; chart default: namespace + labelled ones. */
  metricsFrom?: NetworkPolicyPeer[];
}

/** The chart values it sets: only the keys given (the chart's defaults for the rest). */
export type ChartIngressPeers = NetworkPolicyIngressArgs;

const AT = 'networkPolicyIngress';
const KEYS = ['gatewayFrom', 'adminFrom', 'metricsFrom'] as const;

/** Every problem with the argument (empty when valid). */
export function validateNetworkPolicyIngress(
  a: NetworkPolicyIngressArgs,
  c: { networkPolicy: boolean },
): string[] {
  const unknown = Object.keys(a).filter((k) => !(KEYS as readonly string[]).includes(k));
  if (unknown.length > 0)
    return [`${AT} has unknown keys ${unknown.join(', ')}: it has ${KEYS.join(', ')}`];
  const errors = c.networkPolicy
    ? []
    : [
        `${AT} needs networkPolicy: true: it sets the peers of the ingress NetworkPolicy, which only networkPolicy creates`,
      ];
  const values = networkPolicyIngressValues(a);
  for (const key of KEYS) {
    const peers = values[key];
    if (peers !== undefined) errors.push(...peersProblems(`${AT}.${key}`, peers));
  }
  return errors;
}

/** The chart's values for the argument: each key given (undefined or null is not given). */
export function networkPolicyIngressValues(a: NetworkPolicyIngressArgs): ChartIngressPeers {
  const values: ChartIngressPeers = {};
  for (const key of KEYS) {
    // Pulumi config may hold a null where a key was cleared.
    const peers: NetworkPolicyPeer[] | null | undefined = a[key];
    if (peers !== undefined && peers !== null) values[key] = peers;
  }
  return values;
}
