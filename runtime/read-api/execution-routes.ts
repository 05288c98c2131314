// Executions: the spec's "Flow Management, Event Driven Workflows" listing with
// per-run logs, and each execution's event channel (SSE, resumable with Last-Event-ID).
import { decimalInRange, rfc3339 } from './query-values.ts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { namespaceOfKey, OPEN_ACCESS, readTrigger, type AdminAccess } from '../admin/access.ts';
import { HttpProblem } from '../errors.ts';
import { decodeCursor, DEFAULT_PAGE_BYTES } from '../engine/execution-store.ts';
import type {
  Execution,
  ExecutionEngine,
  ExecutionFilter,
  ExecutionStatus,
} from '../engine/ports.ts';
import { serveExecutionEvents } from '../gateway/execution-links.ts';
import { readableNamespaces } from './readable-namespaces.ts';

const STATUSES: ExecutionStatus[] = ['queued', 'running', 'succeeded', 'failed'];
const FILTERS = ['workflowId', 'trigger', 'status', 'since', 'until', 'limit', 'cursor'];

function invalid(name: string, detail: string): HttpProblem {
  return new HttpProblem('HG_ERR_INVALID_PARAMETER', detail, {
    extensions: { errors: [{ pointer: `#/query/${name}`, detail }] },
  });
}

export function parseExecutionFilter(query: Record<string, unknown>): ExecutionFilter {
  const filter: ExecutionFilter = {};
  // A misspelt filter would silently list everything: refuse it instead.
  for (const name of Object.keys(query)) {
    if (!FILTERS.includes(name)) {
      throw invalid(name, `unknown filter ${name}; the filters are ${FILTERS.join(', ')}`);
    }
  }
  const str = (name: string) => {
    const v = query[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '' || v.length > 512)
      throw invalid(name, `${name} must be a non-empty string`);
    return v;
  };
  const workflowId = str('workflowId');
  const triggerKey = str('trigger');
  const status = str('status');
  const since = str('since');
  const until = str('until');
  const limit = str('limit');
  const cursor = str('cursor');
  if (workflowId) filter.workflowId = workflowId;
  if (triggerKey) filter.triggerKey = triggerKey;
  if (status) {
    if (!STATUSES.includes(status as ExecutionStatus))
      throw invalid('status', `status must be one of ${STATUSES.join(', ')}`);
    filter.status = status as ExecutionStatus;
  }
  for (const [name, value] of [
    ['since', since],
    ['until', until],
  ] as const) {
    if (value === undefined) continue;
    const at = rfc3339(value);
    if (at === undefined)
      throw invalid(name, `${name} must be an RFC 3339 timestamp, e.g. 2026-11-27T12:00:00Z`);
    filter[name] = at;
  }
  if (limit !== undefined) {
    const n = decimalInRange(limit, 1, 1000);
    if (n === undefined) throw invalid('limit', 'limit must be an integer from 1 to 1000');
    filter.limit = n;
  }
  if (cursor !== undefined) {
    if (!decodeCursor(cursor))
      throw invalid('cursor', 'cursor must be the `next` of an earlier page, unchanged');
    filter.cursor = cursor;
  }
  return filter;
}

/**
 * An execution as the admin API shows it: without the caller's link digest, nor the
 * trigger's uid (kept for callback signing, ADR 0035; the listing is as it was).
 */
function adminView(execution: Execution): Execution {
  const view = { ...execution };
  delete view.accessDigest;
  delete view.triggerUid;
  return view;
}

/**
 * Which executions' triggers the request's user may read, as ExecutionFilter's
 * `triggerReadable` (readableNamespaces: each namespace asked once).
 */
async function readableTriggers(
  access: AdminAccess,
  request: FastifyRequest,
): Promise<((triggerKey: string) => Promise<boolean>) | undefined> {
  const readable = await readableNamespaces(access, request);
  return readable && ((triggerKey) => readable(namespaceOfKey(triggerKey)));
}

export function executionRoutes(
  app: FastifyInstance,
  options: {
    engine: ExecutionEngine;
    heartbeatMs?: number;
    access?: AdminAccess;
    /** Byte budget of one page of the listing (default 4 MiB). */
    pageBytes?: number;
  },
): void {
  const { engine } = options;
  const access = options.access ?? OPEN_ACCESS;
  // An execution is readable by whoever may `get` the WebhookTrigger that started it;
  // to anyone else it does not exist (the same 404 as an unknown id: nobody learns what
  // runs in a namespace they cannot read; the same 503 while the authoriser is away).
  const readable = async (request: FastifyRequest, id: string): Promise<Execution> => {
    const unknown = new HttpProblem('HG_ERR_EXECUTION_NOT_FOUND', `No execution ${id}`);
    const execution = await engine.get(id);
    if (!execution) return access.throwUnknown(request, unknown);
    await access.requireVisible(request, unknown, readTrigger(execution.triggerKey));
    return execution;
  };

  // One page: at most `limit` items and about `pageBytes` bytes (at least one item), so
  // an answer is never one giant string; `next` continues where the page stopped. The
  // caller's access is part of the query: the page is cut from what they may read.
  app.get('/api/executions', async (request) => {
    const query = request.query as Record<string, unknown>;
    const filter = parseExecutionFilter(query);
    const triggerReadable = await readableTriggers(access, request);
    const page = await engine.page({
      ...filter,
      maxBytes: options.pageBytes ?? DEFAULT_PAGE_BYTES,
      ...(triggerReadable ? { triggerReadable } : {}),
    });
    // Asked again (each namespace's answer is kept): an engine that ignored the field
    // would list every namespace, so the route does not rely on it for that.
    const items: Execution[] = [];
    for (const e of page.items)
      if (!triggerReadable || (await triggerReadable(e.triggerKey))) items.push(adminView(e));
    if (!page.next) return { items };
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (name !== 'cursor' && typeof value === 'string') params.set(name, value);
    }
    params.set('cursor', page.next);
    return { items, next: page.next, links: { next: `/api/executions?${params}` } };
  });

  app.get('/api/executions/:id', async (request) => {
    const { id } = request.params as { id: string };
    return adminView(await readable(request, id));
  });

  app.get('/api/executions/:id/events', async (request, reply) => {
    const { id } = request.params as { id: string };
    const execution = await readable(request, id);
    return serveExecutionEvents(engine, execution, request, reply, {
      ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
      recheck: (revoked) => access.watch(request, readTrigger(execution.triggerKey), revoked),
    });
  });
}
