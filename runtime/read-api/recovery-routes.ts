// Recovery on the admin listener: the dead-letter list (executions that exhausted their
// retry policy), retrying its entries one by one or in bulk, and replaying any stored
// request as a new execution. Reading needs `get` on the trigger (like executions);
// retrying and replaying need `create` on `webhooktriggers/test`, the right of Send Test
// Request. A request whose trigger was deleted and re-created since is refused unless
// `?allowRecreated=true` (replay.ts). A replay sent with an Idempotency-Key starts one
// execution however often its caller sends it (a client retrying after its answer was
// lost): the same caller, key and request get the first answer again. docs/retries-and-
// replay.md is the reference of these endpoints.
import { randomUUID } from 'node:crypto';
import { decimalInRange } from './query-values.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  nameOfKey,
  namespaceOfKey,
  OPEN_ACCESS,
  readTrigger,
  type AdminAccess,
  type ResourceAttributes,
} from '../admin/access.ts';
import type {
  DeadLetter,
  DeadLetterFilter,
  DeadLetterStore,
  TakenDeadLetter,
} from '../engine/dead-letters.ts';
import { MAX_DEAD_LETTER_LIST } from '../engine/dead-letters.ts';
import type { Execution, StartRequest } from '../engine/ports.ts';
import { HttpProblem, type ErrorCode } from '../errors.ts';
import {
  DEFAULT_IDEMPOTENCY_WINDOW_MS,
  IDEMPOTENCY_HEADER,
} from '../gateway/idempotency/claims.ts';
import {
  MemoryIdempotencyStore,
  parseIdempotencyKey,
  requestFingerprint,
  type IdempotencyStore,
} from '../gateway/idempotency/store.ts';
import { readableNamespaces } from './readable-namespaces.ts';
import { planReplay, type ReplaySources } from './replay.ts';

export interface RecoveryRoutesOptions extends ReplaySources {
  deadLetters: DeadLetterStore;
  access?: AdminAccess;
  /** Told how many dead letters a call retried (the retries counter). */
  retried?: (count: number) => void;
  /**
   * Where a replay's Idempotency-Key is kept, and how long (default 24 h, as the
   * webhooks'): the gateways' idempotency store, so that a retry is known on whichever
   * replica it lands. Default: a store of this process.
   */
  idempotency?: { store: IdempotencyStore; windowMs?: number };
}

/**
 * How long a replay's claim stays in progress at most (a second request with the key
 * meanwhile: 409 idempotency-in-progress): a replay answers once its execution is
 * queued, well within; one whose answer was lost lets the retry in after this.
 */
export const REPLAY_CLAIM_LEASE_MS = 30_000;

/**
 * Where a replay's key is kept: per caller and per execution replayed (a client may use
 * one key for every replay of a run, and two callers choosing the same key each get
 * their own replay, and neither learns of the other's). The caller is the admin API's
 * authenticated user (`subject`); without authentication (the dev server on loopback)
 * every caller is one, under the key's form from before callers were told apart.
 * `replay:` and `replay#` never start a webhook request's key, which starts with its
 * route's `<namespace>/<name>`; the parts are percent-encoded, so the forms never meet.
 */
function replayClaimKey(subject: string | undefined, executionId: string, key: string): string {
  const replayed = `${encodeURIComponent(executionId)}:${key}`;
  return subject === undefined
    ? `replay:${replayed}`
    : `replay#${encodeURIComponent(subject)}:${replayed}`;
}

const FILTERS = ['trigger', 'namespace', 'workflowId', 'limit'];
const REDACTED = '[redacted]';
/** Entries a bulk retry takes at most per call (its default). */
export const DEFAULT_BULK_LIMIT = 100;

function invalid(where: string, name: string, detail: string): HttpProblem {
  return new HttpProblem('HG_ERR_INVALID_PARAMETER', detail, {
    extensions: { errors: [{ pointer: `#/${where}/${name}`, detail }] },
  });
}

