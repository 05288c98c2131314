// The CEL cost budget of a CustomResourceDefinition, checked when it is created or
// updated, as apiextensions-apiserver does (apis/apiextensions/validation): each
// rule's worst-case cost, times the number of times it can run in one object, must
// stay within 10,000,000, and all rules of a schema together within 100,000,000.
// A rule runs once per element of every list or map around it: the product of their
// maxItems/maxProperties, or, when one of them is unbounded, as many copies of the
// rule's node as fit into one request (3 MiB / its smallest JSON size).
import { estimateExpressionCost, UNBOUNDED } from './cel-cost.ts';
import { declFromSchema, MAX_REQUEST_SIZE_BYTES, type SchemaNode } from './cel-decl.ts';

/** StaticEstimatedCostLimit: the largest estimated cost of one rule (or messageExpression). */
export const RULE_COST_LIMIT = 10_000_000;
/** StaticEstimatedCRDCostLimit: the largest estimated cost of all rules of one schema. */
export const CRD_COST_LIMIT = 100_000_000;

export interface RuleCost {
  /** Field path as the API server reports it, ending in `.rule` or `.messageExpression`. */
  path: string;
  expression: string;
  /** Worst-case cost of one evaluation. */
  maxCost: number;
  /** How many times the rule can run for one object (1 for messageExpressions). */
  cardinality: number;
  /** maxCost × cardinality: what is checked against the limits. */
  cost: number;
}

export interface SchemaCost {
  /** `spec.validation.openAPIV3Schema` or `spec.versions[i].schema.openAPIV3Schema`. */
  path: string;
  rules: RuleCost[];
  total: number;
}

export interface CostFieldError {
  field: string;
  reason: 'FieldValueForbidden';
  message: string;
}

const sat = (x: number): number => (x >= UNBOUNDED ? UNBOUNDED : x);

/** The factor by which a node multiplies the cardinality of its children (undefined: unbounded). */
function childFactor(s: SchemaNode): number | undefined {
  if (s.type === 'array') return s.maxItems;
  if (s.type === 'object' && typeof s.additionalProperties === 'object') return s.maxProperties;
  return 1;
}

function ruleCosts(
  s: SchemaNode,
  path: string,
  cardinality: number | undefined,
  resourceRoot: boolean,
): RuleCost[] {
  const rules = s['x-kubernetes-validations'] ?? [];
  if (rules.length === 0) return [];
  const self = declFromSchema(s, resourceRoot || s['x-kubernetes-embedded-resource'] === true);
  if (!self) return [];
  // Under an unbounded list or map: as many copies as fit into one request.
  const times = cardinality ?? Math.floor(MAX_REQUEST_SIZE_BYTES / (self.minSize + 1));
  const out: RuleCost[] = [];
  const estimate = (expression: string): number | undefined => {
    try {
      return estimateExpressionCost(expression, self).max;
    } catch {
      return undefined; // does not parse: reported as a compilation error instead
    }
  };
  rules.forEach((r, i) => {
    const base = `${path}.x-kubernetes-validations[${i}]`;
    const maxCost = r.rule?.trim() ? estimate(r.rule) : undefined;
    if (r.rule && maxCost !== undefined) {
      const cost = maxCost === 0 ? 0 : sat(maxCost * times);
      out.push({ path: `${base}.rule`, expression: r.rule, maxCost, cardinality: times, cost });
    }
    const messageCost = r.messageExpression ? estimate(r.messageExpression) : undefined;
    if (r.messageExpression && messageCost !== undefined) {
      out.push({
        path: `${base}.messageExpression`,
        expression: r.messageExpression,
        maxCost: messageCost,
        cardinality: 1,
        cost: messageCost,
      });
    }
  });
  return out;
}

