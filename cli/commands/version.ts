// hookgate version: this build's version, the API version it speaks, and Node's.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_VERSION } from '../../api/v1alpha1/index.ts';
import { EXIT, usageError, type ExitCode } from '../errors.ts';

export function versionInfo(): { version: string; apiVersion: string; node: string } {
  const pkg = JSON.parse(
    readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8'),
  ) as { version: string };
  return { version: pkg.version, apiVersion: API_VERSION, node: process.version };
}

export function versionCommand(argv: string[]): ExitCode {
  const info = versionInfo();
  if (argv[0] === '-o' || argv[0] === '--output') {
    if (argv[1] !== 'json') throw usageError('version --output takes json');
    console.log(JSON.stringify(info));
  } else if (argv.length > 0)
    throw usageError(`version takes no arguments (got ${argv.join(' ')})`);
  else console.log(`hookgate ${info.version} (${info.apiVersion}, node ${info.node})`);
  return EXIT.ok;
}
