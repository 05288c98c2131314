// The image stages the product folders from the working tree: only the files git accounts
// for, never an ignored secret or leftover (image/product-files.ts). Runs without podman.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copyProductFiles, productFiles } from '../../image/product-files.ts';

const work = mkdtempSync(join(tmpdir(), 'hookgate-product-files-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function write(root: string, path: string, text: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

function git(root: string, ...args: string[]): void {
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
    cwd: root,
    stdio: 'ignore',
  });
}

/** A repository like ours: .gitignore with .env and *.log, product folder runtime/. */
function repository(): string {
  const root = mkdtempSync(join(work, 'repo-'));
  git(root, 'init', '-q');
  write(root, '.gitignore', 'node_modules\n*.log\n.env\n');
  write(root, 'runtime/server.ts', 'export {};\n');
  write(root, 'runtime/nested/part.ts', 'export {};\n');
  write(root, 'test/server.test.ts', 'export {};\n');
  git(root, 'add', '-A');
  git(root, 'commit', '-q', '-m', 'init');
  return root;
}

describe('the product files the image carries', () => {
  it('leaves out what git ignores: a .env with secrets, logs, a nested node_modules', () => {
    const root = repository();
    write(root, 'runtime/.env', 'REDIS_URL=redis://:hunter2@redis:6379\n');
    write(root, 'runtime/nested/debug.log', 'token=abc\n');
    write(root, 'runtime/node_modules/x/index.js', '');
    const target = join(work, 'stage-ignored');
    const copied = copyProductFiles(root, ['runtime'], target);
    expect(copied).toEqual(['runtime/nested/part.ts', 'runtime/server.ts']);
    expect(existsSync(join(target, 'runtime/.env'))).toBe(false);
    expect(existsSync(join(target, 'runtime/nested/debug.log'))).toBe(false);
    expect(existsSync(join(target, 'runtime/node_modules'))).toBe(false);
    expect(readFileSync(join(target, 'runtime/server.ts'), 'utf8')).toBe('export {};\n');
  });

  it('takes untracked files git does not ignore (the build calls that revision dirty), not deleted ones', () => {
    const root = repository();
    write(root, 'runtime/new.ts', 'export {};\n');
    rmSync(join(root, 'runtime/nested/part.ts'));
    expect(productFiles(root, ['runtime'])).toEqual(['runtime/new.ts', 'runtime/server.ts']);
  });

  it('takes only the folders asked for', () => {
    const root = repository();
    expect(productFiles(root, ['runtime'])).not.toContain('test/server.test.ts');
  });
});
