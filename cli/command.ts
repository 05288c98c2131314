// The shape every subcommand starts with: its flags parsed (with -h/--help, and the
// server flags where it talks to a server), its help printed when asked for, and its
// --output checked against the formats it prints.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { SERVER_OPTIONS } from './admin-client.ts';
import { usageError } from './errors.ts';

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/**
 * Short flags a command no longer takes, each with what to write instead: `-q` is
 * `--quiet` wherever a command has it (validate), and `test` wrote `--query` as `-q`
 * until 2026-11-28 (docs/cli.md#short-flags). Such a flag is refused with that sentence
 * rather than parseArgs' "Unknown option".
 */
export type RetiredFlags = Readonly<Record<string, string>>;

/** Parses a command's argv; undefined when -h/--help asked for `help` (printed here). */
export function parseCommand<const O extends ParseArgsOptionsConfig>(
  argv: string[],
  help: string,
  options: O,
  retired: RetiredFlags = {},
) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { ...options, ...HELP },
    });
  } catch (err) {
    const flag = /^Unknown option '([^']+)'/.exec((err as Error).message)?.[1];
    const instead = flag === undefined ? undefined : retired[flag];
    if ((err as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && instead)
      throw usageError(`${flag} is not an option of this command: ${instead}`);
    throw err;
  }
  if ((parsed.values as { help?: boolean }).help) {
    console.log(help);
    return undefined;
  }
  return parsed;
}

/** parseCommand for a command that talks to a hookgate server (--server, --token...). */
export function parseServerCommand<const O extends ParseArgsOptionsConfig>(
  argv: string[],
  help: string,
  options: O,
  retired: RetiredFlags = {},
) {
  return parseCommand(argv, help, { ...options, ...SERVER_OPTIONS }, retired);
}

/**
 * The positional arguments of a command that takes at most `max` of them (`takes` says
 * which, for the message). One more is bad usage naming it, as an unknown option is: a
 * typo or a value whose flag was left out must not be dropped without a word.
 */
export function positionalsUpTo(positionals: string[], max: number, takes: string): string[] {
  const extra = positionals.slice(max);
  if (extra.length > 0) {
    const named = extra.map((word) => `"${word}"`).join(' ');
    throw usageError(`unexpected argument${extra.length > 1 ? 's' : ''} ${named} (${takes})`);
  }
  return positionals;
}

/** `output` when it is one of `formats`, else a usage error that lists them. */
export function outputFormat<const F extends string>(output: string, formats: readonly F[]): F {
  if ((formats as readonly string[]).includes(output)) return output as F;
  const list =
    formats.length > 1 ? `${formats.slice(0, -1).join(', ')} or ${formats.at(-1)}` : formats[0];
  throw usageError(`--output must be ${list}, not "${output}"`);
}
