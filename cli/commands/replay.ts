// hookgate replay <execution>: run an execution again with its input, through the
// admin API (POST /api/executions/<id>/replay, docs/retries-and-replay.md): 202 with
// the new `executionId`, which records `replayOf`.
import { parseServerCommand, outputFormat, positionalsUpTo } from '../command.ts';
import { AdminClient, SERVER_HELP } from '../admin-client.ts';
import { EXIT, usageError, type ExitCode } from '../errors.ts';

export const REPLAY_HELP = `Usage: hookgate replay <execution-id> [options]

Runs an execution again with the same input (its workflow as published now) and
prints the new execution's id. Needs create on webhooktriggers/test where the server
authorises (docs/retries-and-replay.md). An execution whose trigger was deleted and
re-created since it came in is refused unless --allow-recreated.

Options:
  -o, --output <text|json>  the new id (default) or the server's whole answer
      --allow-recreated     replay it through the trigger of its name even if that was
                            deleted and re-created since (another WebhookTrigger)
${SERVER_HELP}

Exit codes: 0 replayed, 1 refused or not found, 2 bad usage, 3 server unreachable.`;

export async function replayCommand(argv: string[]): Promise<ExitCode> {
  const parsed = parseServerCommand(argv, REPLAY_HELP, {
    output: { type: 'string', short: 'o', default: 'text' },
    'allow-recreated': { type: 'boolean', default: false },
  });
  if (!parsed) return EXIT.ok;
  const { values } = parsed;
  const [id] = positionalsUpTo(parsed.positionals, 1, 'replay takes one execution id');
  if (!id) throw usageError('name the execution to replay');
  outputFormat(values.output, ['text', 'json']);
  const client = new AdminClient(values);
  const answer = await client.json<Record<string, unknown>>(
    `/api/executions/${encodeURIComponent(id)}/replay${values['allow-recreated'] ? '?allowRecreated=true' : ''}`,
    { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' },
  );
  if (values.output === 'json') console.log(JSON.stringify(answer, null, 2));
  else {
    const newId =
      answer.executionId ?? answer.id ?? (answer.execution as { id?: unknown } | undefined)?.id;
    console.log(typeof newId === 'string' ? newId : JSON.stringify(answer));
  }
  return EXIT.ok;
}
