// The checks a CRD's validation rules get when the CRD is created or updated: each rule
// and messageExpression must compile against its schema node; `oldSelf` may not be used
// where the old value cannot be correlated (below a list that is not a `map` list); and
// `optionalOldSelf` only makes sense in a rule that uses `oldSelf`.
import { compileExpression } from './cel-compile.ts';
import { fe, goEscape, Rendered } from './errors.ts';
import { crdSchemas } from './structural.ts';
import { isObject, type FieldError, type OpenApiSchema, type ValidationRule } from './types.ts';

/** The rule as the API server prints its internal ValidationRule struct. */
function shown(r: ValidationRule): Rendered {
  const fields: [string, unknown][] = [
    ['Rule', r.rule],
    ['Message', r.message ?? ''],
    ['MessageExpression', r.messageExpression ?? ''],
    ['Reason', r.reason ?? null],
    ['FieldPath', r.fieldPath ?? ''],
    ['OptionalOldSelf', r.optionalOldSelf ?? null],
  ];
  return new Rendered(goEscape(JSON.stringify(Object.fromEntries(fields))));
}

/** Problems with the rules of one version's schema (`path`: that schema's field path). */
export function ruleErrors(schema: OpenApiSchema | undefined, path: string): FieldError[] {
  const out: FieldError[] = [];
  walk(schema, path, true, undefined, out);
  return out;
}

function walk(
  s: OpenApiSchema | undefined,
  path: string,
  root: boolean,
  uncorrelatable: string | undefined,
  out: FieldError[],
): void {
  if (!s) return;
  (s['x-kubernetes-validations'] ?? []).forEach((rule, i) => {
    const at = `${path}.x-kubernetes-validations[${i}]`;
    if (rule.rule.trim() === '') {
      out.push(fe.required(`${at}.rule`, 'rule is not specified'));
      return;
    }
    const self = { schema: s, typeMeta: root };
    const compiled = compileExpression(rule.rule, self);
    if (compiled.error) {
      out.push(fe.invalid(`${at}.rule`, shown(rule), `compilation failed: ${compiled.error}`));
    }
    if (rule.messageExpression !== undefined) {
      const message = compileExpression(rule.messageExpression, self);
      if (message.error) {
        out.push(
          fe.invalid(
            `${at}.messageExpression`,
            shown(rule),
            `messageExpression compilation failed: ${message.error}`,
          ),
        );
      }
    }
    if (compiled.usesOldSelf && uncorrelatable !== undefined) {
      out.push(
        fe.invalid(
          `${at}.rule`,
          rule.rule,
          `oldSelf cannot be used on the uncorrelatable portion of the schema within ${uncorrelatable}`,
        ),
      );
    } else if (!compiled.usesOldSelf && rule.optionalOldSelf !== undefined) {
      out.push(
        fe.invalid(
          `${at}.optionalOldSelf`,
          rule.optionalOldSelf,
          'may not be set if oldSelf is not used in rule',
        ),
      );
    }
  });
  for (const [k, sub] of Object.entries(s.properties ?? {})) {
    walk(sub, `${path}.properties[${k}]`, false, uncorrelatable, out);
  }
  if (s.items) {
    const listPath =
      s['x-kubernetes-list-type'] === 'map' ? uncorrelatable : (uncorrelatable ?? path);
    walk(s.items, `${path}.items`, false, listPath, out);
  }
  if (isObject(s.additionalProperties)) {
    walk(s.additionalProperties, `${path}.additionalProperties`, false, uncorrelatable, out);
  }
  for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
    (s[key] ?? []).forEach((sub, i) =>
      walk(sub, `${path}.${key}[${i}]`, root, uncorrelatable, out),
    );
  }
}

/**
 * The rule problems of a whole CRD. When every version has the same schema the API
 * server keeps one (its internal `spec.validation`) and reports there; otherwise per
 * version, at `spec.versions[i].schema.openAPIV3Schema`.
 */
export function crdRuleErrors(
  versions: readonly { schema?: { openAPIV3Schema?: OpenApiSchema } }[],
): FieldError[] {
  return crdSchemas(versions).flatMap(([s, path]) => ruleErrors(s, path));
}
