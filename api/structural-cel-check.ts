// Compile checks of validation rules, as the API server makes them when a CRD is
// created or updated: the rule must parse, call functions the environment defines,
// name only `self`, `oldSelf` and macro variables, and select fields the schema
// declares (`self.nmae` fails with "undefined field 'nmae'"; a field `x-mode` is
// `self.x__dash__mode`). Types are followed along schema paths only: this is not a
// full type checker. `oldSelf` below a list that is not a `map` list is refused (there
// is no old value to correlate with), and so is `optionalOldSelf` without `oldSelf`.
import { parse } from '@bufbuild/cel';
import { knownFunction } from './structural-cel-env.ts';
import { celFieldName } from './structural-cel-values.ts';
import { isObject, type FieldError, type OpenApiSchema } from './structural-types.ts';

type Expr = ReturnType<typeof parse>['expr'];
type Comprehension = Extract<Expr['exprKind'], { case: 'comprehensionExpr' }>['value'];

/** What an expression is known to be: a schema node, a whole object, its metadata. */
interface Known {
  schema?: OpenApiSchema;
  whole?: boolean;
  metadata?: boolean;
}

const TYPE_NAMES = new Set(
  'int uint double bool string bytes list map null_type type dyn optional'.split(' '),
);

class RuleError extends Error {}

export interface RuleCheck {
  error?: string;
  usesOldSelf: boolean;
}

/** Check one expression against the schema node `self` stands for. */
export function checkRule(text: string, schema?: OpenApiSchema, whole = false): RuleCheck {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(text);
  } catch (err) {
    return {
      error: `ERROR: ${err instanceof Error ? err.message : String(err)}`,
      usesOldSelf: false,
    };
  }
  const positions = parsed.sourceInfo?.positions ?? {};
  const state = { usesOldSelf: false };
  const fail = (e: Expr, message: string): never => {
    const offset = positions[String(e.id)] ?? 0;
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - before.lastIndexOf('\n');
    throw new RuleError(`ERROR: <input>:${line}:${column}: ${message}`);
  };
  const self: Known = { schema, whole };
  const visit = (e: Expr | undefined, scope: Map<string, Known | undefined>): Known | undefined => {
    if (!e) return undefined;
    const kind = e.exprKind;
    switch (kind.case) {
      case 'identExpr': {
        const name = kind.value.name;
        if (name === 'oldSelf') state.usesOldSelf = true;
        if (scope.has(name)) return scope.get(name);
        if (TYPE_NAMES.has(name)) return undefined;
        return fail(e, `undeclared reference to '${name}' (in container '')`);
      }
      case 'selectExpr':
        return field(visit(kind.value.operand, scope), kind.value.field, (m) => fail(e, m));
      case 'callExpr': {
        const target = visit(kind.value.target, scope);
        const args = kind.value.args.map((a) => visit(a, scope));
        const fn = kind.value.function;
        if (!knownFunction(fn)) return fail(e, `undeclared reference to '${fn}' (in container '')`);
        if (fn === '_[_]') return element(args[0]);
        return fn === 'value' || fn === 'orValue' ? target : undefined;
      }
      case 'listExpr':
        kind.value.elements.forEach((el) => visit(el, scope));
        return undefined;
      case 'structExpr':
        for (const entry of kind.value.entries) {
          if (entry.keyKind.case === 'mapKey') visit(entry.keyKind.value, scope);
          visit(entry.value, scope);
        }
        return undefined;
      case 'comprehensionExpr':
        loop(kind.value, scope);
        return undefined;
      default:
        return undefined;
    }
  };
  const loop = (c: Comprehension, scope: Map<string, Known | undefined>): void => {
    const range = visit(c.iterRange, scope)?.schema;
    const item: Known | undefined = range?.type === 'array' ? { schema: range.items } : undefined;
    const value = isObject(range?.additionalProperties)
      ? { schema: range.additionalProperties }
      : undefined;
    const inner = new Map(scope);
    if (c.iterVar2) {
      inner.set(c.iterVar, undefined);
      inner.set(c.iterVar2, item ?? value);
    } else inner.set(c.iterVar, item);
    visit(c.accuInit, scope);
    inner.set(c.accuVar, undefined);
    visit(c.loopCondition, inner);
    visit(c.loopStep, inner);
    const after = new Map(scope);
    after.set(c.accuVar, undefined);
    visit(c.result, after);
  };
  try {
    visit(
      parsed.expr,
      new Map([
        ['self', self],
        ['oldSelf', self],
      ]),
    );
    return { usesOldSelf: state.usesOldSelf };
  } catch (err) {
    if (err instanceof RuleError) return { error: err.message, usesOldSelf: state.usesOldSelf };
    throw err;
  }
}

