// The outbound policy from the environment: HOOKGATE_OUTBOUND_ALLOW and _DENY (the
// cluster policy, comma-separated entries) and HOOKGATE_OUTBOUND_NAMESPACES (a JSON
// object of per-namespace narrowings). Every bad entry is a start-up problem.
import type { OutboundGuardOptions, OutboundRules } from '../runtime/engine/outbound/guard.ts';
import { rulesProblems } from '../runtime/engine/outbound/policy.ts';

type OutboundOptions = Pick<OutboundGuardOptions, 'allow' | 'deny' | 'namespaces'>;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function entries(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

function stringList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

/** The namespace map, or the problems with it. */
function namespaces(raw: string | undefined): {
  map: Record<string, OutboundRules>;
  problems: string[];
} {
  if (raw === undefined || raw.trim() === '') return { map: {}, problems: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return { map: {}, problems: ['HOOKGATE_OUTBOUND_NAMESPACES is not JSON'] };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { map: {}, problems: ['HOOKGATE_OUTBOUND_NAMESPACES must be a JSON object'] };
  }
  const map: Record<string, OutboundRules> = {};
  const problems: string[] = [];
  for (const [namespace, value] of Object.entries(parsed)) {
    const where = `HOOKGATE_OUTBOUND_NAMESPACES.${namespace}`;
    if (!DNS_LABEL.test(namespace)) {
      problems.push(`${where}: not a namespace name`);
      continue;
    }
    const v = value as Record<string, unknown> | null;
    const keys = typeof v === 'object' && v !== null ? Object.keys(v) : undefined;
    if (!keys || keys.some((k) => k !== 'allow' && k !== 'deny')) {
      problems.push(`${where}: expected {"allow": [...], "deny": [...]}`);
      continue;
    }
    const allow = v?.allow ?? [];
    const deny = v?.deny ?? [];
    if (!stringList(allow) || !stringList(deny)) {
      problems.push(`${where}: allow and deny are lists of strings`);
      continue;
    }
    const rules = { allow, deny };
    problems.push(...rulesProblems(rules, true).map((p) => `${where}: ${p}`));
    map[namespace] = rules;
  }
  return { map, problems };
}

/** The outbound options and every problem with them. */
export function outboundSettings(env: NodeJS.ProcessEnv): {
  options: OutboundOptions;
  problems: string[];
} {
  const allow = entries(env.HOOKGATE_OUTBOUND_ALLOW);
  const deny = entries(env.HOOKGATE_OUTBOUND_DENY);
  const ns = namespaces(env.HOOKGATE_OUTBOUND_NAMESPACES);
  const problems = [
    ...rulesProblems({ allow, deny }, false).map(
      (p) =>
        `HOOKGATE_OUTBOUND_${p.startsWith('deny') ? 'DENY' : 'ALLOW'}: ${p.replace(/^(allow|deny): /, '')}`,
    ),
    ...ns.problems,
  ];
  return { options: { allow, deny, namespaces: ns.map }, problems };
}
