// The command line refuses bad settings with exit code 2 and a message naming them,
// before it connects to anything.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { redisUrlProblems } from '../../roles/settings.ts';
import { describe, expect, it } from 'vitest';

const cli = join(import.meta.dirname, '..', '..', 'roles', 'cli.ts');

function run(args: string[], env: Record<string, string> = {}) {
  const clean = { ...process.env };
  for (const name of Object.keys(clean)) if (name.startsWith('HOOKGATE_')) delete clean[name];
  delete clean.REDIS_URL;
  return spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    env: { ...clean, ...env },
    timeout: 20_000,
  });
}

describe('hookgate command line', () => {
  const redis = { REDIS_URL: 'redis://127.0.0.1:1' };
  it.each([
    [['nonsense'], {}, 'unknown role "nonsense"'],
    [['worker'], {}, 'the worker role needs REDIS_URL'],
    [['gateway'], {}, 'the gateway role needs REDIS_URL'],
    [
      ['worker'],
      { ...redis, HOOKGATE_QUEUE_SHARDS: '0' },
      'HOOKGATE_QUEUE_SHARDS must be an integer from 1 to 256, not "0"',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_QUEUE_SHARDS: '257' },
      'HOOKGATE_QUEUE_SHARDS must be an integer from 1 to 256, not "257"',
    ],
    [
      ['worker'],
      { REDIS_URL: 'redis+cluster://127.0.0.1:1', HOOKGATE_QUEUE_SHARDS: '2.5' },
      'HOOKGATE_QUEUE_SHARDS must be an integer from 1 to 256, not "2.5"',
    ],
    [['operator'], { REDIS_URL: 'redis+cluster://' }, 'a redis+cluster:// URL names no node'],
    [
      ['gateway'],
      { ...redis, HOOKGATE_QUEUE_ACK_REPLICAS: '-1' },
      'HOOKGATE_QUEUE_ACK_REPLICAS must be an integer from 0 to 16, not "-1"',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_QUEUE_ACK_REPLICAS: '17' },
      'HOOKGATE_QUEUE_ACK_REPLICAS must be an integer from 0 to 16, not "17"',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_QUEUE_ACK_REPLICAS: '1', HOOKGATE_QUEUE_ACK_TIMEOUT_MS: '1000' },
      'HOOKGATE_QUEUE_ACK_TIMEOUT_MS must be an integer from 1 to 899 (HOOKGATE_REDIS_COMMAND_TIMEOUT_MS less the write window and 100 ms Redis may take to end a WAIT), not "1000"',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_QUEUE_ACK_REPLICAS: '1', HOOKGATE_REDIS_COMMAND_TIMEOUT_MS: '200' },
      'HOOKGATE_QUEUE_ACK_TIMEOUT_MS must be an integer from 1 to 99 (HOOKGATE_REDIS_COMMAND_TIMEOUT_MS less the write window and 100 ms Redis may take to end a WAIT), not "250"',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_QUEUE_ACK_TIMEOUT_MS: 'soon' },
      'HOOKGATE_QUEUE_ACK_TIMEOUT_MS must be an integer from 1 to 899',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_EXECUTIONS: 'later' },
      'HOOKGATE_EXECUTIONS must be queue or inline',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_MAX_QUEUED: '0' },
      'HOOKGATE_MAX_QUEUED must be a positive integer',
    ],
    [
      ['worker'],
      { ...redis, HOOKGATE_WORKER_CONCURRENCY: '2.5' },
      'HOOKGATE_WORKER_CONCURRENCY must be a positive integer',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_REDIS_WRITE_WINDOW_MS: '51' },
      'HOOKGATE_REDIS_WRITE_WINDOW_MS must be an integer from 0 to 50, not "51"',
    ],
    [
      ['gateway'],
      { ...redis, HOOKGATE_REDIS_WRITE_WINDOW_MS: '0.5' },
      'HOOKGATE_REDIS_WRITE_WINDOW_MS must be an integer from 0 to 50, not "0.5"',
    ],
    [
      ['dev'],
      { HOOKGATE_REDIS_WRITE_WINDOW_MS: '-1' },
      'HOOKGATE_REDIS_WRITE_WINDOW_MS must be an integer from 0 to 50, not "-1"',
    ],
    // The command timeout counts from before the window: one not longer than it fails
    // every request-path command, then writes it anyway when the window closes.
    [
      ['gateway'],
      {
        ...redis,
        HOOKGATE_REDIS_COMMAND_TIMEOUT_MS: '20',
        HOOKGATE_REDIS_WRITE_WINDOW_MS: '20',
      },
      'HOOKGATE_REDIS_WRITE_WINDOW_MS must be below HOOKGATE_REDIS_COMMAND_TIMEOUT_MS (20) or 0, not "20"',
    ],
    [
      ['dev'],
      { ...redis, HOOKGATE_REDIS_COMMAND_TIMEOUT_MS: '1' },
      'HOOKGATE_REDIS_WRITE_WINDOW_MS must be below HOOKGATE_REDIS_COMMAND_TIMEOUT_MS (1) or 0, not "1"',
    ],
    [
      ['worker'],
      { ...redis, HOOKGATE_WORKER_CLAIM_IDLE_MS: '500' },
      'HOOKGATE_WORKER_CLAIM_IDLE_MS must be at least 1000',
    ],
    // How log lines wait for stdout (roles/log-settings.ts), in every role.
    [
      ['dev'],
      { HOOKGATE_LOG_BUFFER_BYTES: '1Gi' },
      'HOOKGATE_LOG_BUFFER_BYTES must be a size from 64Ki to 64Mi (e.g. 4Mi), not "1Gi"',
    ],
    [
      ['worker'],
      { ...redis, HOOKGATE_LOG_STALL_MS: '50' },
      'HOOKGATE_LOG_STALL_MS must be an integer from 100 to 20000, not "50"',
    ],
    [
      ['operator'],
      { HOOKGATE_LOG_SYNC_FLUSH_MS: '10000' },
      'HOOKGATE_LOG_SYNC_FLUSH_MS must be an integer from 0 to 4000, not "10000"',
    ],
    // Taken by the client for a Unix socket path (`//x`) and retried for good.
    [
      ['gateway'],
      { REDIS_URL: 'ftp://x', HOOKGATE_ADMIN_AUTH: 'none' },
      'REDIS_URL "ftp://x" must start with redis://, rediss:// or redis+cluster://',
    ],
    // The password is not repeated in the message.
    [
      ['worker'],
      { REDIS_URL: 'redis://app:s3cret@127.0.0.1:6379/cache' },
      'REDIS_URL "redis://app:***@127.0.0.1:6379/cache" names a database that is not a number',
    ],
    [['dev'], { REDIS_URL: 'redis-master:6379/cache' }, 'reads as a Unix socket'],
    // It failed the start with a stack (level 60), after the listeners were made.
    [
      ['dev'],
      { HOOKGATE_TRUSTED_PROXIES: '10.0.0.0/8, 10.0.0.0/99' },
      'HOOKGATE_TRUSTED_PROXIES: invalid trusted proxy address or CIDR: "10.0.0.0/99"',
    ],
    [['dev', '--port', '70000'], {}, 'invalid port "70000"'],
    // Number() would read these as ports: 1000, 80 and 0 (a random one).
    [['dev', '--port', '1e3'], {}, 'invalid port "1e3"'],
    [['dev', '--admin-port', '0x50'], {}, 'invalid admin port "0x50"'],
    [['dev', '--port='], {}, 'invalid port ""'],
    [['dev'], { METRICS_PORT: '9e3' }, 'invalid METRICS_PORT "9e3"'],
    // The public base URL prefixes every webhook URL (status.url, OpenAPI servers).
    [['dev', '--base-url', 'not a url'], {}, '--base-url (HOOKGATE_BASE_URL): "not a url" is not'],
    [
      ['dev'],
      { HOOKGATE_BASE_URL: 'https://hooks.example.com/#x' },
      '"https://hooks.example.com/#x" has a query or a fragment',
    ],
    [['operator'], { HOOKGATE_BASE_URL: 'ftp://hooks.example.com' }, 'is not an absolute http'],
    // What parseArgs refuses is bad usage too, not a stack trace.
    [['dev', '--bogus'], {}, "hookgate: Unknown option '--bogus'"],
    [['--bogus'], {}, "hookgate: Unknown option '--bogus'"],
    [['dev', '--port'], {}, "hookgate: Option '--port <value>' argument missing"],
    [['dev', '--help=yes'], {}, "hookgate: Option '-h, --help' does not take an argument"],
    // The outbound policy: metadata is never allowable, bad entries are named.
    [
      ['worker'],
      { ...redis, HOOKGATE_OUTBOUND_ALLOW: '10.0.0.0/8, 169.254.169.254' },
      "HOOKGATE_OUTBOUND_ALLOW: '169.254.169.254' is a metadata or unspecified address, which is never allowed",
    ],
    [
      ['dev'],
      { HOOKGATE_OUTBOUND_DENY: '10.0.0.0/99' },
      "HOOKGATE_OUTBOUND_DENY: '10.0.0.0/99' is not a CIDR",
    ],
    [
      ['dev'],
      { HOOKGATE_OUTBOUND_NAMESPACES: '[1]' },
      'HOOKGATE_OUTBOUND_NAMESPACES must be a JSON object',
    ],
    [
      ['dev'],
      { HOOKGATE_OUTBOUND_NAMESPACES: '{"shop": {"allow": ["exa mple.com"]}}' },
      "HOOKGATE_OUTBOUND_NAMESPACES.shop: allow: 'exa mple.com' is not a valid host name",
    ],
    [
      ['operator'],
      { HOOKGATE_SECRET_NAMESPACES: 'team-a, Team_B' },
      'HOOKGATE_SECRET_NAMESPACES: "Team_B" is not a namespace name',
    ],
    // The admin listener is never open to the network by accident (docs/security.md A8).
    [['gateway'], redis, 'set HOOKGATE_ADMIN_AUTH (kubernetes, token or none)'],
    [['dev'], { ADMIN_HOST: '0.0.0.0' }, 'set HOOKGATE_ADMIN_AUTH (kubernetes, token or none)'],
    [['dev'], { HOOKGATE_ADMIN_AUTH: 'maybe' }, 'HOOKGATE_ADMIN_AUTH must be one of'],
    [
      ['gateway'],
      { ...redis, HOOKGATE_ADMIN_AUTH: 'none', HOOKGATE_TRACE_CONTEXT: 'yes' },
      'invalid HOOKGATE_TRACE_CONTEXT "yes" (authenticated, all, off)',
    ],
    [
      ['dev'],
      { HOOKGATE_EXPRESSION_ISOLATION: 'thread' },
      'invalid HOOKGATE_EXPRESSION_ISOLATION "thread" (inline, worker)',
    ],
    [
      ['dev'],
      { HOOKGATE_EXPRESSION_ISOLATION: 'worker', HOOKGATE_EXPRESSION_WORKERS: '0' },
      'invalid HOOKGATE_EXPRESSION_WORKERS "0" (a whole number from 1)',
    ],
    [
      ['dev'],
      { HOOKGATE_ADMIN_AUTH: 'token' },
      'HOOKGATE_ADMIN_AUTH=token needs HOOKGATE_ADMIN_TOKEN_FILE',
    ],
    [['dev', '--port', '9000', '--admin-port', '9000'], {}, 'the admin port must differ'],
    [['dev', '--admin-port', 'x'], {}, 'invalid admin port "x"'],
    [
      ['dev'],
      { HOOKGATE_EXECUTION_STORE_BYTES: '12 potatoes' },
      'HOOKGATE_EXECUTION_STORE_BYTES must be a size of at least 1Ki',
    ],
    [['dev'], { HOOKGATE_STORED_BODY_BYTES: '100' }, 'HOOKGATE_STORED_BODY_BYTES must be a size'],
    [['dev'], { HOOKGATE_EXECUTION_TTL_MS: '1h' }, 'HOOKGATE_EXECUTION_TTL_MS must be an integer'],
  ])('%j %j → exit 2: %s', (args, env, message) => {
    const result = run(args, env);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(message);
    expect(result.stderr).toContain('Usage: hookgate <role>');
  });

  it("REDIS_URL's password is never in its message, whatever it holds", () => {
    for (const [url, shown] of [
      ['redis://app:p@ss@127.0.0.1:6379/cache', 'redis://app:***@127.0.0.1:6379/cache'],
      ['redis://:ab/cd@127.0.0.1:6379', 'redis://:***@127.0.0.1:6379'],
      ['ftp://u:hunter2@x', 'ftp://u:***@x'],
      ['rediss://only-a-secret@x/db', 'rediss://***@x/db'],
    ] as const) {
      const result = run(['worker'], { REDIS_URL: url });
      expect(result.status).toBe(2);
      expect(result.stderr).toContain(`REDIS_URL "${shown}"`);
      for (const secret of ['p@ss', 'ss@127', 'ab/cd', 'hunter2', 'only-a-secret'])
        expect(result.stderr).not.toContain(secret);
    }
  });

  it('a REDIS_URL the client reads as it always did is taken: no scheme, a port, a socket path', () => {
    for (const url of [
      'redis-master:6379',
      'localhost',
      '//redis-master:6379/2',
      '6379',
      '/var/run/redis.sock',
      'redis://[::1]:6379/0',
      'rediss://user:p%40ss@redis.example.com:6380',
    ]) {
      expect(redisUrlProblems(url), url).toEqual([]);
    }
  });

  it('a REDIS_URL whose database the client would not read is refused: a path without a scheme, ?db=', () => {
    // Without a scheme the client (ioredis parseURL) reads a path as a Unix socket's:
    // redis-master:6379/2 connected to the socket /2, ENOENT and retried for good.
    expect(redisUrlProblems('redis-master:6379/2')).toEqual([
      'REDIS_URL "redis-master:6379/2" has a path without a scheme, which the client reads as a Unix socket\'s: write redis://redis-master:6379/2 for a database',
    ]);
    expect(redisUrlProblems('localhost/0')[0]).toContain('write redis://localhost/0');
    // A database in the query is the client's too (when the path names none).
    for (const url of ['redis://redis-master:6379?db=cache', '/var/run/redis.sock?db=x']) {
      expect(redisUrlProblems(url), url).toEqual([
        `REDIS_URL ${JSON.stringify(url)} names a database that is not a number`,
      ]);
    }
    for (const url of [
      'redis-master:6379/',
      'redis://h:6379?db=2',
      'redis://h?family=6',
      '/var/run/redis.sock?db=2',
    ]) {
      expect(redisUrlProblems(url), url).toEqual([]);
    }
  });

  it('a bad port is said once, as a port, not again as the base URL made of it', () => {
    const result = run(['dev'], { PORT: 'abc' });
    expect(result.status).toBe(2);
    expect(result.stderr.split('\n')[0]).toBe('hookgate: invalid port "abc"');
  });

  it('--help lists every role', () => {
    const result = run(['--help']);
    expect(result.status).toBe(0);
    for (const role of ['dev', 'operator', 'gateway', 'worker']) {
      expect(result.stdout).toMatch(new RegExp(`^  ${role} `, 'm'));
    }
  });
});
