// Compile-time checks of validation rules, run when a CRD is created or updated: a rule
// must parse, call only functions the environment has, name only `self`, `oldSelf`,
// macro variables and type names, and select only fields its schema declares
// (`self.nmae` on an object with properties `name` fails as on a real API server:
// "undefined field 'nmae'"). Object fields are spelt as escaped by escapeField. This
// is no full type checker: types are tracked only along schema paths.
import { parse } from '@bufbuild/cel';
import { escapeField } from './cel-values.ts';
import { isKnownFunction } from './cel-env.ts';
import { isObject, type OpenApiSchema } from './types.ts';

type Parsed = ReturnType<typeof parse>;
type Expr = Parsed['expr'];

/** What a sub-expression is known to be: a schema node (or the root's metadata view). */
interface Ty {
  schema?: OpenApiSchema;
  typeMeta?: boolean;
  meta?: boolean;
}
type Scope = Map<string, Ty | undefined>;

const GLOBAL_IDENTS = new Set([
  'int',
  'uint',
  'double',
  'bool',
  'string',
  'bytes',
  'list',
  'map',
  'null_type',
  'type',
  'dyn',
  'optional',
]);

export interface Compiled {
  /** cel-go style issues (`ERROR: <input>:1:6: undefined field 'x'` and a caret line). */
  error?: string;
  usesOldSelf: boolean;
}

class CompileError extends Error {}

interface Ctx {
  text: string;
  positions: Record<string, number>;
  usesOldSelf: boolean;
}

function fail(ctx: Ctx, e: Expr, message: string): never {
  const offset = ctx.positions[String(e.id)] ?? 0;
  const before = ctx.text.slice(0, offset);
  const line = before.split('\n').length;
  const col = offset - before.lastIndexOf('\n');
  const source = ctx.text.split('\n')[line - 1] ?? '';
  throw new CompileError(
    `ERROR: <input>:${line}:${col}: ${message}\n | ${source}\n | ${'.'.repeat(col - 1)}^`,
  );
}

/** Check one expression against the schema `self` stands for. */
export function compileExpression(text: string, self: Ty): Compiled {
  let parsed: Parsed;
  try {
    parsed = parse(text);
  } catch (err) {
    return {
      error: `ERROR: ${err instanceof Error ? err.message : String(err)}`,
      usesOldSelf: false,
    };
  }
  const ctx: Ctx = { text, positions: parsed.sourceInfo?.positions ?? {}, usesOldSelf: false };
  const scope: Scope = new Map([
    ['self', self],
    ['oldSelf', self],
  ]);
  try {
    check(parsed.expr, scope, ctx);
    return { usesOldSelf: ctx.usesOldSelf };
  } catch (err) {
    if (err instanceof CompileError) return { error: err.message, usesOldSelf: ctx.usesOldSelf };
    throw err;
  }
}

function check(e: Expr | undefined, scope: Scope, ctx: Ctx): Ty | undefined {
  if (!e) return undefined;
  const kind = e.exprKind;
  switch (kind.case) {
    case 'identExpr':
      return ident(kind.value.name, e, scope, ctx);
    case 'selectExpr':
      return select(check(kind.value.operand, scope, ctx), kind.value.field, e, ctx);
    case 'callExpr': {
      const fn = kind.value.function;
      const target = check(kind.value.target, scope, ctx);
      const args = kind.value.args.map((a) => check(a, scope, ctx));
      if (!isKnownFunction(fn))
        return fail(ctx, e, `undeclared reference to '${fn}' (in container '')`);
      if (fn === '_[_]') return element(args[0]);
      return fn === 'value' || fn === 'orValue' ? target : undefined;
    }
    case 'listExpr':
      for (const el of kind.value.elements) check(el, scope, ctx);
      return undefined;
    case 'structExpr':
      for (const entry of kind.value.entries) {
        if (entry.keyKind.case === 'mapKey') check(entry.keyKind.value, scope, ctx);
        check(entry.value, scope, ctx);
      }
      return undefined;
    case 'comprehensionExpr':
      comprehension(kind.value, scope, ctx);
      return undefined;
    default:
      return undefined;
  }
}

function ident(name: string, e: Expr, scope: Scope, ctx: Ctx): Ty | undefined {
  if (name === 'oldSelf') ctx.usesOldSelf = true;
  if (scope.has(name)) return scope.get(name);
  if (GLOBAL_IDENTS.has(name)) return undefined;
  return fail(ctx, e, `undeclared reference to '${name}' (in container '')`);
}

type Comprehension = Extract<Expr['exprKind'], { case: 'comprehensionExpr' }>['value'];

/** Macros (all, exists, map, ...): the loop variable is a list's item or a map's key. */
function comprehension(c: Comprehension, scope: Scope, ctx: Ctx): void {
  const range = check(c.iterRange, scope, ctx)?.schema;
  const items = range?.type === 'array' ? { schema: range.items } : undefined;
  const values = isObject(range?.additionalProperties)
    ? { schema: range.additionalProperties }
    : undefined;
  const inner: Scope = new Map(scope);
  if (c.iterVar2) {
    inner.set(c.iterVar, undefined);
    inner.set(c.iterVar2, items ?? values);
  } else {
    inner.set(c.iterVar, items);
  }
  check(c.accuInit, scope, ctx);
  inner.set(c.accuVar, undefined);
  check(c.loopCondition, inner, ctx);
  check(c.loopStep, inner, ctx);
  const result = new Map(scope);
  result.set(c.accuVar, undefined);
  check(c.result, result, ctx);
}

/** The type of `x[i]`: a list's items, a map's values. */
function element(t: Ty | undefined): Ty | undefined {
  const s = t?.schema;
  if (s?.type === 'array' && s.items) return { schema: s.items };
  if (isObject(s?.additionalProperties)) return { schema: s.additionalProperties };
  return undefined;
}

/** apiVersion, kind and metadata of a whole object (root or embedded resource). */
function typeMetaField(s: OpenApiSchema, field: string): Ty | undefined | false {
  if (field === 'metadata') return { meta: true };
  if ((field === 'apiVersion' || field === 'kind') && !Object.hasOwn(s.properties ?? {}, field)) {
    return undefined;
  }
  return false;
}

function select(t: Ty | undefined, field: string, e: Expr, ctx: Ctx): Ty | undefined {
  if (t?.meta) {
    if (field === 'name' || field === 'generateName') return undefined;
    return fail(ctx, e, `undefined field '${field}'`);
  }
  const s = t?.schema;
  if (!s || (s.type !== 'object' && !s.properties)) return undefined;
  if (t.typeMeta === true || s['x-kubernetes-embedded-resource'] === true) {
    const meta = typeMetaField(s, field);
    if (meta !== false) return meta;
  }
  for (const [name, prop] of Object.entries(s.properties ?? {})) {
    if (escapeField(name) === field) return { schema: prop };
  }
  if (isObject(s.additionalProperties)) return { schema: s.additionalProperties };
  if (s.additionalProperties === true || s['x-kubernetes-preserve-unknown-fields']) {
    return undefined;
  }
  return fail(ctx, e, `undefined field '${field}'`);
}
