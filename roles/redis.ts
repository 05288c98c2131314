// The Redis clients of a role, made in one place so every one of them fails fast
// (docs/availability.md, "Redis unavailable"):
//
// - `commandTimeout` on every command (HOOKGATE_REDIS_COMMAND_TIMEOUT_MS): no caller
//   waits longer for Redis, connected or not. Blocking reads (the worker's XREADGROUP
//   BLOCK) are bounded by `blockingTimeout` instead.
// - The main client keeps ioredis' offline queue: background work (route loads,
//   subscriptions, gateway reports, a worker's saves and acknowledgements) waits for
//   a reconnect within the command timeout, and is sent in order once Redis is back.
//   `maxRetriesPerRequest: 1` flushes that queue at the first failed reconnect.
// - The request-path client (`requests`) has no offline queue and does not resend
//   unanswered commands after a reconnect: a webhook's enqueue, an Idempotency-Key
//   claim or a rate-limit count either reaches Redis now or fails now, and is never
//   sent later to a caller that already got its 503. A circuit breaker in front of
//   it refuses every command without sending it once `failureThreshold` commands in
//   a row failed, and closes again when a PING answers.
//
// A Redis Cluster instead of one server: REDIS_URL=redis+cluster://[:password@]host:port,host:port
// (any few masters or replicas as seeds; the client learns the rest). Every client of
// a role is then an ioredis Cluster with the same options per node (commandTimeout,
// offline queue, retries), see connectRedis and duplicateWith.
//
// Failures are counted by reason on /metrics (hookgate_redis_command_failures_total),
// with the breaker's state (hookgate_redis_circuit_state).
import { Cluster, Command, Redis, ReplyError, type RedisOptions } from 'ioredis';
import type { RedisClient } from '../api/records/redis-client.ts';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { CircuitBreaker, type CircuitState } from '../runtime/circuit-breaker.ts';
import { StoreUnavailableError } from '../runtime/errors.ts';
import { coalesceWrites } from './redis-write-window.ts';

export interface RedisClientSettings {
  /** Longest wait for one command (ms). */
  commandTimeoutMs: number;
  /** Request-path commands failing in a row that open the breaker. */
  breakerFailures: number;
  /** How long the breaker stays open before it probes (ms). */
  breakerOpenMs: number;
  /**
   * A request-path command that comes within this long (ms) of another waits, so that
   * they leave in one socket write (redis-write-window.ts); 0 writes each at once.
   */
  writeWindowMs: number;
}

export const REDIS_CLIENT_DEFAULTS: RedisClientSettings = {
  commandTimeoutMs: 1_000,
  breakerFailures: 5,
  breakerOpenMs: 1_000,
  writeWindowMs: 1,
};

export type FailureReason = 'timeout' | 'connection' | 'unavailable' | 'circuit_open';
const REASONS: FailureReason[] = ['timeout', 'connection', 'unavailable', 'circuit_open'];
const STATE_VALUE: Record<CircuitState, number> = { closed: 0, 'half-open': 1, open: 2 };

/** What the clients of one process count, read by /metrics when it is scraped. */
export class RedisHealth {
  readonly failures: Record<FailureReason, number> = {
    timeout: 0,
    connection: 0,
    unavailable: 0,
    circuit_open: 0,
  };
  breaker: CircuitBreaker | undefined;

  register(registry: Registry): void {
    const failures = this.failures;
    const breaker = () => this.breaker;
    new Counter({
      name: 'hookgate_redis_command_failures_total',
      help:
        'Redis commands that failed without an answer, by reason: timeout (no answer ' +
        'within the command timeout), connection (not connected, connection lost), ' +
        'unavailable (Redis answered LOADING/BUSY/MASTERDOWN), circuit_open (refused ' +
        'by the open circuit breaker without being sent)',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        for (const reason of REASONS) this.inc({ reason }, failures[reason]);
      },
    });
    new Gauge({
      name: 'hookgate_redis_circuit_state',
      help: 'State of the circuit breaker in front of the request-path Redis client: 0 closed, 1 half-open, 2 open',
      registers: [registry],
      collect() {
        this.set(STATE_VALUE[breaker()?.state ?? 'closed']);
      },
    });
  }
}

