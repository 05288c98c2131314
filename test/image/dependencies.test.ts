// The image carries the product folders and `npm ci --omit=dev` only (image/README.md):
// every import that runs in it must resolve there. Parses the imports of the product
// code and compares them with package.json.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { CODE_DIRS, packageJson, PRODUCT_DIRS, ROOT } from '../../image/layout.ts';

interface Import {
  file: string;
  specifier: string;
  /** `import type` / `export type`: erased, never loaded. */
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js|mjs|cjs)$/.test(entry.name) ? [path] : [];
  });
}

function importsOf(file: string): Import[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const found: Import[] = [];
  const add = (node: ts.Node | undefined, typeOnly: boolean) => {
    if (node && ts.isStringLiteral(node))
      found.push({ file: relative(ROOT, file), specifier: node.text, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node))
      // `import { type A } from 'x'` stays an import of 'x' at run time: only a
      // whole-clause `import type` is erased.
      add(node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    else if (ts.isExportDeclaration(node)) add(node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword)
      add(node.arguments[0], false);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

const builtins = new Set(builtinModules);
const isBuiltin = (s: string) => s.startsWith('node:') || builtins.has(s);

const imports = CODE_DIRS.flatMap((dir) => sourceFiles(join(ROOT, dir))).flatMap(importsOf);
const pkg = packageJson();
const dependencies = new Set(Object.keys(pkg.dependencies ?? {}));
const devDependencies = new Set(Object.keys(pkg.devDependencies ?? {}));

describe('what the product code imports, against what the image carries', () => {
  it('finds the product code and its imports', () => {
    expect(imports.length).toBeGreaterThan(100);
    expect(imports.map((i) => i.specifier)).toContain('fastify');
  });

  it('imports packages only from dependencies, never a devDependency or an undeclared one', () => {
    const wrong = imports
      .filter((i) => !i.typeOnly && !i.specifier.startsWith('.') && !isBuiltin(i.specifier))
      .filter((i) => !dependencies.has(packageName(i.specifier)))
      .map((i) => {
        const name = packageName(i.specifier);
        const kind = devDependencies.has(name) ? 'a devDependency' : 'not in package.json';
        return `${i.file}: '${i.specifier}' (${kind})`;
      });
    expect(wrong).toEqual([]);
  });

  it('imports relative files only inside the folders the image carries', () => {
    const carried = [...PRODUCT_DIRS.map((d) => `${d}${sep}`), 'package.json'];
    const wrong = imports
      .filter((i) => i.specifier.startsWith('.'))
      .filter((i) => {
        const target = resolve(ROOT, dirname(i.file), i.specifier);
        const inside = carried.some((c) => relative(ROOT, target).startsWith(c));
        const exists = statSync(target, { throwIfNoEntry: false })?.isFile() === true;
        return !inside || !exists;
      })
      .map((i) => `${i.file}: '${i.specifier}'`);
    expect(wrong).toEqual([]);
  });
});