function element(k: Known | undefined): Known | undefined {
  const s = k?.schema;
  if (s?.type === 'array' && s.items) return { schema: s.items };
  if (isObject(s?.additionalProperties)) return { schema: s.additionalProperties };
  return undefined;
}

function field(k: Known | undefined, name: string, fail: (m: string) => never): Known | undefined {
  if (k?.metadata) {
    return name === 'name' || name === 'generateName'
      ? undefined
      : fail(`undefined field '${name}'`);
  }
  const s = k?.schema;
  if (!s || (s.type !== 'object' && !s.properties)) return undefined;
  const whole = k.whole === true || s['x-kubernetes-embedded-resource'] === true;
  if (whole && name === 'metadata') return { metadata: true };
  const declared = Object.entries(s.properties ?? {}).find(([prop]) => celFieldName(prop) === name);
  if (declared) return { schema: declared[1] };
  if (whole && (name === 'apiVersion' || name === 'kind')) return undefined;
  if (isOpen(s))
    return isObject(s.additionalProperties) ? { schema: s.additionalProperties } : undefined;
  return fail(`undefined field '${name}'`);
}

/** An object whose keys are not all declared: any field may be selected. */
const isOpen = (s: OpenApiSchema): boolean =>
  s.additionalProperties === true ||
  isObject(s.additionalProperties) ||
  s['x-kubernetes-preserve-unknown-fields'] === true;

/**
 * Problems with every rule of a schema, as a CRD create or update reports them
 * (`path`: the schema's field path, e.g. `spec.validation.openAPIV3Schema`).
 */
export function schemaRuleErrors(schema: OpenApiSchema, path: string): FieldError[] {
  const out: FieldError[] = [];
  walk(schema, path, true, undefined, out);
  return out;
}

function walk(
  s: OpenApiSchema,
  path: string,
  whole: boolean,
  inList: string | undefined,
  out: FieldError[],
): void {
  (s['x-kubernetes-validations'] ?? []).forEach((rule, i) => {
    const at = `${path}.x-kubernetes-validations[${i}]`;
    const checked = checkRule(rule.rule, s, whole);
    const invalid = (f: string, value: unknown, detail: string): void => {
      out.push({
        field: f,
        message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
        reason: 'FieldValueInvalid',
      });
    };
    if (checked.error) invalid(`${at}.rule`, rule.rule, `compilation failed: ${checked.error}`);
    if (rule.messageExpression !== undefined) {
      const message = checkRule(rule.messageExpression, s, whole);
      if (message.error) {
        invalid(
          `${at}.messageExpression`,
          rule.messageExpression,
          `messageExpression compilation failed: ${message.error}`,
        );
      }
    }
    if (checked.usesOldSelf && inList !== undefined) {
      invalid(
        `${at}.rule`,
        rule.rule,
        `oldSelf cannot be used on the uncorrelatable portion of the schema within ${inList}`,
      );
    } else if (!checked.usesOldSelf && rule.optionalOldSelf !== undefined) {
      invalid(
        `${at}.optionalOldSelf`,
        rule.optionalOldSelf,
        'may not be set if oldSelf is not used in rule',
      );
    }
  });
  for (const [k, sub] of Object.entries(s.properties ?? {})) {
    walk(sub, `${path}.properties[${k}]`, false, inList, out);
  }
  if (s.items) {
    const uncorrelated = s['x-kubernetes-list-type'] === 'map' ? inList : (inList ?? path);
    walk(s.items, `${path}.items`, false, uncorrelated, out);
  }
  if (isObject(s.additionalProperties)) {
    walk(s.additionalProperties, `${path}.additionalProperties`, false, inList, out);
  }
  for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
    (s[key] ?? []).forEach((sub, i) => walk(sub, `${path}.${key}[${i}]`, whole, inList, out));
  }
}
