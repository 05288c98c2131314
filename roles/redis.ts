// The Redis clients of a role, made in one place so every one of them fails fast
// (docs/operations.md, "Redis unavailable"):
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
// Failures are counted by reason on /metrics (hookgate_redis_command_failures_total),
// with the breaker's state (hookgate_redis_circuit_state).
import { Command, Redis, ReplyError, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { CircuitBreaker, type CircuitState } from '../runtime/circuit-breaker.ts';
import { StoreUnavailableError } from '../runtime/errors.ts';

export interface RedisClientSettings {
  /** Longest wait for one command (ms). */
  commandTimeoutMs: number;
  /** Request-path commands failing in a row that open the breaker. */
  breakerFailures: number;
  /** How long the breaker stays open before it probes (ms). */
  breakerOpenMs: number;
}

export const REDIS_CLIENT_DEFAULTS: RedisClientSettings = {
  commandTimeoutMs: 1_000,
  breakerFailures: 5,
  breakerOpenMs: 1_000,
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
  main: Redis;
  /** Request paths: no offline queue, no resend, behind the circuit breaker. */
  requests: Redis;
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
): Redis {
  const redis = new Redis(url, {
    // Commands issued in the same tick share one write (bench/README.md).
    enableAutoPipelining: true,
    commandTimeout: settings.commandTimeoutMs,
    maxRetriesPerRequest: 1,
  });
  observe(redis, logger, health);
  return redis;
}

/** The main client and the request-path client behind a circuit breaker. */
export function redisClients(
  url: string,
  settings: RedisClientSettings,
  logger: Logger,
): RedisClients {
  const health = new RedisHealth();
  const main = mainClient(url, settings, logger, health);
  const requests = main.duplicate({
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
  });
  const send = requests.sendCommand.bind(requests);
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
  requests.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
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
    return send(command, stream);
  };
  // Back before the open period ends: probe at once, so readiness follows quickly.
  requests.on('ready', () => breaker.probeNow());
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
function observe(redis: Redis, logger: Logger, health: RedisHealth): void {
  logConnectionErrors(redis, logger);
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    const reject = command.reject;
    command.reject = (error: Error) => {
      const reason = failureReason(error);
      if (reason) health.failures[reason]++;
      reject(error);
    };
    return send(command, stream);
  };
  // Every connection made from this one (subscribers, blocking reads, the request
  // client) is observed too: without an error listener ioredis prints each reconnect
  // failure as an unhandled error.
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (override?: Partial<RedisOptions>) => {
    const copy = duplicate(override);
    observe(copy, logger, health);
    return copy;
  };
}

/** One warning when a connection fails, one line when it is back; not one per retry. */
function logConnectionErrors(redis: Redis, logger: Logger): void {
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
