// What a Redis URL may be, as the client (ioredis' parseURL) reads it: the roles check
// REDIS_URL with it at start (roles/settings.ts), the Pulumi program its redis.url at
// preview (infra/plan.ts), so that neither takes what the other refuses.

/** A Redis Cluster's seeds (roles/redis.ts parses them). */
const CLUSTER = /^rediss?\+cluster:\/\//i;

/**
 * Why a Redis URL is refused, in words that follow it, or undefined: it names one server
 * (`redis://` or `rediss://`, an optional database number; without a scheme, a port
 * alone or a Unix socket's path, as the client reads them) or a cluster
 * (`redis+cluster://`, whose seeds are checked where they are parsed). Anything else was
 * taken by the client for a Unix socket path (`ftp://x` became the socket `//x`) and
 * retried for good, `connect ENOENT` in the log; a database that is not a number was
 * dropped.
 */
export function redisUrlProblem(url: string): string | undefined {
  if (CLUSTER.test(url)) return undefined;
  // What the client takes as it is: a port alone, a Unix socket's path (whose ?db= it reads).
  if (/^\d+$/.test(url)) return undefined;
  if (url.startsWith('/') && !url.startsWith('//')) {
    return isDatabase(socketDatabase(url)) ? undefined : NOT_A_DATABASE;
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'redis' && scheme !== 'rediss')
    return 'must start with redis://, rediss:// or redis+cluster://';
  // Without a scheme (`redis-master:6379`, `//host`) the client reads redis://: so do we.
  const asUrl = scheme ? url : url.startsWith('//') ? `redis:${url}` : `redis://${url}`;
  let parsed: URL;
  try {
    parsed = new URL(asUrl);
  } catch {
    return 'is not a URL (redis://host:port, rediss://host:port or redis+cluster://…)';
  }
  return hostAndDatabaseProblem(url, scheme, parsed);
}

/**
 * What is wrong with REDIS_URL `url` (read as `parsed`) past its scheme: no host, a path
 * the client reads as a Unix socket's, a database that is not a number; or undefined.
 */
function hostAndDatabaseProblem(
  url: string,
  scheme: string | undefined,
  parsed: URL,
): string | undefined {
  if (!parsed.hostname) return 'names no host';
  // Without a scheme the client reads a path as a Unix socket's (redis-master:6379/2 was
  // the socket /2, connect ENOENT retried for good), not as a database.
  if (scheme === undefined && !url.startsWith('//') && parsed.pathname.length > 1) {
    return `has a path without a scheme, which the client reads as a Unix socket's: write redis://${redactedRedisUrl(url)} for a database`;
  }
  if (!/^\/?(\d+)?$/.test(parsed.pathname)) return NOT_A_DATABASE;
  // A database in the query counts when the path names none (the client reads both).
  const db = parsed.pathname.length > 1 ? null : parsed.searchParams.get('db');
  return isDatabase(db) ? undefined : NOT_A_DATABASE;
}

const NOT_A_DATABASE = 'names a database that is not a number';

/** The `?db=` of a Unix socket's path, if any. */
function socketDatabase(path: string): string | null {
  const query = path.indexOf('?');
  return query < 0 ? null : new URLSearchParams(path.slice(query + 1)).get('db');
}

/** A `?db=` the client can select: none, or a number. */
function isDatabase(db: string | null): boolean {
  return db === null || /^\d+$/.test(db);
}

/**
 * A Redis URL without its password, for a message: everything between the scheme and
 * the last `@` but a user name before a `:` (a password may hold `@` or `/`; a user
 * info without `:` may be a password alone).
 */
export function redactedRedisUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? '';
  const rest = url.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  if (at < 0) return url;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const user = colon < 0 ? '' : `${userinfo.slice(0, colon)}:`;
  return `${scheme}${user}***${rest.slice(at)}`;
}
