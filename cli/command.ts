// The shape every subcommand starts with: its flags parsed (with -h/--help, and the
// server flags where it talks to a server), its help printed when asked for, and its
// --output checked against the formats it prints.
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { SERVER_OPTIONS } from './admin-client.ts';
import { usageError } from './errors.ts';

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** Parses a command's argv; undefined when -h/--help asked for `help` (printed here). */
export function parseCommand<const O extends ParseArgsOptionsConfig>(
  argv: string[],
  help: string,
  options: O,
) {
  const parsed = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...options, ...HELP },
  });
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
) {
  return parseCommand(argv, help, { ...options, ...SERVER_OPTIONS });
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
