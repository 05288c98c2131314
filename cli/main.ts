// The `hookgate` commands for people and pipelines (docs/cli.md): one module per
// command under commands/, each parsing its own options with node:util parseArgs.
// roles/cli.ts sends these commands here; `kubectl-hookgate` (the kubectl plugin)
// starts here directly. Every error is printed once, as `<program>: <message>`, and
// becomes the exit code of errors.ts.
import { CliError, EXIT, type ExitCode } from './errors.ts';

type Command = (argv: string[]) => ExitCode | Promise<ExitCode>;

// Each command's module is loaded when it runs: `version` or `validate` do not pay for
// the Kubernetes client that `get` needs.
const COMMANDS: Record<string, () => Promise<Command>> = {
  validate: async () => (await import('./commands/validate.ts')).validateCommand,
  get: async () => (await import('./commands/get.ts')).getCommand,
  test: async () => (await import('./commands/test.ts')).testCommand,
  events: async () => (await import('./commands/events.ts')).eventsCommand,
  replay: async () => (await import('./commands/replay.ts')).replayCommand,
  crds: async () => (await import('./commands/crds.ts')).crdsCommand,
  openapi: async () => (await import('./commands/openapi.ts')).openapiCommand,
  completion: async () => (await import('./commands/completion.ts')).completionCommand,
  version: async () => (await import('./commands/version.ts')).versionCommand,
};

export function usage(program: string): string {
  return `Usage: ${program} <command> [options]

Commands:
  validate <paths...>        check manifests offline, as the API server would admit them
  get <kind> [name]          list triggers, workflows (cluster or server) or executions
  test <ns>/<name>           send a test request to a deployed trigger
  events <ns>/<name>         tail a trigger's live request/response stream
  replay <execution>         run an execution again with its input
  openapi <ns>/<name>|--all  print the OpenAPI 3.1 document of a trigger or the gateway
  crds                       print the CRDs (${program} crds | kubectl apply -f -)
  completion <bash|zsh>      print a shell completion script
  version                    print the version
${
  program.startsWith('kubectl')
    ? ''
    : `
Server roles (hookgate <role> --help): dev (default), gateway, worker, operator.
`
}
Run '${program} <command> --help' for a command's options. Exit codes: 0 ok,
1 check failed or refused, 2 bad usage, 3 server or cluster unreachable.
Documentation: docs/cli.md.`;
}

/** Run one command; returns its exit code, having printed any error. */
export async function runCli(argv: string[], program = 'hookgate'): Promise<ExitCode> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const topic = name === 'help' ? rest[0] : undefined;
    if (topic && COMMANDS[topic]) return runCli([topic, '--help'], program);
    console.log(usage(program));
    return EXIT.ok;
  }
  const load = COMMANDS[name === '--version' ? 'version' : name];
  if (!load) {
    console.error(`${program}: unknown command "${name}"\n\n${usage(program)}`);
    return EXIT.usage;
  }
  const command = await load();
  try {
    return await command(rest);
  } catch (err) {
    if (err instanceof CliError) {
      console.error(`${program} ${name}: ${err.message}`);
      if (err.exitCode === EXIT.usage) console.error(`Run '${program} ${name} --help' for usage.`);
      return err.exitCode;
    }
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) {
      console.error(`${program} ${name}: ${(err as Error).message}`);
      console.error(`Run '${program} ${name} --help' for usage.`);
      return EXIT.usage;
    }
    // A bug of ours: one sentence, the stack only when asked for (HOOKGATE_DEBUG=1).
    const message = err instanceof Error ? err.message : String(err);
    console.error(`${program} ${name}: unexpected error: ${message}`);
    if (process.env.HOOKGATE_DEBUG === '1' && err instanceof Error) console.error(err.stack);
    else console.error('Set HOOKGATE_DEBUG=1 to see where it happened, and report it.');
    return EXIT.failed;
  }
}

/** Entry of the kubectl plugin and of roles/cli.ts: sets the process's exit code. */
export async function main(argv: string[], program: string): Promise<void> {
  // A reader that stops early (`| head`) is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
  process.exitCode = await runCli(argv, program);
}
