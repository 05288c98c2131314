// The import rules of .dependency-cruiser.cjs (run by `npm run check`): they hold on
// the product, and they do catch a circle and an operator/ → runtime/ import, shown
// on a small tree under test/fixtures/import-rules that breaks both on purpose.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');
const depcruise = join(root, 'node_modules', '.bin', 'depcruise');
const config = join(root, '.dependency-cruiser.cjs');

function cruise(cwd: string, folders: string[]): { status: number | null; output: string } {
  const run = spawnSync(depcruise, [...folders, '--config', config, '--output-type', 'err'], {
    cwd,
    encoding: 'utf8',
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('import rules', () => {
  it('hold on the product code', () => {
    const { status, output } = cruise(root, [
      'api',
      'operator',
      'runtime',
      'roles',
      'cli',
      'testing',
    ]);
    expect(output).toContain('no dependency violations found');
    expect(status).toBe(0);
  });

  it('fail on an import circle and on an operator/ → runtime/ import', () => {
    const fixture = join(root, 'test', 'fixtures', 'import-rules');
    const { status, output } = cruise(fixture, ['api', 'operator', 'runtime']);
    expect(status).not.toBe(0);
    expect(output).toContain('operator-not-to-runtime: operator/reaches-runtime.ts → runtime/a.ts');
    expect(output).toMatch(/no-circular: runtime\/a\.ts →\s+runtime\/b\.ts →\s+runtime\/a\.ts/);
    expect(output).toContain('2 dependency violations');
    expect(output).not.toContain('api/contract.ts');
  });
});