/** A dead-letter filter from a query (where = query) or a bulk request body (where = body). */
export function parseDeadLetterFilter(
  raw: unknown,
  where: 'query' | 'body',
  defaultLimit?: number,
): DeadLetterFilter {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw invalid(where, '', 'must be an object');
  const input = raw as Record<string, unknown>;
  for (const name of Object.keys(input)) {
    if (!FILTERS.includes(name)) {
      throw invalid(where, name, `unknown filter ${name}; the filters are ${FILTERS.join(', ')}`);
    }
  }
  const filter: DeadLetterFilter = {};
  const str = (name: string): string | undefined => {
    const v = input[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '' || v.length > 512)
      throw invalid(where, name, `${name} must be a non-empty string`);
    return v;
  };
  const trigger = str('trigger');
  if (trigger !== undefined) {
    if (!/^[^/]+\/[^/]+$/.test(trigger))
      throw invalid(where, 'trigger', 'trigger must be <namespace>/<name>');
    filter.triggerKey = trigger;
  }
  const namespace = str('namespace');
  if (namespace !== undefined) filter.namespace = namespace;
  const workflowId = str('workflowId');
  if (workflowId !== undefined) filter.workflowId = workflowId;
  const limit = input.limit;
  if (limit !== undefined) {
    const n = typeof limit === 'string' ? decimalInRange(limit, 1, MAX_DEAD_LETTER_LIST) : limit;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_DEAD_LETTER_LIST)
      throw invalid(where, 'limit', `limit must be an integer from 1 to ${MAX_DEAD_LETTER_LIST}`);
    filter.limit = n;
  } else if (defaultLimit !== undefined) {
    filter.limit = defaultLimit;
  }
  return filter;
}

/**
 * `allowRecreated` of a retry's or a replay's query: `true` sends a request whose
 * trigger was deleted and re-created since it came in (another uid) through the new
 * one, without its callback (ADR 0018, amended 2026-11-28); absent or `false`: refused.
 */
export function parseAllowRecreated(query: unknown): boolean {
  const value = (query as Record<string, unknown> | undefined)?.allowRecreated;
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  throw invalid('query', 'allowRecreated', 'allowRecreated must be true or false');
}

/** The admin links of an execution started here (the caller's public links need a token). */
function adminLinks(id: string) {
  const self = `/api/executions/${encodeURIComponent(id)}`;
  return { self, events: `${self}/events` };
}

/**
 * An entry as the admin API shows it: its callback URL reads [redacted], as in the stored
 * request and the live stream (the caller's URL often carries the receiver's token, and
 * reading the trigger is not being its caller). The entry keeps it: a retry delivers there.
 */
function shown(entry: DeadLetter): DeadLetter {
  return entry.callbackUrl === undefined ? entry : { ...entry, callbackUrl: REDACTED };
}

/**
 * A retry's or replay's 202 body. `deadLetter: "taken"`: a replay that took the
 * execution's dead-letter entry out of the list (it stands for its retry).
 */
function acceptedBody(
  execution: Pick<Execution, 'id' | 'status'>,
  replayOf: string,
  tookDeadLetter = false,
) {
  return {
    executionId: execution.id,
    status: execution.status,
    replayOf,
    ...(tookDeadLetter ? { deadLetter: 'taken' as const } : {}),
    links: adminLinks(execution.id),
  };
}

function accepted(
  reply: FastifyReply,
  execution: Pick<Execution, 'id' | 'status'>,
  replayOf: string,
  tookDeadLetter = false,
) {
  const body = acceptedBody(execution, replayOf, tookDeadLetter);
  return reply.code(202).header('location', body.links.self).send(body);
}

