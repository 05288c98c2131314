// hookgate crds: the CustomResourceDefinitions of this version, for
// `hookgate crds | kubectl apply -f -`. Rendered from the API definitions in the
// binary (api/crd.ts), the same objects as crds/*.yaml.
import { stringify } from 'yaml';
import { buildCrds } from '../../api/crd.ts';
import { EXIT, usageError, type ExitCode } from '../errors.ts';

export const CRDS_HELP = `Usage: hookgate crds

Prints the WebhookTrigger and Workflow CustomResourceDefinitions of this version as
one multi-document YAML stream:

  hookgate crds | kubectl apply --server-side -f -`;

export function crdsCommand(argv: string[]): ExitCode {
  if (argv.includes('-h') || argv.includes('--help')) {
    console.log(CRDS_HELP);
    return EXIT.ok;
  }
  if (argv.length > 0) throw usageError(`crds takes no arguments (got ${argv.join(' ')})`);
  process.stdout.write(
    buildCrds()
      .map((crd) => stringify(crd, { lineWidth: 0 }))
      .join('---\n'),
  );
  return EXIT.ok;
}
