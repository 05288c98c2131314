// What the commands take on their command lines, refused before anything is contacted
// (exit 2, a sentence naming what is wrong): an argument a command does not take, and
// a short flag used with another meaning than the one it has everywhere.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../cli/main.ts';

/** Runs the CLI in this process; its exit code and what it printed on standard error. */
async function run(argv: string[]): Promise<{ code: number; err: string }> {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation(() => undefined);
  vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
    lines.push(args.map(String).join(' '));
  });
  return { code: await runCli(argv), err: lines.join('\n') };
}
afterEach(() => vi.restoreAllMocks());

// A server that is not there: a command that got as far as calling it exits 3, not 2.
const NOWHERE = ['--server', 'http://127.0.0.1:1'];

describe('an argument a command does not take', () => {
  it.each([
    [['events', 'default/hello', 'junk', ...NOWHERE], '"junk" (events takes one trigger'],
    [['test', 'default/hello', 'junk', ...NOWHERE], '"junk" (test takes one trigger'],
    [['replay', 'abc', 'def', ...NOWHERE], '"def" (replay takes one execution id)'],
    [['get', 'triggers', 'hello', 'junk', ...NOWHERE], '"junk" (get takes a kind and at most'],
    [['openapi', 'default/hello', 'junk', ...NOWHERE], '"junk" (openapi takes one trigger'],
    [['openapi', '--all', 'default/hello', ...NOWHERE], '"default/hello" (openapi --all takes'],
  ])('%j: exit 2 naming it', async (argv, message) => {
    const { code, err } = await run(argv);
    expect(code).toBe(2);
    expect(err).toContain(`unexpected argument ${message}`);
    expect(err).toContain('--help');
  });

  it('names every one of several', async () => {
    const { code, err } = await run(['events', 'default/hello', 'a', 'b', ...NOWHERE]);
    expect(code).toBe(2);
    expect(err).toContain('unexpected arguments "a" "b"');
  });
});
