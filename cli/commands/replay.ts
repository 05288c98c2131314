// hookgate replay <execution>: run an execution again with its input, through the
// admin API (POST /api/executions/<id>/replay, docs/retries-and-replay.md): 202 with
// the new `executionId`, which records `replayOf`. Sent with an Idempotency-Key (one
// per invocation, or --idempotency-key): the same call sent again, after an answer
// that was lost, starts nothing new.
import { randomUUID } from 'node:crypto';
import { parseServerCommand, outputFormat, positionalsUpTo } from '../command.ts';
import { AdminClient, SERVER_HELP } from '../admin-client.ts';
import { CliError, EXIT, usageError, type ExitCode } from '../errors.ts';

export const REPLAY_HELP = `Usage: hookgate replay <execution-id> [options]

Runs an execution again with the same input (its workflow as published now) and
prints the new execution's id. Needs create on webhooktriggers/test where the server
authorises (docs/retries-and-replay.md). An execution whose trigger was deleted and
re-created since it came in is refused unless --allow-recreated.

Options:
  -o, --output <text|json>  the new id (default) or the server's whole answer
      --allow-recreated     replay it through the trigger of its name even if that was
                            deleted and re-created since (another WebhookTrigger)
      --idempotency-key <key>
                            the replay's Idempotency-Key (default: a new one each run);
                            the same key again starts nothing new and prints the first
                            answer. An answer lost (exit 3) names the key to retry with
${SERVER_HELP}

Exit codes: 0 replayed, 1 refused or not found, 2 bad usage, 3 server unreachable or
no answer (the replay may have started: run again with the key the message names).`;

export async function replayCommand(argv: string[]): Promise<ExitCode> {
  const parsed = parseServerCommand(argv, REPLAY_HELP, {
    output: { type: 'string', short: 'o', default: 'text' },
    'allow-recreated': { type: 'boolean', default: false },
    'idempotency-key': { type: 'string' },
  });
  if (!parsed) return EXIT.ok;
  const { values } = parsed;
  const [id] = positionalsUpTo(parsed.positionals, 1, 'replay takes one execution id');
  if (!id) throw usageError('name the execution to replay');
  outputFormat(values.output, ['text', 'json']);
  const key = values['idempotency-key'] ?? randomUUID();
  // The server's rule (1-255 visible ASCII): refused here rather than as its 400.
  if (!/^[\x21-\x7e]{1,255}$/.test(key))
    throw usageError('--idempotency-key must be 1-255 visible ASCII characters (no spaces)');
  const client = new AdminClient(values);
  const path = `/api/executions/${encodeURIComponent(id)}/replay${values['allow-recreated'] ? '?allowRecreated=true' : ''}`;
  let answer: Record<string, unknown>;
  let headers: Headers;
  try {
    ({ body: answer, headers } = await client.answer<Record<string, unknown>>(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{}',
    }));
  } catch (err) {
    // Sent, maybe accepted, its answer lost: the same key again cannot start it twice.
    if (err instanceof CliError && err.exitCode === EXIT.unreachable) {
      throw new CliError(
        EXIT.unreachable,
        `${err.message}\nThe replay may have started. To retry without starting it twice: hookgate replay ${shellWord(id)}${values['allow-recreated'] ? ' --allow-recreated' : ''} --idempotency-key ${shellWord(key)}`,
      );
    }
    throw err;
  }
  if (headers.get('idempotent-replayed') === 'true')
    console.error(`replayed before under Idempotency-Key ${key}: no new execution started`);
  // Said where the id goes to stdout: a later `retry` of that dead letter finds nothing.
  if (answer.deadLetter === 'taken' && values.output !== 'json')
    console.error(`its dead-letter entry was taken: the replay stands for its retry`);
  if (values.output === 'json') console.log(JSON.stringify(answer, null, 2));
  else {
    const newId =
      answer.executionId ?? answer.id ?? (answer.execution as { id?: unknown } | undefined)?.id;
    console.log(typeof newId === 'string' ? newId : JSON.stringify(answer));
  }
  return EXIT.ok;
}

/**
 * `word` as a POSIX shell reads it back: as it is when it holds nothing the shell
 * interprets, else single-quoted (a key may hold any visible ASCII: `;`, `$(…)`, quotes),
 * so that the retry command printed can be pasted as it is.
 */
export function shellWord(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", "'\\''")}'`;
}
