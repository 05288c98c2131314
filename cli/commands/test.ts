// hookgate test <trigger>: Send Test Request through the admin API (POST
// /api/triggers/<ns>/<name>/test): one request to the endpoint with its saved test
// credentials; prints the answer. Exit 1 when the endpoint answered 4xx or 5xx.
import { parseServerCommand, outputFormat, positionalsUpTo } from '../command.ts';
import { readFileSync } from 'node:fs';
import { AdminClient, parseTriggerRef, serverHelp } from '../admin-client.ts';
import { CliError, EXIT, usageError, type ExitCode } from '../errors.ts';

export const TEST_HELP = `Usage: hookgate test <namespace>/<name> [options]

Sends a test request to a deployed trigger through the server (Send Test Request),
with the credentials saved in its spec.testCredentials, and prints the answer.

Options:
  -n, --namespace <ns>       namespace when the trigger is given by name (default: default)
  -X, --method <method>      HTTP method (default: the trigger's first)
  -d, --data <json|@file>    JSON body (@file reads it from a file, @- from standard input)
      --query <k=v>          query parameter (repeatable; no longer -q, which is --quiet)
  -p, --param <k=v>          path parameter (repeatable; unset ones are "test")
  -H, --header <name: value> request header (repeatable)
  -o, --output <text|json>   text (status, headers, body; default) or the whole JSON record
${serverHelp(`give up (exit 3) when the server has not answered within this,
                       e.g. 5m (default 2m: the endpoint may wait for its workflow up
                       to the trigger's spec.timeout, 30s unless set; 0 waits forever)`)}

Exit codes: 0 the endpoint answered 1xx-3xx, 1 it answered 4xx/5xx or the server
refused the test, 2 bad usage, 3 server unreachable.`;

/**
 * The default --request-timeout of a test: longer than other calls', as the endpoint's
 * answer may wait for its workflow up to the trigger's spec.timeout (30 s by default;
 * a longer one needs --request-timeout).
 */
export const TEST_TIMEOUT_MS = 120_000;

/** `-q` was --query here until 2026-11-28; it is --quiet wherever a command has one. */
const RETIRED = {
  '-q': 'a query parameter is --query <k=v> (-q means --quiet, as in validate)',
};

function pairs(list: string[] | undefined, sep: string, flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of list ?? []) {
    const at = item.indexOf(sep);
    if (at <= 0) throw usageError(`${flag} "${item}": expected name${sep}value`);
    out[item.slice(0, at).trim()] = item.slice(at + 1).trim();
  }
  return out;
}

function body(data: string | undefined): unknown {
  if (data === undefined) return undefined;
  let text = data;
  if (data.startsWith('@')) {
    try {
      text = readFileSync(data === '@-' ? 0 : data.slice(1), 'utf8');
    } catch (err) {
      throw usageError(`--data ${data}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw usageError('--data must be JSON');
  }
}

interface TestResult {
  request: { method: string; url: string };
  response: { statusCode: number; headers: Record<string, string>; body: unknown };
  durationMs: number;
}

/** Whether an answer has the shape of a test result (a --server that is hookgate's). */
function isTestResult(value: unknown): value is TestResult {
  if (typeof value !== 'object' || value === null) return false;
  const { request, response, durationMs } = value as Record<string, unknown>;
  const object = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
  return (
    object(request) &&
    typeof request.method === 'string' &&
    typeof request.url === 'string' &&
    object(response) &&
    typeof response.statusCode === 'number' &&
    object(response.headers) &&
    typeof durationMs === 'number'
  );
}

export async function testCommand(argv: string[]): Promise<ExitCode> {
  const parsed = parseServerCommand(
    argv,
    TEST_HELP,
    {
      namespace: { type: 'string', short: 'n' },
      method: { type: 'string', short: 'X' },
      data: { type: 'string', short: 'd' },
      query: { type: 'string', multiple: true },
      param: { type: 'string', short: 'p', multiple: true },
      header: { type: 'string', short: 'H', multiple: true },
      output: { type: 'string', short: 'o', default: 'text' },
    },
    RETIRED,
  );
  if (!parsed) return EXIT.ok;
  const { values } = parsed;
  const positionals = positionalsUpTo(
    parsed.positionals,
    1,
    'test takes one trigger: <namespace>/<name>',
  );
  outputFormat(values.output, ['text', 'json']);
  const { namespace, name } = parseTriggerRef(positionals[0], values.namespace);
  const client = new AdminClient(values, process.env, TEST_TIMEOUT_MS);
  const payload = {
    ...(values.method ? { method: values.method.toUpperCase() } : {}),
    ...(values.data !== undefined ? { body: body(values.data) } : {}),
    query: pairs(values.query, '=', '--query'),
    params: pairs(values.param, '=', '--param'),
    headers: pairs(values.header, ':', '--header'),
  };
  const result = await client.json<unknown>(
    `/api/triggers/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}/test`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    },
  );
  if (!isTestResult(result)) {
    throw new CliError(
      EXIT.unreachable,
      'the server answered with something that is not a test result (is --server the hookgate admin listener?)',
    );
  }
  const { response } = result;
  if (values.output === 'json') console.log(JSON.stringify(result, null, 2));
  else {
    console.log(
      `${result.request.method} ${result.request.url} -> ${response.statusCode} (${result.durationMs.toFixed(1)} ms)`,
    );
    for (const [k, v] of Object.entries(response.headers)) console.log(`${k}: ${String(v)}`);
    console.log('');
    console.log(
      typeof response.body === 'string' ? response.body : JSON.stringify(response.body, null, 2),
    );
  }
  return response.statusCode >= 400 ? EXIT.failed : EXIT.ok;
}
