// hookgate version: this build's version, the API version it speaks, and Node's.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_VERSION } from '../../api/v1alpha1/index.ts';
import { outputFormat, parseCommand } from '../command.ts';
import { EXIT, usageError, type ExitCode } from '../errors.ts';

export const VERSION_HELP = `Usage: hookgate version [-o json]

Prints this build's version, the API version it serves (hookgate.dev/v1alpha1) and
the Node.js version it runs on.

Options:
  -o, --output json   one JSON object: { version, apiVersion, node }`;

export function versionInfo(): { version: string; apiVersion: string; node: string } {
  const pkg = JSON.parse(
    readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'),
  ) as { version: string };
  return { version: pkg.version, apiVersion: API_VERSION, node: process.version };
}

export function versionCommand(argv: string[]): ExitCode {
  const parsed = parseCommand(argv, VERSION_HELP, {
    output: { type: 'string', short: 'o' },
  });
  if (!parsed) return EXIT.ok;
  if (parsed.positionals.length > 0)
    throw usageError(`version takes no arguments (got ${parsed.positionals.join(' ')})`);
  const info = versionInfo();
  const output = parsed.values.output;
  if (output !== undefined && outputFormat(output, ['json'] as const) === 'json')
    console.log(JSON.stringify(info));
  else console.log(`hookgate ${info.version} (${info.apiVersion}, node ${info.node})`);
  return EXIT.ok;
}