function walk(
  s: SchemaNode,
  path: string,
  cardinality: number | undefined,
  resourceRoot: boolean,
  out: RuleCost[],
): void {
  const factor = childFactor(s);
  const inner =
    cardinality === undefined || factor === undefined
      ? undefined
      : sat(cardinality * Math.max(factor, 0));
  if (typeof s.additionalProperties === 'object') {
    walk(s.additionalProperties, `${path}.additionalProperties`, inner, false, out);
  }
  for (const name of Object.keys(s.properties ?? {}).sort()) {
    const child = s.properties?.[name];
    if (child) walk(child, `${path}.properties[${name}]`, inner, false, out);
  }
  if (s.items) walk(s.items, `${path}.items`, inner, false, out);
  out.push(...ruleCosts(s, path, cardinality, resourceRoot));
}

/** The estimated cost of every rule of one resource schema. */
export function estimateSchemaCost(schema: SchemaNode, path: string): SchemaCost {
  const rules: RuleCost[] = [];
  walk(schema, path, 1, true, rules);
  return { path, rules, total: rules.reduce((sum, r) => sat(sum + r.cost), 0) };
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** What the API server reads of a CRD spec here. */
export interface CrdSchemas {
  versions?: readonly { schema?: { openAPIV3Schema?: object } }[];
}

/**
 * The estimated costs of a CRD, per schema. When every version has the same schema,
 * the API server keeps one (`spec.validation`, the internal form) and reports there.
 */
export function estimateCrdCost(spec: CrdSchemas): SchemaCost[] {
  // The schemas are CRD JSON as sent by the client: read as plain schema nodes.
  const schemas = (spec.versions ?? []).map((v) => v.schema?.openAPIV3Schema as SchemaNode);
  const [first] = schemas;
  if (first && schemas.every((s) => s && canonical(s) === canonical(first))) {
    return [estimateSchemaCost(first, 'spec.validation.openAPIV3Schema')];
  }
  return schemas.flatMap((s, i) =>
    s ? [estimateSchemaCost(s, `spec.versions[${i}].schema.openAPIV3Schema`)] : [],
  );
}

/** The budget message, with the exceed factor formatted as Go's %f / %.1f would. */
export function costErrorMessage(costName: string, cost: number, limit: number): string {
  const exceed = cost / limit;
  const factor =
    exceed > 100
      ? 'more than 100x'
      : exceed < 1.5
        ? `${exceed.toFixed(6)}x`
        : `${exceed.toFixed(1)}x`;
  return (
    `${costName} exceeds budget by factor of ${factor} (try simplifying the rule, or adding ` +
    'maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)'
  );
}

const forbidden = (field: string, detail: string): CostFieldError => ({
  field,
  reason: 'FieldValueForbidden',
  message: `Forbidden: ${detail}`,
});

/** The field errors a real API server answers for a CRD over its CEL cost budget. */
export function crdCostErrors(spec: CrdSchemas): CostFieldError[] {
  const errors: CostFieldError[] = [];
  for (const schema of estimateCrdCost(spec)) {
    for (const r of schema.rules) {
      if (r.cost <= RULE_COST_LIMIT) continue;
      const what = r.path.endsWith('.rule') ? 'rule' : 'messageExpression';
      errors.push(
        forbidden(r.path, costErrorMessage(`estimated ${what} cost`, r.cost, RULE_COST_LIMIT)),
      );
    }
    if (schema.total <= CRD_COST_LIMIT) continue;
    // The (at most 4) most expensive contributors of at least 1% of the limit.
    const expensive = schema.rules
      .filter((r) => r.cost >= CRD_COST_LIMIT / 100)
      .sort((a, b) => b.cost - a.cost)
      .slice(0, 4);
    for (const r of expensive) {
      errors.push(
        forbidden(
          r.path,
          'contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema',
        ),
      );
    }
    errors.push(
      forbidden(
        schema.path,
        costErrorMessage(
          'x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema',
          schema.total,
          CRD_COST_LIMIT,
        ),
      ),
    );
  }
  return errors;
}
