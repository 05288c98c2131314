// Manifest files as the CLI reads them: files or folders (recursively, *.yaml, *.yml,
// *.json), or `-` for standard input; every YAML document with its position, so that a
// problem at a field path can be reported at its line.
import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import { documentValue, fieldOffset, yamlMessage } from '../api/yaml-documents.ts';
import { usageError } from './errors.ts';

export interface ManifestDocument {
  file: string;
  /** 0-based index of the document in its file. */
  index: number;
  /** 1-based line where the document's content starts. */
  line: number;
  /** The document as data; undefined when it could not be parsed. */
  value: unknown;
  /** A YAML syntax error, with its line. */
  syntaxError?: { message: string; line: number; column: number };
  /** The line (1-based) and column of a field path, or of the nearest parent that exists. */
  lineOf(fieldPath: string): { line: number; column: number };
}

const MANIFEST = /\.(ya?ml|json)$/i;

/** The manifest files under the given paths, in a stable order. */
export function manifestFiles(paths: string[]): string[] {
  const files: string[] = [];
  for (const path of paths) {
    if (path === '-') {
      files.push('-');
      continue;
    }
    let stat;
    try {
      stat = statSync(path);
    } catch {
      throw usageError(`${path}: no such file or directory`);
    }
    if (stat.isDirectory()) files.push(...walk(path));
    else files.push(path);
  }
  return files;
}

/**
 * The manifests under `dir`. Symbolic links are followed (a linked file or folder is
 * checked like any other: left out, it passed unchecked with exit 0); a folder or file
 * reached twice (a link loop, two links to one folder) is read once.
 */
function walk(dir: string, seen = new Set<string>()): string[] {
  const real = realpathSync(dir);
  if (seen.has(real)) return [];
  seen.add(real);
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    throw usageError(`${dir}: cannot read: ${(err as Error).message}`);
  }
  const out: string[] = [];
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    let isDirectory = entry.isDirectory();
    let isFile = entry.isFile();
    if (entry.isSymbolicLink()) {
      let target;
      try {
        target = statSync(path);
      } catch {
        // A manifest's name linking to nothing is a file missing from the set.
        if (MANIFEST.test(entry.name))
          throw usageError(`${path}: a link to nothing (no such file or directory)`);
        continue;
      }
      isDirectory = target.isDirectory();
      isFile = target.isFile();
    }
    if (isDirectory) out.push(...walk(path, seen));
    else if (isFile && MANIFEST.test(entry.name)) {
      const file = realpathSync(path);
      if (seen.has(file)) continue;
      seen.add(file);
      out.push(path);
    }
  }
  return out;
}

export function readManifestText(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw usageError(`${file}: cannot read: ${(err as Error).message}`);
  }
}

/** Every document of a file; empty documents (a lone `---`) are left out. */
export function parseManifests(file: string, text: string): ManifestDocument[] {
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter });
  const list = Array.isArray(docs) ? docs : [docs];
  const out: ManifestDocument[] = [];
  list.forEach((doc, index) => {
    const at = (offset: number) => {
      const pos = lineCounter.linePos(offset);
      return { line: pos.line, column: pos.col };
    };
    const start = at(doc.contents?.range[0] ?? doc.range[0]);
    const error = doc.errors[0];
    if (error) {
      const pos = error.linePos?.[0];
      out.push({
        file,
        index,
        line: start.line,
        value: undefined,
        syntaxError: {
          message: yamlMessage(error.message),
          line: pos?.line ?? start.line,
          column: pos?.col ?? 1,
        },
        lineOf: () => ({ line: pos?.line ?? start.line, column: pos?.col ?? 1 }),
      });
      return;
    }
    const read = documentValue(doc);
    if ('error' in read) {
      out.push({
        file,
        index,
        line: start.line,
        value: undefined,
        syntaxError: { message: read.error, line: start.line, column: start.column },
        lineOf: () => start,
      });
      return;
    }
    const value = read.value;
    if (value === null || value === undefined) return;
    const items = listItems(value);
    if (items) {
      // `kubectl get … -o yaml` writes a List: its items are the objects to check.
      items.forEach((item, i) => {
        const lineOf = (fieldPath: string) =>
          at(fieldOffset(doc, `items[${i}]${fieldPath ? `.${fieldPath}` : ''}`));
        out.push({ file, index, line: lineOf('').line, value: item, lineOf });
      });
      return;
    }
    out.push({
      file,
      index,
      line: start.line,
      value,
      lineOf: (fieldPath) => at(fieldOffset(doc, fieldPath)),
    });
  });
  return out;
}

/**
 * The items of a Kubernetes list (`kind: List`, or `<Kind>List` as `kubectl get -o yaml`
 * writes them): an object whose kind ends in List with an `items` array; else undefined.
 */
function listItems(value: unknown): unknown[] | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { kind, items } = value as { kind?: unknown; items?: unknown };
  return typeof kind === 'string' && kind.endsWith('List') && Array.isArray(items)
    ? items
    : undefined;
}
