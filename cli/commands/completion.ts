// hookgate completion bash|zsh: a completion script for the commands, their options
// and the kinds of `get`. Static: it runs nothing while you type.
import { EXIT, usageError, type ExitCode } from '../errors.ts';

export const COMPLETION_HELP = `Usage: hookgate completion <bash|zsh>

Prints a shell completion script. Load it in the current shell, or for good:

  source <(hookgate completion bash)           # bash, this shell
  hookgate completion bash > /etc/bash_completion.d/hookgate
  hookgate completion zsh > "\${fpath[1]}/_hookgate"   # zsh (compinit)`;

const SERVER = '--server --token --token-file --request-timeout';
/** Options per command, for completion. */
export const COMPLETION_WORDS: Record<string, string> = {
  validate: '--output --namespace --quiet --help',
  get: `triggers workflows executions --namespace --all-namespaces --output --kubeconfig --context --status --limit ${SERVER} --help`,
  test: `--namespace --method --data --query --param --header --output ${SERVER} --help`,
  events: `--namespace --output --count --timeout ${SERVER} --help`,
  replay: `--output --allow-recreated --idempotency-key ${SERVER} --help`,
  crds: '--help',
  openapi: `--namespace --all --output --file --base-url ${SERVER} --help`,
  completion: 'bash zsh',
  version: '--output --help',
  help: '',
  dev: '--dir --source --namespace --port --host --base-url --admin-port --help',
  gateway: '--port --host --base-url --admin-port --help',
  worker: '--port --help',
  operator: '--namespace --port --help',
};

function bash(): string {
  const cases = Object.entries(COMPLETION_WORDS)
    .map(([cmd, words]) => `    ${cmd}) words="${words}" ;;`)
    .join('\n');
  return `# bash completion for hookgate (and kubectl hookgate)
_hookgate() {
  local cur cmd words i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in -*) ;; *) cmd="\${COMP_WORDS[i]}"; break ;; esac
  done
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "${Object.keys(COMPLETION_WORDS).join(' ')}" -- "$cur"))
    return
  fi
  case "$cmd" in
${cases}
    *) words="" ;;
  esac
  case "$cmd" in
    validate|openapi) COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$words" -- "$cur")) ;;
  esac
}
complete -o filenames -F _hookgate hookgate
complete -o filenames -F _hookgate kubectl-hookgate
`;
}

function zsh(): string {
  const cases = Object.entries(COMPLETION_WORDS)
    .map(([cmd, words]) => `    ${cmd}) compadd -- ${words} ;;`)
    .join('\n');
  return `#compdef hookgate kubectl-hookgate
# zsh completion for hookgate (and kubectl hookgate)
_hookgate() {
  if (( CURRENT == 2 )); then
    compadd -- ${Object.keys(COMPLETION_WORDS).join(' ')}
    return
  fi
  case "\${words[2]}" in
${cases}
  esac
  case "\${words[2]}" in
    validate|openapi) _files ;;
  esac
}
compdef _hookgate hookgate kubectl-hookgate
`;
}

export function completionCommand(argv: string[]): ExitCode {
  const shell = argv[0];
  if (shell === '-h' || shell === '--help') {
    console.log(COMPLETION_HELP);
    return EXIT.ok;
  }
  if (argv.length > 1) throw usageError(`completion takes one shell (got ${argv.join(' ')})`);
  if (shell === 'bash') process.stdout.write(bash());
  else if (shell === 'zsh') process.stdout.write(zsh());
  else throw usageError('completion for which shell? bash or zsh');
  return EXIT.ok;
}
