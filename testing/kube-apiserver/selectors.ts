// Label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors
// (metadata.name, metadata.namespace, a CRD's selectableFields) — K18.
import { badRequest } from './status.ts';
import type { KubeObject } from './resources.ts';

type Requirement =
  | { key: string; op: 'eq' | 'neq'; values: [string] }
  | { key: string; op: 'in' | 'notin'; values: string[] }
  | { key: string; op: 'exists' | 'notexists'; values: [] };

export type Selector = (obj: KubeObject) => boolean;

/** Split on commas that are not inside a parenthesised value set. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(current.trim());
      current = '';
    } else current += ch;
  }
  if (current.trim()) terms.push(current.trim());
  return terms;
}

const KEY = /^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$/;

function parseTerm(term: string): Requirement {
  const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (set) {
    const values = (set[3] ?? '')
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean);
    return { key: checkKey(set[1] ?? ''), op: set[2] as 'in' | 'notin', values };
  }
  const cmp = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
  if (cmp) {
    const op = cmp[2] === '!=' ? 'neq' : 'eq';
    return { key: checkKey(cmp[1] ?? ''), op, values: [cmp[3] ?? ''] };
  }
  if (term.startsWith('!'))
    return { key: checkKey(term.slice(1).trim()), op: 'notexists', values: [] };
  return { key: checkKey(term), op: 'exists', values: [] };
}

function checkKey(key: string): string {
  if (!KEY.test(key)) throw badRequest(`unable to parse requirement: invalid label key "${key}"`);
  return key;
}

function matches(req: Requirement, value: string | undefined): boolean {
  switch (req.op) {
    case 'eq':
      return value === req.values[0];
    case 'neq':
      return value !== req.values[0];
    case 'in':
      return value !== undefined && req.values.includes(value);
    case 'notin':
      return value === undefined || !req.values.includes(value);
    case 'exists':
      return value !== undefined;
    case 'notexists':
      return value === undefined;
  }
}

export function parseLabelSelector(text: string | null): Selector {
  if (!text) return () => true;
  const reqs = splitTerms(text).map(parseTerm);
  return (obj) => reqs.every((r) => matches(r, obj.metadata.labels?.[r.key]));
}

function fieldValue(obj: KubeObject, path: string): string | undefined {
  let cur: unknown = obj;
  for (const part of path.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  if (cur === undefined || cur === null) return undefined;
  return typeof cur === 'string' ? cur : JSON.stringify(cur);
}

/** Field selectors accept only `=`, `==` and `!=` on the allowed fields; others → 400. */
export function parseFieldSelector(text: string | null, allowed: string[]): Selector {
  if (!text) return () => true;
  const reqs = splitTerms(text).map((term) => {
    const m = /^([^!=\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const field = m[1] ?? '';
    if (!allowed.includes(field)) {
      throw badRequest(
        `field label not supported: ${field}` +
          ` (allowed: ${allowed.map((f) => `"${f}"`).join(', ')})`,
      );
    }
    return { field, negate: m[2] === '!=', value: m[3] ?? '' };
  });
  return (obj) => reqs.every((r) => (fieldValue(obj, r.field) === r.value) !== r.negate);
}