export function recoveryRoutes(app: FastifyInstance, options: RecoveryRoutesOptions): void {
  const { engine, deadLetters } = options;
  const access = options.access ?? OPEN_ACCESS;
  const idempotency = options.idempotency ?? { store: new MemoryIdempotencyStore() };
  const keyWindowMs = idempotency.windowMs ?? DEFAULT_IDEMPOTENCY_WINDOW_MS;

  const retryRight = (namespace?: string, name?: string): ResourceAttributes => ({
    verb: 'create',
    resource: 'webhooktriggers',
    subresource: 'test',
    ...(namespace !== undefined ? { namespace } : {}),
    ...(name !== undefined ? { name } : {}),
  });
  const mayRetry = (request: FastifyRequest, namespace?: string, name?: string) =>
    access.require(request, retryRight(namespace, name));

  /**
   * An id of a trigger the user may neither read nor retry (replay) is answered as an
   * unknown id, `unknown` (ADR 0018, amended 2026-11-28 (day)): a 403, or a 409 about
   * the trigger, told a caller of one namespace that the id exists in another.
   * `retrying`: the route retries or replays, so its right also shows the id (then 403
   * if the user may read but not retry).
   */
  const visibleOr = (
    request: FastifyRequest,
    triggerKey: string,
    unknown: HttpProblem,
    retrying: boolean,
  ) =>
    access.requireVisible(
      request,
      unknown,
      readTrigger(triggerKey),
      ...(retrying ? [retryRight(namespaceOfKey(triggerKey), nameOfKey(triggerKey))] : []),
    );

  /**
   * The original execution of an entry; an entry whose record is gone is dropped. The
   * store keeps a dead-lettered record past its entry's lifetime and holds it while the
   * entry is listed (ADR 0039): gone only for an entry listed before that hold (an
   * upgrade), or one the list lost track of.
   */
  const originalOf = async (entry: DeadLetter): Promise<Execution> => {
    const original = await engine.get(entry.executionId);
    if (original) return original;
    await deadLetters.take(entry.executionId);
    throw new HttpProblem(
      'HG_ERR_EXECUTION_NOT_FOUND',
      `The record of ${entry.executionId} is gone (expired, or dropped for room before dead letters held their records); its dead-letter entry was dropped`,
    );
  };

  /**
   * A start that stood for a taken entry could not start: the entry goes back. Only if
   * its record went meanwhile (it is held: expired, or dropped by the hold's own bound)
   * is it not put back: said, since nothing else will.
   */
  const putBack = async (taken: TakenDeadLetter): Promise<void> => {
    const listed = await deadLetters.add(taken.entry);
    if (!listed) {
      app.log.error(
        { executionId: taken.entry.executionId },
        'the dead letter whose retry could not start is not listed again: its record is gone',
      );
    }
  };

  /**
   * The execution `id` whose start failed with `error`, if it is in the store all the
   * same (it started: said in the log); undefined if not, or if the store cannot tell.
   */
  const startedAnyway = async (id: string, error: unknown): Promise<Execution | undefined> => {
    const found = await engine.get(id).catch(() => undefined);
    if (found) {
      app.log.warn(
        { executionId: id, replayOf: found.replayOf, err: error },
        'a retry or replay whose start failed is in the store: it started, and stands',
      );
    }
    return found;
  };

  /**
   * Starts `request` for the taken entry `taken` (if any), under an id chosen here first
   * (kept in `request.input.metadata.executionId`). A start that fails puts the entry
   * back, unless the execution of that id is in the store all the same (ADR 0018,
   * amended 2026-11-28 (day)): a queued start writes the record and the job in one
   * script, so one whose answer was lost (a Redis timeout after the script ran, the
   * replicas' acknowledgement missing) did start, and an entry put back would run the
   * request again and call its caller back twice. Then it answers as started, and the
   * entry is released as a started retry's is. A lookup that fails too (Redis away)
   * cannot tell: the entry goes back, as before.
   */
  const startStandingFor = async (
    request: StartRequest,
    taken: TakenDeadLetter | undefined,
    settled?: (error: unknown) => Pick<Execution, 'id' | 'status'> | undefined,
  ): Promise<Pick<Execution, 'id' | 'status'>> => {
    const id = (request.input.metadata.executionId ||= randomUUID());
    let started: Pick<Execution, 'id' | 'status'>;
    try {
      started = await engine.start(request);
    } catch (error) {
      // `settled`: an error that says the run is over already (a keyed replay's discard).
      const found = settled?.(error) ?? (await startedAnyway(id, error));
      if (!found) {
        if (taken) await putBack(taken);
        throw error;
      }
      started = found;
    }
    // Started: the record is an ordinary finished one again. If this fails, it stays
    // held until it expires (or the hold's bound drops it); the retry stands.
    if (taken) await deadLetters.release(taken).catch(() => undefined);
    return started;
  };

  /**
   * Retries one entry: checks it can be replayed, takes it out (only one caller gets
   * it), starts the new execution; the entry goes back if the start fails (and its
   * execution is not in the store: startStandingFor).
   * `allowRecreated`: also when its trigger was re-created since, then without callback.
   */
  const retryEntry = async (
    entry: DeadLetter,
    allowRecreated: boolean,
  ): Promise<Pick<Execution, 'id' | 'status'>> => {
    const original = await originalOf(entry);
    const plan = await planReplay(options, original, {
      ...(entry.callbackUrl ? { callbackUrl: entry.callbackUrl } : {}),
      allowRecreated,
    });
    const taken = await deadLetters.take(entry.executionId);
    if (!taken) {
      throw new HttpProblem(
        'HG_ERR_DEAD_LETTER_NOT_FOUND',
        `${entry.executionId} is not in the dead-letter list (already retried or replayed?)`,
      );
    }
    // Its record stays held until the retry has started: one that cannot start puts
    // the entry back, with its record, however full the store got meanwhile.
    return startStandingFor(plan.request, taken);
  };

  /**
   * The dead-letter entry a replay of `id` stands for, taken out of the list as a retry
   * takes it (ADR 0018, amended 2026-11-28 (day)): left listed, a later retry ran the
   * request again and called its caller back. The take is tried whatever the look
   * before it found, so an entry listed in between (its execution dead-lettered just
   * then) is taken too, not left for a retry to run again (amended 2026-11-28 (night)).
   * Listed at the look but taken by a retry (or replay) before this take: refused, since
   * that one stands for it; so a retry and a replay at once start one execution. Listed
   * at neither: undefined. The caller puts it back if its start fails, and releases it
   * once started, as a retry does.
   */
  const entryReplayed = async (id: string): Promise<TakenDeadLetter | undefined> => {
    const listed = await deadLetters.get(id);
    const taken = await deadLetters.take(id);
    if (taken || !listed) return taken;
    throw new HttpProblem(
      'HG_ERR_REPLAY_DEAD_LETTER_TAKEN',
      `The dead-letter entry of ${id} was taken by a retry or replay at the same time: that one runs it again`,
      { extensions: { executionId: id } },
    );
  };

  /** The entry `id`, if listed and the user may see it (visibleOr); else 404. */
  const entryOr404 = async (
    request: FastifyRequest,
    id: string,
    retrying: boolean,
  ): Promise<DeadLetter> => {
    const unknown = new HttpProblem(
      'HG_ERR_DEAD_LETTER_NOT_FOUND',
      `${id} is not in the dead-letter list`,
    );
    const entry = await deadLetters.get(id);
    if (!entry) return access.throwUnknown(request, unknown);
    await visibleOr(request, entry.triggerKey, unknown, retrying);
    return entry;
  };

  app.get('/api/dead-letters', async (request) => {
    const filter = parseDeadLetterFilter(request.query, 'query');
    const namespaceReadable = await readableNamespaces(access, request);
    const items = await deadLetters.list({
      ...filter,
      ...(namespaceReadable ? { namespaceReadable } : {}),
    });
    if (!namespaceReadable) return { items: items.map(shown) };
    // Asked again (each namespace's answer is kept): a store that ignored the field would
    // list every namespace, so the route does not rely on it for that.
    const readable: DeadLetter[] = [];
    for (const e of items) if (await namespaceReadable(e.namespace)) readable.push(shown(e));
    return { items: readable };
  });

  app.get('/api/dead-letters/:id', async (request) => {
    const { id } = request.params as { id: string };
    return shown(await entryOr404(request, id, false));
  });

  app.post('/api/dead-letters/:id/retry', async (request, reply) => {
    const { id } = request.params as { id: string };
    const allowRecreated = parseAllowRecreated(request.query);
    const entry = await entryOr404(request, id, true);
    await mayRetry(request, entry.namespace, nameOfKey(entry.triggerKey));
    const execution = await retryEntry(entry, allowRecreated);
    options.retried?.(1);
    return accepted(reply, execution, entry.executionId);
  });

  // Bulk: every entry matching the filter (at most `limit`, default 100) is retried;
  // the answer counts what happened. Entries refused stay listed; retried ones are gone,
  // so calling again retries nothing twice.
  app.post('/api/dead-letters/retry', async (request) => {
    const filter = parseDeadLetterFilter(request.body, 'body', DEFAULT_BULK_LIMIT);
    const allowRecreated = parseAllowRecreated(request.query);
    const namespace =
      filter.triggerKey !== undefined ? namespaceOfKey(filter.triggerKey) : filter.namespace;
    if (filter.triggerKey !== undefined && filter.namespace !== undefined) {
      if (filter.namespace !== namespace) {
        throw invalid('body', 'namespace', 'namespace and trigger name different namespaces');
      }
    }
    await mayRetry(
      request,
      namespace,
      filter.triggerKey !== undefined ? nameOfKey(filter.triggerKey) : undefined,
    );
    const entries = await deadLetters.list(filter);
    const retried: { replayOf: string; executionId: string }[] = [];
    const refused: Partial<Record<ErrorCode, number>> = {};
    const failures: { executionId: string; code: ErrorCode; detail: string }[] = [];
    for (const entry of entries) {
      try {
        const execution = await retryEntry(entry, allowRecreated);
        retried.push({ replayOf: entry.executionId, executionId: execution.id });
      } catch (error) {
        if (!(error instanceof HttpProblem)) throw error;
        refused[error.code] = (refused[error.code] ?? 0) + 1;
        failures.push({ executionId: entry.executionId, code: error.code, detail: error.message });
      }
    }
    if (retried.length > 0) options.retried?.(retried.length);
    return {
      matched: entries.length,
      retried: retried.length,
      refused,
      executions: retried,
      failures,
    };
  });

  /**
   * A replay under an Idempotency-Key: the key's first answer again (Idempotent-Replayed:
   * true), 409 while that first one is in progress, 422 for the key with another
   * request (allowRecreated or not); else the replay, its answer kept under the key. Its
   * execution id is chosen before the key is claimed and kept with the claim (begin's
   * hint): one that refused or did not answer gives the key back naming that id, one
   * still waiting for the engine when its lease ran out leaves it on the claim, and the
   * retry starts that same one (which exists already, or not: ExecutionEngine.start
   * runs an id once).
   */
  const replayOnce = async (
    request: FastifyRequest,
    reply: FastifyReply,
    original: Execution,
    allowRecreated: boolean,
    key: string,
  ) => {
    const claimKey = replayClaimKey(access.subject(request), original.id, key);
    const fingerprint = requestFingerprint(
      'POST',
      `/api/executions/${original.id}/replay?allowRecreated=${String(allowRecreated)}`,
      undefined,
    );
    const { store } = idempotency;
    // Kept with the claim from the start: an engine that answers after the claim's lease
    // ran out (REPLAY_CLAIM_LEASE_MS) lets a retry with the key in, and that retry must
    // start this same id, not another (ADR 0018, amended 2026-11-28 (day)).
    const chosen = { executionId: randomUUID(), token: '' };
    const claim = await store.begin(
      claimKey,
      fingerprint,
      keyWindowMs,
      REPLAY_CLAIM_LEASE_MS,
      chosen,
    );
    if (claim.state === 'replay') {
      const { record } = claim;
      return reply
        .code(record.status)
        .headers(record.headers)
        .header('idempotent-replayed', 'true')
        .send(record.body);
    }
    if (claim.state === 'in-progress') {
      throw new HttpProblem(
        'HG_ERR_IDEMPOTENCY_IN_PROGRESS',
        'A replay with this Idempotency-Key is still being processed',
      );
    }
    if (claim.state === 'mismatch') {
      throw new HttpProblem(
        'HG_ERR_IDEMPOTENCY_KEY_REUSED',
        'This Idempotency-Key was used to replay this execution with allowRecreated set otherwise',
      );
    }
    const { owner, resume } = claim;
    let plan;
    let taken: TakenDeadLetter | undefined;
    try {
      plan = await planReplay(options, original, { allowRecreated });
      taken = await entryReplayed(original.id);
    } catch (error) {
      // Given back (free, or with the hint it came with); a store away must not hide why.
      await store.abandon(claimKey, owner, resume).catch(() => false);
      throw error;
    }
    const executionId = (resume ?? chosen).executionId;
    plan.request.input.metadata.executionId = executionId;
    // A success discarded before the retry (ADR 0041) leaves a tombstone the retry finds.
    plan.request.idempotencyWindowMs = keyWindowMs;
    if (resume) plan.request.hinted = true;
    let execution: Pick<Execution, 'id' | 'status'>;
    try {
      execution = await startStandingFor(plan.request, taken, (error) =>
        resume && error instanceof HttpProblem && error.code === 'HG_ERR_EXECUTION_DISCARDED'
          ? { id: executionId, status: 'succeeded' }
          : undefined,
      );
    } catch (error) {
      await store.abandon(claimKey, owner, { executionId, token: '' }).catch(() => false);
      throw error;
    }
    const body = acceptedBody(execution, original.id, taken !== undefined);
    const { links } = body;
    // Not kept (the store away, or the lease ran out and a retry holds the key): the
    // replay stands and is answered; the key given back names its id if it still can, so
    // that a retry starts this same execution rather than another.
    const record = {
      status: 202,
      headers: { location: links.self },
      body,
      executionId: execution.id,
    };
    if (!(await store.complete(claimKey, owner, record).catch(() => false))) {
      app.log.warn({ executionId: execution.id }, "a replay's Idempotency-Key answer was not kept");
      await store
        .abandon(claimKey, owner, { executionId: execution.id, token: '' })
        .catch(() => false);
    }
    return reply.code(202).header('location', links.self).send(body);
  };

  app.post('/api/executions/:id/replay', async (request, reply) => {
    const { id } = request.params as { id: string };
    const allowRecreated = parseAllowRecreated(request.query);
    const header = request.headers[IDEMPOTENCY_HEADER];
    const key =
      header === undefined
        ? undefined
        : parseIdempotencyKey(Array.isArray(header) ? header.join(',') : header);
    const unknown = new HttpProblem('HG_ERR_EXECUTION_NOT_FOUND', `No execution ${id}`);
    const original = await engine.get(id);
    if (!original) return access.throwUnknown(request, unknown);
    await visibleOr(request, original.triggerKey, unknown, true);
    await mayRetry(request, namespaceOfKey(original.triggerKey), nameOfKey(original.triggerKey));
    if (key !== undefined) return replayOnce(request, reply, original, allowRecreated, key);
    const plan = await planReplay(options, original, { allowRecreated });
    // The replay stands for the execution's dead-letter entry, if listed (entryReplayed).
    const taken = await entryReplayed(original.id);
    const execution = await startStandingFor(plan.request, taken);
    return accepted(reply, execution, original.id, taken !== undefined);
  });
}
