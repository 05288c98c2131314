// Size bounds and CEL cost of the generated CRDs: every string, list and map is
// bounded, and every x-kubernetes-validations rule stays well inside what a real API
// server accepts (10,000,000 per rule, 100,000,000 per CRD). The costs come from the
// test API server's own estimator, which reads the CRDs as plain schema JSON.
// The figures are in the test names; docs/adr/0013-crd-size-bounds-and-cel-cost.md
// lists them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildCrds } from '../../../api/crd.ts';
import type { SchemaNode } from '../../../testing/kube-apiserver/cel-decl.ts';
import {
  CRD_COST_LIMIT,
  RULE_COST_LIMIT,
  estimateCrdCost,
  type CrdSchemas,
} from '../../../testing/kube-apiserver/crd-cost.ts';

const crds = buildCrds().map((crd) => {
  const spec = crd.spec as CrdSchemas & { names: { kind: string } };
  return { kind: spec.names.kind, spec };
});

/** Formats of strings whose size the API server bounds itself. */
const BOUNDED_FORMATS = new Set(['date', 'date-time', 'duration']);

/** Every unbounded string, list and map under a schema node, by path. */
function unbounded(s: SchemaNode, path: string): string[] {
  const out: string[] = [];
  if (s.type === 'string' && s.maxLength === undefined && !s.enum) {
    if (!BOUNDED_FORMATS.has(s.format ?? '')) out.push(`${path}: string without maxLength`);
  }
  if (s.type === 'array') {
    if (s.maxItems === undefined) out.push(`${path}: array without maxItems`);
    if (s.items) out.push(...unbounded(s.items, `${path}[]`));
  }
  if (typeof s.additionalProperties === 'object') {
    if (s.maxProperties === undefined) out.push(`${path}: map without maxProperties`);
    out.push(...unbounded(s.additionalProperties, `${path}{}`));
  }
  for (const [name, child] of Object.entries(s.properties ?? {})) {
    out.push(...unbounded(child, `${path}.${name}`));
  }
  return out;
}

function specAndStatus(crd: CrdSchemas): string[] {
  const root = crd.versions?.[0]?.schema?.openAPIV3Schema as SchemaNode;
  // apiVersion, kind and metadata at the root are the API server's own (it checks
  // them against the request and ObjectMeta's validation); no rule reads them.
  // Untyped preserve-unknown-fields values (schema.fields[].value) are invisible
  // to CEL and have no size keyword to carry.
  return ['spec', 'status'].flatMap((part) => {
    const node = root.properties?.[part];
    return node ? unbounded(node, `.${part}`) : [`.${part}: missing`];
  });
}

describe('CRD size bounds', () => {
  it('the check finds what the WebhookTrigger CRD lacked before it was bounded', () => {
    const fixture = parse(
      readFileSync(
        join(import.meta.dirname, '../../fixtures/crds/webhooktriggers-unbounded.yaml'),
        'utf8',
      ),
    ) as { spec: CrdSchemas };
    expect(specAndStatus(fixture.spec)).toEqual([
      '.spec.timeout: string without maxLength',
      '.spec.auth.apiKey.header: string without maxLength',
      '.spec.cors.allowedHeaders[]: string without maxLength',
      '.spec.cors.exposedHeaders[]: string without maxLength',
      '.spec.response.headers.custom[].name: string without maxLength',
      '.spec.testCredentials.header: string without maxLength',
      '.status.workflowId: string without maxLength',
      '.status.basePath: string without maxLength',
      '.status.url: string without maxLength',
      '.status.conditions: array without maxItems',
    ]);
  });

  it.each(crds)(
    '$kind: every string has maxLength, list maxItems, map maxProperties',
    ({ spec }) => {
      expect(specAndStatus(spec)).toEqual([]);
    },
  );
});

const ruleRows = crds.flatMap(({ kind, spec }) =>
  estimateCrdCost(spec).flatMap((schema) =>
    schema.rules.map((r) => ({
      kind,
      // spec.response.headers.custom.items rule 0
      path: r.path
        .replace(`${schema.path}.`, '')
        .replace(/properties\[([^\]]+)\]/g, '$1')
        .replace(/\.x-kubernetes-validations\[(\d+)\]\.(\w+)$/, ' $2 $1'),
      maxCost: r.maxCost,
      cardinality: r.cardinality,
      cost: r.cost,
    })),
  ),
);

describe('CEL cost of the generated CRDs', () => {
  it('has rules to check', () => {
    expect(ruleRows.length).toBeGreaterThan(10);
  });

  it.each(
    ruleRows.map(
      (r) => [`${r.kind} ${r.path}: ${r.maxCost} × ${r.cardinality} = ${r.cost}`, r] as const,
    ),
  )('%s (limit 10,000,000)', (_name, { cost, maxCost, cardinality }) => {
    expect(cost).toBe(maxCost * cardinality);
    expect(cost).toBeLessThan(RULE_COST_LIMIT);
  });

  const totals = crds.map(({ kind, spec }) => ({
    kind,
    total: estimateCrdCost(spec).reduce((sum, s) => sum + s.total, 0),
  }));
  it.each(totals)('$kind: all rules together $total (limit 100,000,000)', ({ total }) => {
    expect(total).toBeLessThan(CRD_COST_LIMIT);
  });

  it('keeps every rule at least 100 times below the per-rule limit', () => {
    // Headroom: a rule that gets near the limit should be a deliberate decision.
    expect(ruleRows.filter((r) => r.cost > RULE_COST_LIMIT / 100)).toEqual([]);
  });
});
