// A fast path for the simplest JSONata expressions, the field mappings most transforms
// are (`{ "orderId": body.orderId, "total": $trigger.body.total }`): compiled from
// JSONata's own syntax tree into a closure that runs without JSONata's evaluator (an
// async walk of the tree with a promise per step: most of a one-node workflow's CPU).
//
// The subset: string, number, true/false/null literals; `$`, a binding (`$trigger`,
// `$nodes`) and paths of plain names after them; object constructors with literal
// keys. Anything else (functions, predicates, operators, arrays...) is left to JSONata
// at compile time. At run time the closure answers only where JSONata's answer is plain
// property access: when it meets an array (JSONata maps, flattens and unwraps
// sequences), a name found only on the prototype chain, or a function, it returns
// UNDECIDED and the caller evaluates with JSONata. test/engine/expression-fast-path.test.ts
// checks it against JSONata on random expressions and inputs.
import type jsonata from 'jsonata';

/** The fast path cannot tell what JSONata would answer: evaluate with JSONata. */
export const UNDECIDED: unique symbol = Symbol('undecided');

/** A compiled expression: its value, or UNDECIDED. */
export type FastEvaluator = (input: unknown, bindings: Record<string, unknown>) => unknown;

type Node = jsonata.ExprNode;

/** Keys a node of the subset may carry besides its type and value (JSONata's positions). */
const plain = (node: object, allowed: readonly string[]): boolean =>
  Object.keys(node).every((k) => k === 'type' || k === 'position' || allowed.includes(k));

/** The value of a name on a value, as JSONata looks it up, or UNDECIDED. */
function lookup(value: unknown, name: string): unknown {
  if (value === null || typeof value !== 'object') return undefined;
  if (Array.isArray(value)) return UNDECIDED;
  if (Object.hasOwn(value, name)) return (value as Record<string, unknown>)[name];
  return name in value ? UNDECIDED : undefined;
}

/** A value JSONata hands on as it is (not an array, not a function). */
function settled(value: unknown): unknown {
  return Array.isArray(value) || typeof value === 'function' ? UNDECIDED : value;
}

/** The start of a path: `$` (the input), a binding, or a name looked up on the input. */
function startOf(step: Node): FastEvaluator | undefined {
  if (step.type === 'variable' && plain(step, ['value'])) {
    const name = step.value as string;
    if (name === '') return (input) => input;
    return (_input, bindings) => (Object.hasOwn(bindings, name) ? bindings[name] : UNDECIDED);
  }
  if (step.type === 'name' && plain(step, ['value'])) {
    const name = step.value as string;
    return (input) => lookup(input, name);
  }
  return undefined;
}

function path(steps: Node[]): FastEvaluator | undefined {
  const first = steps[0];
  const start = first && startOf(first);
  if (!start) return undefined;
  const names: string[] = [];
  for (const step of steps.slice(1)) {
    if (step.type !== 'name' || !plain(step, ['value'])) return undefined;
    names.push(step.value as string);
  }
  return (input, bindings) => {
    let value = start(input, bindings);
    for (const name of names) {
      if (value === UNDECIDED || value === undefined) return value;
      value = lookup(value, name);
    }
    return value === UNDECIDED ? value : settled(value);
  };
}

function objectConstructor(pairs: [Node, Node][]): FastEvaluator | undefined {
  const keys: string[] = [];
  const values: FastEvaluator[] = [];
  for (const [key, value] of pairs) {
    if (key.type !== 'string' || !plain(key, ['value'])) return undefined;
    const name = key.value as string;
    // Duplicate keys are JSONata's error D1009; __proto__ would set the prototype here.
    if (keys.includes(name) || name === '__proto__') return undefined;
    const compiled = compileNode(value);
    if (!compiled) return undefined;
    keys.push(name);
    values.push(compiled);
  }
  return (input, bindings) => {
    // Over an array JSONata groups the items by key.
    if (Array.isArray(input)) return UNDECIDED;
    const result: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) {
      const value = (values[i] as FastEvaluator)(input, bindings);
      if (value === UNDECIDED) return UNDECIDED;
      if (value !== undefined) result[keys[i] as string] = value;
    }
    return result;
  };
}

function compileNode(node: Node): FastEvaluator | undefined {
  // `path` is a type JSONata's own typings leave out.
  switch (node.type as string) {
    case 'string':
      return plain(node, ['value']) ? constant(node.value) : undefined;
    case 'number':
      return plain(node, ['value']) && Number.isFinite(node.value)
        ? constant(node.value)
        : undefined;
    case 'value':
      return plain(node, ['value']) ? constant(node.value) : undefined;
    case 'variable': {
      const start = plain(node, ['value']) ? startOf(node) : undefined;
      return start && ((input, bindings) => settled(start(input, bindings)));
    }
    case 'path':
      return plain(node, ['steps']) && node.steps ? path(node.steps) : undefined;
    case 'unary':
      return node.value === '{' && plain(node, ['value', 'lhs']) && Array.isArray(node.lhs)
        ? objectConstructor(node.lhs as unknown as [Node, Node][])
        : undefined;
    default:
      return undefined;
  }
}

function constant(value: unknown): FastEvaluator {
  return () => value;
}

/** The fast evaluator of a compiled JSONata expression, or undefined outside the subset. */
export function fastPathOf(expression: jsonata.Expression): FastEvaluator | undefined {
  return compileNode(expression.ast());
}
