// The commands of `hookgate` for people and pipelines (cli/main.ts). roles/cli.ts sends
// these to the CLI and everything else to the server roles.
export const CLI_COMMANDS = [
  'validate',
  'get',
  'test',
  'events',
  'replay',
  'crds',
  'openapi',
  'completion',
  'version',
  'help',
] as const;
export type CliCommand = (typeof CLI_COMMANDS)[number];

export function isCliCommand(word: string | undefined): word is CliCommand {
  return (CLI_COMMANDS as readonly string[]).includes(word ?? '');
}
