// Exit codes of the `hookgate` commands (docs/cli.md#exit-codes) and the error that
// carries one to the top, where it is printed once.

export const EXIT = {
  /** Done; for `validate`, every manifest is valid. */
  ok: 0,
  /** The check failed: invalid manifests, a test request answered 4xx/5xx, a refusal. */
  failed: 1,
  /** Bad usage: an unknown command or option, a missing argument, an unreadable path. */
  usage: 2,
  /** The server or cluster could not be reached, or answered with something unreadable. */
  unreachable: 3,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  readonly exitCode: ExitCode;
  constructor(exitCode: ExitCode, message: string) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

export function usageError(message: string): CliError {
  return new CliError(EXIT.usage, message);
}
