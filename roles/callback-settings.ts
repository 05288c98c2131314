// The secrets that sign Async Callbacks, from HOOKGATE_CALLBACK_SECRET_FILE: a file (a
// mounted Secret) with one `whsec_…` secret per line. Every one signs (a new one added
// while receivers move to it, the old one removed after); unset, each process signs
// with a random secret of its own, which no receiver can know. A file that cannot be
// read, or a line that is no signing secret, is a start-up problem (never echoed).
import { readFileSync } from 'node:fs';
import { signingSecretProblem } from '../api/callback-signing-secret.ts';

export const CALLBACK_USAGE = `  HOOKGATE_CALLBACK_SECRET_FILE  dev, gateway (inline), worker: file with the secrets
                             that sign Async Callbacks (Standard Webhooks), one whsec_...
                             per line, every one signing; give receivers the same secret.
                             Unset: a random secret per process (docs/callbacks.md)
`;

export function callbackSettings(env: NodeJS.ProcessEnv): {
  secrets: string[] | undefined;
  problems: string[];
} {
  const file = env.HOOKGATE_CALLBACK_SECRET_FILE;
  if (file === undefined || file === '') return { secrets: undefined, problems: [] };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    return { secrets: undefined, problems: [`HOOKGATE_CALLBACK_SECRET_FILE ${file}: ${code}`] };
  }
  const secrets: string[] = [];
  const problems: string[] = [];
  text.split('\n').forEach((line, index) => {
    const secret = line.trim();
    if (secret === '') return;
    const problem = signingSecretProblem(secret);
    if (problem) problems.push(`HOOKGATE_CALLBACK_SECRET_FILE line ${index + 1}: ${problem}`);
    else secrets.push(secret);
  });
  if (secrets.length === 0 && problems.length === 0)
    problems.push(`HOOKGATE_CALLBACK_SECRET_FILE ${file} holds no secret`);
  return { secrets, problems };
}
