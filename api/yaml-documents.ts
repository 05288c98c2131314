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
import type { Document } from 'yaml';

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
