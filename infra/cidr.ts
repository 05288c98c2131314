// CIDR checks of the plan: `isCidr` for what the roles parse themselves (trustedProxies,
// read with ipaddr.js), `ipBlockCidrProblem` for what goes into a NetworkPolicy ipBlock,
// in the one spelling the chart's "hookgate.cidrProblem" accepts
// (charts/hookgate/templates/_egress.tpl).
import ipaddr from 'ipaddr.js';

/** Whether ipaddr.js reads the value as a CIDR (the roles' own parser). */
export function isCidr(value: string): boolean {
  try {
    ipaddr.parseCIDR(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why the value is not a CIDR as the chart takes it into an ipBlock, or undefined when it
 * is one: address/prefix, the prefix without leading zeros, the address a dotted quad
 * (no leading zeros, no short forms) or IPv6 in hex groups (no embedded IPv4, no zone).
 * isCidr does the parsing; the chart refuses the looser spellings ipaddr.js also reads.
 */
export function ipBlockCidrProblem(value: string): string | undefined {
  const [address = '', prefix, ...rest] = String(value).split('/');
  if (prefix === undefined || rest.length > 0) {
    return 'needs an address and a prefix length, e.g. 10.0.0.1/32';
  }
  if (!/^(0|[1-9][0-9]{0,2})$/.test(prefix)) return 'has no valid prefix length after the /';
  const v4 = ipaddr.IPv4.isValidFourPartDecimal(address);
  if (!v4 && !(/^[0-9A-Fa-f:]+$/.test(address) && ipaddr.IPv6.isValid(address))) {
    return 'is not an IPv4 or IPv6 address';
  }
  return isCidr(value) ? undefined : `has a prefix longer than ${v4 ? 32 : 128}`;
}
