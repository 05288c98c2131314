// The one shutdown path of every role (roles/lifecycle.ts), in a child process since
// it ends the process: SIGTERM runs close() once and exits 0; a second signal exits 1
// at once; a close() that outlives the grace period exits 1.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const script = join(import.meta.dirname, '..', 'fixtures', 'lifecycle', 'role.ts');

async function start(env: Record<string, string>) {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env } });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  while (!out.includes('ready')) await new Promise((r) => setTimeout(r, 20));
  return { child, exited, output: () => out };
}

describe('shutdown path', () => {
  it('SIGTERM closes the role once, then exits 0', async () => {
    const { child, exited, output } = await start({ CLOSE_MS: '100' });
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(output().match(/closing/g)).toHaveLength(1);
    expect(output()).toContain('closed');
  });

  it('a second signal exits 1 at once, without waiting for close()', async () => {
    const { child, exited, output } = await start({ CLOSE_MS: '10000' });
    child.kill('SIGTERM');
    while (!output().includes('closing')) await new Promise((r) => setTimeout(r, 20));
    const sent = Date.now();
    child.kill('SIGINT');
    const [code] = await exited;
    expect(code).toBe(1);
    expect(Date.now() - sent).toBeLessThan(2000);
    expect(output()).not.toContain('closed');
  });

  it('a close() that outlives the grace period exits 1', async () => {
    const { child, exited } = await start({ CLOSE_MS: '10000', GRACE_MS: '300' });
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(1);
  });
});
