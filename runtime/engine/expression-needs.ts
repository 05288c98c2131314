// What a JSONata expression reads of its bindings and of its input, from its syntax
// tree: the worker pool (expression-pool.ts, ADR 0048) sends a worker only that, not
// `$nodes` (every node output so far) to an expression that reads `$trigger` alone, nor
// a 64 KB trigger record to `body.total >= 1000`.
//
// Bindings. A binding is read through a variable node (`$trigger`, `$nodes.a`,
// `$f(...)`: a function call's procedure is a variable node too). The one way to read a
// binding without naming it is `$eval`: the text it evaluates is data, and it runs in
// the caller's environment, so an expression that names `eval` gets every binding (and
// all of its input).
//
// Input. The input (`$`) is read where an expression is evaluated in its context: at the
// top, and in what keeps that context (operators, function arguments, blocks, object and
// array constructors, lambda bodies: a lambda evaluates in the context it was defined
// in). There, a path whose first steps are plain names (`body.items`) reads the subtree
// at those names and nothing else of the input: the steps after them, predicates, sorts
// and group-bys are evaluated in that subtree (they are relative). JSONata looks a name up
// as an own property, mapping over arrays, so the input cut down to those subtrees
// (`projection`, arrays kept, objects holding only the names read) answers every such
// path as the whole input does. Anything else that reaches the input reads all of it:
// `$` or a wildcard or descendant in the input's context, `$$` or a parent (`%`)
// anywhere, a focus or index binding (`@$x`, `#$i`: tuple streams keep contexts across
// steps), `$eval`, or a node type this file does not know.
import type jsonata from 'jsonata';
import { treeObjects } from '../../api/jsonata-tree.ts';

/** The parts of an input an expression reads: each name, with all under it or some. */
export type InputFields = ReadonlyMap<string, InputFields | 'all'>;

export interface ExpressionNeeds {
  /** The bindings the expression names, or `all` (it names `$eval`). */
  bindings: ReadonlySet<string> | 'all';
  /** The parts of its input it reads, or `all`. */
  input: InputFields | 'all';
}

/** Every binding and all of the input: what an expression gets whose needs are not known. */
export const EVERYTHING: ExpressionNeeds = { bindings: 'all', input: 'all' };

/** The names of the variables an expression refers to or defines, `$` and `$$` left out. */
function variablesOf(ast: jsonata.ExprNode): Set<string> {
  const names = new Set<string>();
  for (const node of treeObjects(ast)) {
    if (node instanceof RegExp) continue;
    const { type, value } = node as { type?: unknown; value?: unknown };
    // `$` is the variable '' and `$$` the variable '$' (the input, not a binding).
    if (type === 'variable' && typeof value === 'string' && value !== '' && value !== '$') {
      names.add(value);
    }
  }
  return names;
}

/** Keys of a node whose expressions are evaluated relative to the node's value. */
const RELATIVE = new Set(['predicate', 'stages', 'group']);
/** Keys of tuple streams (focus, index, parent): contexts kept across steps. */
const TUPLES = ['focus', 'index', 'tuple', 'ancestor', 'seekingParent'];
/** The node types JSONata evaluates (jsonata.js `evaluate`, `evaluateStep`). */
const KNOWN = new Set([
  'path',
  'binary',
  'unary',
  'name',
  'string',
  'number',
  'value',
  'wildcard',
  'descendant',
  'parent',
  'condition',
  'block',
  'bind',
  'regex',
  'function',
  'variable',
  'lambda',
  'partial',
  'apply',
  'transform',
  'sort',
  'filter',
  'operator',
]);

/** The parts of the input read, gathered from the paths that read them. */
class InputReads {
  all = false;
  readonly fields = new Map<string, InputFields | 'all'>();

  /** The subtree at `names` is read (all of the input when there are none). */
  read(names: readonly string[]): void {
    if (names.length === 0) {
      this.all = true;
      return;
    }
    let level = this.fields;
    for (const [i, name] of names.entries()) {
      const below = level.get(name);
      if (below === 'all') return;
      if (i === names.length - 1) {
        level.set(name, 'all');
        return;
      }
      let next = below as Map<string, InputFields | 'all'> | undefined;
      if (!next) {
        next = new Map();
        level.set(name, next);
      }
      level = next;
    }
  }
}

type AstNode = Record<string, unknown> & { type?: unknown; value?: unknown };

