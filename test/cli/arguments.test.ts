// What the commands take on their command lines, refused before anything is contacted
// (exit 2, a sentence naming what is wrong): an argument a command does not take, and
// a short flag used with another meaning than the one it has everywhere.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLI_COMMANDS } from '../../cli/command-names.ts';
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

describe('short flags: one meaning each', () => {
  it('-q is --quiet: test refuses it, naming --query, before calling the server', async () => {
    for (const argv of [
      ['test', 'default/hello', '-q', 'a=b'],
      ['test', 'default/hello', '-qa=b'],
    ]) {
      const { code, err } = await run([...argv, ...NOWHERE]);
      expect(code).toBe(2);
      expect(err).toContain(
        '-q is not an option of this command: a query parameter is --query <k=v> (-q means --quiet, as in validate)',
      );
    }
  });

  it('every short flag means the same in every command whose help lists it', async () => {
    const meaning = new Map<string, { long: string; command: string }>();
    for (const command of CLI_COMMANDS.filter((c) => c !== 'help')) {
      const lines: string[] = [];
      vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
        lines.push(args.map(String).join(' '));
      });
      expect(await runCli([command, '--help'])).toBe(0);
      vi.restoreAllMocks();
      for (const [, short, long] of lines.join('\n').matchAll(/^\s+(-\w), (--[a-z][a-z-]*)/gm)) {
        const before = meaning.get(short as string);
        expect(
          before === undefined || before.long === long,
          `${command}: ${short} is ${long}, but ${before?.command ?? ''}'s is ${before?.long ?? ''}`,
        ).toBe(true);
        meaning.set(short as string, { long: long as string, command });
      }
    }
    expect(meaning.get('-q')?.long).toBe('--quiet');
  });
});