export interface RedisClients {
  /** Background work and subscriptions (offline queue on, bounded by the timeout). */
  main: RedisClient;
  /** Request paths: no offline queue, no resend, behind the circuit breaker. */
  requests: RedisClient;
  breaker: CircuitBreaker;
  health: RedisHealth;
  /** Whether both connections are up and the breaker is closed (readiness). */
  readiness(): { ready: boolean; status: string };
  disconnect(): void;
}

/** The main client of a role: bounded commands, failures counted, errors logged once. */
export function mainClient(
  url: string,
  settings: RedisClientSettings,
  logger: Logger,
  health: RedisHealth = new RedisHealth(),
): RedisClient {
  const redis = connectRedis(url, {
    // No auto-pipelining: each command is written at once. ioredis sends an auto-pipeline
    // from setImmediate, a turn later: the worker, latency-bound, ran 6,000-7,700
    // executions/s without it against 4,500-5,250 with (ADR 0010 gives the other side).
    commandTimeout: settings.commandTimeoutMs,
    maxRetriesPerRequest: 1,
  });
  observe(redis, logger, health);
  return redis;
}

const CLUSTER_SCHEME = /^rediss?\+cluster:\/\//;

/** Whether REDIS_URL names a Redis Cluster (`redis+cluster://host:port,host:port`). */
export function isClusterUrl(url: string): boolean {
  return CLUSTER_SCHEME.test(url);
}

/**
 * The seeds and credentials of a `redis+cluster://[user[:password]@]host:port,...` URL.
 * Throws on a URL without a host:port.
 */
export function parseClusterUrl(url: string): {
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
} {
  const tls = url.startsWith('rediss+');
  let rest = url.replace(CLUSTER_SCHEME, '').replace(/\/.*$/, '');
  let username: string | undefined;
  let password: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    const auth = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = auth.indexOf(':');
    const user = decodeURIComponent(colon >= 0 ? auth.slice(0, colon) : auth);
    if (user) username = user;
    if (colon >= 0) password = decodeURIComponent(auth.slice(colon + 1));
  }
  const nodes = rest
    .split(',')
    .filter((n) => n !== '')
    .map((node) => {
      const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(node);
      if (!match?.[1]) throw new Error(`REDIS_URL: bad cluster node "${node}"`);
      return { host: match[1].replace(/^\[|\]$/g, ''), port: Number(match[2] ?? 6379) };
    });
  if (nodes.length === 0) throw new Error('REDIS_URL: a redis+cluster:// URL names no node');
  return {
    nodes,
    ...(username ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
    tls,
  };
}

/**
 * A client for `url`: one server (`redis://`), or a Redis Cluster
 * (`redis+cluster://`) whose node connections all get `options`.
 */