/** A step that is a name and nothing else (no predicate, sort, `[]`, focus...). */
function plainName(step: AstNode): boolean {
  return (
    step.type === 'name' &&
    Object.keys(step).every((k) => k === 'type' || k === 'value' || k === 'position')
  );
}

/** A node that reaches all of the input from where it is (or one this file does not know). */
function readsAll(n: AstNode, atRoot: boolean): boolean {
  // A group-by (`{ lhs }`) or a sort term (`{ descending, expression }`) has no type: its
  // expressions are evaluated where it is.
  if (n.type !== undefined && !KNOWN.has(n.type as string)) return true;
  if (n.type === 'parent' || TUPLES.some((k) => k in n)) return true;
  // `$$` is the input wherever it is; `$` is the context it is evaluated in.
  if (n.type === 'variable') return n.value === '$' || (n.value === '' && atRoot);
  return atRoot && (n.type === 'wildcard' || n.type === 'descendant');
}

/**
 * Gathers what `node` reads of the input; `atRoot`: it is evaluated in the input's
 * context (not relative to a value of its own).
 */
function visit(node: unknown, atRoot: boolean, reads: InputReads): void {
  if (reads.all || node === null || typeof node !== 'object' || node instanceof RegExp) return;
  if (Array.isArray(node)) {
    for (const item of node as unknown[]) visit(item, atRoot, reads);
    return;
  }
  const n = node as AstNode;
  if (readsAll(n, atRoot)) {
    reads.all = true;
    return;
  }
  if (n.type === 'path') {
    visitPath(n, atRoot, reads);
    return;
  }
  if (n.type === 'name' && atRoot) reads.read([n.value as string]);
  // A transform's pattern and update are evaluated in the value it is applied to.
  const here = atRoot && n.type !== 'transform';
  for (const [key, child] of Object.entries(n)) visit(child, here && !RELATIVE.has(key), reads);
}

function visitPath(path: AstNode, atRoot: boolean, reads: InputReads): void {
  const steps = path.steps as AstNode[];
  visit(path.group, false, reads);
  let i = 0;
  if (atRoot && steps[0]?.type === 'name') {
    // The plain names from the start (and a name with a predicate or `[]` ends them).
    const names: string[] = [];
    for (; i < steps.length; i++) {
      const step = steps[i] as AstNode;
      if (step.type !== 'name') break;
      names.push(step.value as string);
      if (!plainName(step)) break;
    }
    reads.read(names);
  }
  for (const [j, step] of steps.entries()) {
    // The first step is evaluated in the path's context, the others relative to it.
    if (j === 0 && i === 0) visit(step, atRoot, reads);
    else visit(step, false, reads);
  }
}

/** What `ast` reads of its input. */
function inputOf(ast: jsonata.ExprNode): InputFields | 'all' {
  const reads = new InputReads();
  visit(ast, true, reads);
  return reads.all ? 'all' : reads.fields;
}

/** What `ast` reads of its bindings (a variable it defines itself counts as named) and input. */
export function needsOf(ast: jsonata.ExprNode): ExpressionNeeds {
  const names = variablesOf(ast);
  if (names.has('eval')) return EVERYTHING;
  return { bindings: names, input: inputOf(ast) };
}

/**
 * `value` cut down to `fields`: arrays kept, item by item; objects holding only the
 * names read (own properties, as JSONata looks them up); anything else as it is.
 */
export function projection(value: unknown, fields: InputFields): unknown {
  if (Array.isArray(value)) return (value as unknown[]).map((item) => projection(item, fields));
  if (value === null || typeof value !== 'object') return value;
  const cut: Record<string, unknown> = {};
  for (const [name, below] of fields) {
    if (!Object.hasOwn(value, name)) continue;
    const v = (value as Record<string, unknown>)[name];
    cut[name] = below === 'all' ? v : projection(v, below);
  }
  return cut;
}

/** The bindings `needs` names, as a new object (the caller's is not changed). */
export function namedBindings(
  bindings: Record<string, unknown>,
  needs: ExpressionNeeds,
): Record<string, unknown> {
  if (needs.bindings === 'all') return { ...bindings };
  const named: Record<string, unknown> = {};
  for (const name of needs.bindings) {
    if (Object.hasOwn(bindings, name)) named[name] = bindings[name];
  }
  return named;
}
