// Reading the documents of a YAML manifest file without letting the file take the
// reader down: the CLI (`hookgate validate`) and the embedded server's watched
// directory both go through here. What a broken or hostile file does to the parser is
// an error of its document, never a throw:
//
// - an alias bomb (`&a [x]`, then lists of `*a` aliases of aliases…) expands
//   exponentially; yaml stops it after MAX_YAML_ALIASES alias resolutions with a throw
//   from `toJS`, caught here;
// - nesting thousands deep runs out of the parser's stack; yaml reports it as a
//   document error whose message ("Maximum call stack size exceeded") is put plainly.
import { isMap, isPair, isScalar, isSeq, type Document, type Node as YamlNode } from 'yaml';

/** Alias resolutions allowed in one document (yaml's default); manifests need few. */
export const MAX_YAML_ALIASES = 100;

/** A parsed document's value, or a message saying why it cannot be read. */
export function documentValue(doc: Document.Parsed): { value: unknown } | { error: string } {
  try {
    return { value: doc.toJS({ maxAliasCount: MAX_YAML_ALIASES }) };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (/alias/i.test(message))
      return {
        error: `aliases expand too far (over ${MAX_YAML_ALIASES} alias resolutions in one document)`,
      };
    return { error: `document cannot be read: ${yamlMessage(message)}` };
  }
}

/** The first line of a yaml error message, in plain words where it is a stack overflow. */
export function yamlMessage(message: string): string {
  const first = message.split('\n')[0] ?? message;
  return first.replace(/Maximum call stack size exceeded/, 'nesting too deep to read');
}

/** `spec.methods[1]` → ['spec', 'methods', 1]; `[name=x]` keys as strings. */
function pathTokens(fieldPath: string): (string | number)[] {
  const tokens: (string | number)[] = [];
  for (const m of fieldPath.matchAll(/([^.[\]]+)|\[(\d+)\]|\[([^\]]*)\]/g)) {
    if (m[1] !== undefined) tokens.push(m[1]);
    else if (m[2] !== undefined) tokens.push(Number(m[2]));
    else if (m[3] !== undefined) tokens.push(m[3]);
  }
  return tokens;
}

/**
 * The source offset of a field path in a document: of the deepest node of the path
 * that exists (a map key's, if any), else of the document's content. With a yaml
 * `LineCounter` it becomes the line and column a problem is reported at.
 */
export function fieldOffset(doc: Document, fieldPath: string): number {
  let node: unknown = doc.contents;
  let offset: number = doc.contents?.range?.[0] ?? 0;
  for (const token of pathTokens(fieldPath)) {
    if (isMap(node)) {
      const pair = node.items.find(
        (p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(token),
      );
      if (!pair) break;
      offset = (pair.key as YamlNode).range?.[0] ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof token === 'number') {
      const item = node.items[token] as YamlNode | undefined;
      if (!item) break;
      offset = item.range?.[0] ?? offset;
      node = item;
    } else break;
  }
  return offset;
}
