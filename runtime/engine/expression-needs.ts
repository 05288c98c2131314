// What a JSONata expression reads of its bindings, from its syntax tree: the worker pool
// (expression-pool.ts, ADR 0048) sends a worker only the bindings an expression names,
// not `$nodes` (every node output so far) to an expression that reads `$trigger` alone.
//
// A binding is read through a variable node (`$trigger`, `$nodes.a`, `$f(...)`: a
// function call's procedure is a variable node too). The one way to read a binding
// without naming it is `$eval`: the text it evaluates is data, and it runs in the
// caller's environment, so an expression that names `eval` gets every binding.
import type jsonata from 'jsonata';

export interface ExpressionNeeds {
  /** The bindings the expression names, or `all` (it names `$eval`). */
  bindings: ReadonlySet<string> | 'all';
}

/** Every binding: what an expression gets whose needs are not known. */
export const EVERYTHING: ExpressionNeeds = { bindings: 'all' };

/** The names of the variables an expression refers to or defines, `$` and `$$` left out. */
function variablesOf(ast: jsonata.ExprNode): Set<string> {
  const names = new Set<string>();
  const seen = new Set<object>();
  const pending: unknown[] = [ast];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object' || seen.has(node)) continue;
    seen.add(node);
    if (node instanceof RegExp) continue;
    const { type, value } = node as { type?: unknown; value?: unknown };
    // `$` is the variable '' and `$$` the variable '$' (the input, not a binding).
    if (type === 'variable' && typeof value === 'string' && value !== '' && value !== '$') {
      names.add(value);
    }
    for (const child of Object.values(node)) pending.push(child);
  }
  return names;
}

/** What `ast` reads of its bindings (a variable it defines itself counts as named). */
export function needsOf(ast: jsonata.ExprNode): ExpressionNeeds {
  const names = variablesOf(ast);
  return { bindings: names.has('eval') ? 'all' : names };
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
