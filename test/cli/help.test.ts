// Every command answers --help (exit 0), as the usage errors tell the user to run it,
// and the completion script offers exactly the options each command's help lists; the
// kubectl plugin on a Node that cannot run it says so.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CLI_COMMANDS } from '../../cli/command-names.ts';
import { COMPLETION_WORDS } from '../../cli/commands/completion.ts';
import { runCli } from '../../cli/main.ts';
import { ROOT } from './run.ts';

/** Every command of the CLI (a new one is tested here at once). */
const COMMANDS = CLI_COMMANDS.filter((c) => c !== 'help');

/** Runs the CLI in this process; returns its exit code and what it printed. */
async function run(argv: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const keep = (...args: unknown[]) => void lines.push(args.map(String).join(' '));
  vi.spyOn(console, 'log').mockImplementation(keep);
  vi.spyOn(console, 'error').mockImplementation(keep);
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    lines.push(String(chunk));
    return true;
  });
  try {
    return { code: await runCli(argv), out: lines.join('\n') };
  } finally {
    write.mockRestore();
  }
}
afterEach(() => vi.restoreAllMocks());

/** The long options an option line of a help text names (`  -o, --output <f>  ...`). */
function optionsOf(help: string): string[] {
  const found = new Set<string>();
  for (const line of help.split('\n')) {
    const option = /^\s+(?:-\w, )?(--[a-z][a-z-]*)/.exec(line);
    if (option?.[1]) found.add(option[1]);
  }
  return [...found].sort();
}

describe('hookgate <command> --help', () => {
  it.each(COMMANDS)('%s --help (and help <command>): exit 0 with the usage', async (command) => {
    const direct = await run([command, '--help']);
    expect(direct.code).toBe(0);
    expect(direct.out).toMatch(new RegExp(`^Usage: hookgate ${command}\\b`));
    const viaHelp = await run(['help', command]);
    expect(viaHelp).toEqual(direct);
  });

  it.each(COMMANDS.filter((c) => c !== 'completion'))(
    'completion offers exactly the options %s --help lists',
    async (command) => {
      const { out } = await run([command, '--help']);
      const offered = (COMPLETION_WORDS[command] ?? '')
        .split(' ')
        .filter((word) => word.startsWith('--') && word !== '--help')
        .sort();
      expect(offered).toEqual(optionsOf(out));
      expect(COMPLETION_WORDS[command]).toContain('--help');
    },
  );

  it('completion: one shell, nothing after it (exit 2)', async () => {
    expect((await run(['completion', 'bash'])).code).toBe(0);
    expect((await run(['completion', 'bash', 'extra'])).code).toBe(2);
    expect((await run(['completion'])).code).toBe(2);
  });

  it('version: -o json, --output=json; anything else is bad usage (exit 2)', async () => {
    for (const argv of [['-o', 'json'], ['--output=json']]) {
      const { code, out } = await run(['version', ...argv]);
      expect(code).toBe(0);
      expect(JSON.parse(out)).toMatchObject({ apiVersion: 'hookgate.dev/v1alpha1' });
    }
    expect((await run(['version', '-o', 'yaml'])).code).toBe(2);
    expect((await run(['version', 'extra'])).code).toBe(2);
    expect((await run(['version', '--bogus'])).code).toBe(2);
  });
});

describe('kubectl-hookgate on a Node that cannot run the .ts sources', () => {
  it('says which Node it needs and which one it got (exit 2), not ERR_UNKNOWN_FILE_EXTENSION', async () => {
    // This Node with type stripping off stands for an older `node` first on PATH.
    const run = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--no-experimental-strip-types', join(ROOT, 'cli', 'kubectl-hookgate'), 'version'],
        (error, _stdout, stderr) =>
          resolve({ code: typeof error?.code === 'number' ? error.code : 0, stderr }),
      );
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('kubectl hookgate: needs Node 24 or later as `node` on PATH');
    expect(run.stderr).toContain(`this is Node ${process.version}`);
    expect(run.stderr).not.toContain('ERR_UNKNOWN_FILE_EXTENSION');
  });
});