export function connectRedis(url: string, options: RedisOptions): RedisClient {
  if (!isClusterUrl(url)) return new Redis(url, options);
  const { nodes, username, password, tls } = parseClusterUrl(url);
  const { enableOfflineQueue, enableAutoPipelining, ...perNode } = options;
  return new Cluster(nodes, {
    redisOptions: {
      ...perNode,
      ...(username ? { username } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(tls ? { tls: {} } : {}),
    },
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    ...(enableAutoPipelining !== undefined ? { enableAutoPipelining } : {}),
  });
}

/**
 * Another connection like `client` with some options changed: for a Cluster the
 * changes apply to every node connection (and the offline queue to the cluster).
 */
export function duplicateWith(client: RedisClient, override: Partial<RedisOptions>): RedisClient {
  if (!client.isCluster) return (client as Redis).duplicate(override);
  const cluster = client as Cluster;
  const { enableOfflineQueue, ...perNode } = override;
  return cluster.duplicate([], {
    ...cluster.options,
    redisOptions: { ...cluster.options.redisOptions, ...perNode },
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
  });
}

/** The main client and the request-path client behind a circuit breaker. */
export function redisClients(
  url: string,
  settings: RedisClientSettings,
  logger: Logger,
): RedisClients {
  const health = new RedisHealth();
  const main = mainClient(url, settings, logger, health);
  const requests = duplicateWith(main, {
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
  });
  // Typed as one server's; a Cluster's sendCommand takes (command, stream, node) and is
  // wrapped the same way (the extra arguments are passed through).
  const wrapped = requests as Redis;
  const send = wrapped.sendCommand.bind(wrapped) as (...args: unknown[]) => Promise<unknown>;
  const breaker = new CircuitBreaker({
    failureThreshold: settings.breakerFailures,
    openMs: settings.breakerOpenMs,
    // Straight to the connection: the probe is the one command the breaker lets by.
    probe: () => {
      const ping = new Command('ping', []);
      void send(ping);
      return ping.promise;
    },
    onStateChange: (state, previous) => {
      const log = state === 'open' ? logger.warn.bind(logger) : logger.info.bind(logger);
      log({ state, previous }, `Redis circuit breaker ${state}`);
    },
  });
  health.breaker = breaker;
  const retryAfterSeconds = Math.ceil(settings.breakerOpenMs / 1000);
  wrapped.sendCommand = ((command: Command, ...rest: unknown[]) => {
    // Only once connected: the handshake (the ready check's INFO) must pass, or the
    // connection would never be ready again while the breaker waits for it.
    if (requests.status === 'ready' && !breaker.allows()) {
      health.failures.circuit_open++;
      command.reject(
        new StoreUnavailableError('Redis circuit breaker open', { retryAfterSeconds }),
      );
      return command.promise;
    }
    const reject = command.reject;
    command.reject = (error: Error) => {
      const reason = failureReason(error);
      if (reason) {
        breaker.failure();
        reject(
          new StoreUnavailableError(`Redis: ${error.message}`, { cause: error, retryAfterSeconds }),
        );
      } else {
        breaker.success();
        reject(error);
      }
    };
    const resolve = command.resolve;
    command.resolve = (value: unknown) => {
      breaker.success();
      resolve(value);
    };
    return send(command, ...rest);
  }) as Redis['sendCommand'];
  // Back before the open period ends: probe at once, so readiness follows quickly.
  requests.on('ready', () => breaker.probeNow());
  coalesceWrites(requests, settings.writeWindowMs);
  return {
    main,
    requests,
    breaker,
    health,
    readiness() {
      if (main.status !== 'ready') return { ready: false, status: `redis ${main.status}` };
      if (requests.status !== 'ready') return { ready: false, status: `redis ${requests.status}` };
      if (breaker.state !== 'closed')
        return { ready: false, status: `redis circuit breaker ${breaker.state}` };
      return { ready: true, status: 'ready' };
    },
    disconnect() {
      breaker.stop();
      requests.disconnect();
      main.disconnect();
    },
  };
}

/**
 * The reason a command failed without Redis' answer, or undefined for an answer
 * (a ReplyError such as WRONGTYPE or NOSCRIPT is Redis working).
 */
export function failureReason(error: unknown): FailureReason | undefined {
  if (error instanceof StoreUnavailableError) return undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof ReplyError) {
    return /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN)\b/.test(message) ? 'unavailable' : undefined;
  }
  return message === 'Command timed out' ? 'timeout' : 'connection';
}

/** Counts failures of every command of `redis` and of its duplicates; logs outages once. */
function observe(client: RedisClient, logger: Logger, health: RedisHealth): void {
  logConnectionErrors(client, logger);
  // Typed as one server's client; a Cluster's sendCommand and duplicate take other
  // arguments, passed through unchanged.
  const redis = client as Redis;
  const send = redis.sendCommand.bind(redis) as (...args: unknown[]) => Promise<unknown>;
  redis.sendCommand = (command: Command, ...rest: unknown[]) => {
    const reject = command.reject;
    command.reject = (error: Error) => {
      const reason = failureReason(error);
      if (reason) health.failures[reason]++;
      reject(error);
    };
    return send(command, ...rest);
  };
  // Every connection made from this one (subscribers, blocking reads, the request
  // client) is observed too: without an error listener ioredis prints each reconnect
  // failure as an unhandled error.
  const duplicate = redis.duplicate.bind(redis) as (...args: unknown[]) => RedisClient;
  redis.duplicate = ((...args: unknown[]) => {
    const copy = duplicate(...args);
    observe(copy, logger, health);
    return copy;
  }) as Redis['duplicate'];
}

/** One warning when a connection fails, one line when it is back; not one per retry. */
function logConnectionErrors(redis: RedisClient, logger: Logger): void {
  let down = false;
  redis.on('error', (err: Error) => {
    if (down) return;
    down = true;
    logger.warn({ err: err.message }, 'Redis unreachable; retrying');
  });
  redis.on('ready', () => {
    if (down) logger.info('Redis reachable again');
    down = false;
  });
}
