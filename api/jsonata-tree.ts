// A compiled JSONata expression's syntax tree (`expression.ast()`), walked: every object
// in it once (its nodes, their arrays, regular expression literals), whatever the node
// types, so that a check over the tree does not miss a node type added by a later
// JSONata. Shared trees (JSONata reuses nodes) and cycles are visited once.

/** Each object of `ast`, once, in no particular order. */
export function* treeObjects(ast: unknown): Generator<object> {
  const seen = new Set<object>();
  const pending: unknown[] = [ast];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object' || seen.has(node)) continue;
    seen.add(node);
    yield node;
    if (node instanceof RegExp) continue;
    for (const value of Object.values(node)) pending.push(value);
  }
}
