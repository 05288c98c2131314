// What of the working tree the image carries: the files of the product folders that git
// accounts for (tracked, or untracked but not ignored: those make the build's revision
// `-dirty`). Files git ignores (.env, *.log, editor and build leftovers: .gitignore) stay
// out: a copy of the whole folder took them into the image, where anyone who can pull it
// reads them.
import { execFileSync } from 'node:child_process';
import { copyFileSync, lstatSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The files under `dirs` of the git working tree at `root`, relative to it, sorted. */
export function productFiles(root: string, dirs: readonly string[]): string[] {
  const listed = execFileSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', ...dirs],
    { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  const files = new Set(listed.split('\0').filter(Boolean));
  // --cached lists a tracked file deleted from the working tree: nothing to copy.
  return [...files].filter((file) => exists(join(root, file))).sort();
}

function exists(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch {
    return false;
  }
}

/** Copies productFiles(root, dirs) to the same paths under `target` (modes kept). */
export function copyProductFiles(root: string, dirs: readonly string[], target: string): string[] {
  const files = productFiles(root, dirs);
  for (const file of files) {
    mkdirSync(dirname(join(target, file)), { recursive: true });
    copyFileSync(join(root, file), join(target, file));
  }
  return files;
}
