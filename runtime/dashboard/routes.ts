// Serves the dashboard: static pages (HTML, vanilla JS modules, CSS): Analytics at
// /dashboard and Flow Management at /dashboard/flows, their assets under
// /dashboard/<file>. The pages read the admin API on the same origin (the admin
// listener): analytics, triggers, executions and their event streams, the gateway's
// live event stream; the only thing they send is Send Test Request. In a cluster they
// send the token typed into the Token field (docs/security.md); the pages hold no data.
import { readFileSync } from 'node:fs';
import type { FastifyPluginCallback, FastifyReply } from 'fastify';
import { withTopbar } from './topbar.ts';

const PUBLIC = new URL('./public/', import.meta.url);

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The page's assets: read once at registration, served from memory. */
export const DASHBOARD_FILES = [
  'index.html',
  'flows.html',
  'app.js',
  'flows.js',
  'common.js',
  'styles.css',
  'favicon.svg',
] as const;

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export interface DashboardOptions {
  /** Where the files are read from; default runtime/dashboard/public/. */
  root?: URL;
}

/** Register with `app.register(dashboardRoutes)`. */
export const dashboardRoutes: FastifyPluginCallback<DashboardOptions> = (app, opts, done) => {
  const root = opts.root ?? PUBLIC;
  const files = new Map<string, { body: Buffer; type: string }>();
  const topbar = readFileSync(new URL('topbar.html', root), 'utf8');
  for (const name of DASHBOARD_FILES) {
    const ext = name.slice(name.lastIndexOf('.'));
    const body = readFileSync(new URL(name, root));
    files.set(name, {
      body: ext === '.html' ? Buffer.from(withTopbar(body.toString('utf8'), topbar)) : body,
      type: TYPES[ext] ?? 'application/octet-stream',
    });
  }
  const send = (reply: FastifyReply, name: string): FastifyReply => {
    const file = files.get(name);
    if (!file) {
      reply.callNotFound();
      return reply;
    }
    return reply
      .header('content-type', file.type)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('content-security-policy', CSP)
      .send(file.body);
  };
  app.get('/dashboard', (_request, reply) => send(reply, 'index.html'));
  app.get('/dashboard/', (_request, reply) => send(reply, 'index.html'));
  app.get('/dashboard/flows', (_request, reply) => send(reply, 'flows.html'));
  app.get<{ Params: { file: string } }>('/dashboard/:file', (request, reply) =>
    send(reply, request.params.file),
  );
  done();
};
