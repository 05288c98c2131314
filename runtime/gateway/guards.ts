// The request-path protections, composed from the security and body modules into the
// Guards the webhook pipeline calls.
import type { FastifyRequest } from 'fastify';
import { HttpProblem } from '../errors.ts';
import type { RouteRecord } from '../stores/ports.ts';
import { authenticateApiKey } from './security/auth/api-key.ts';
import { schemasFor, validateInput } from './body/input-schema.ts';
import type { Guards } from './webhook-routes.ts';

export interface GuardOptions {
  /** CIDRs of proxies whose X-Forwarded-Proto is believed. */
  trustedProxies?: string[];
}

export function createGuards(_options: GuardOptions = {}): Guards {
  return {
    https(route: RouteRecord, request: FastifyRequest) {
      if (route.spec.requireHttps && request.protocol !== 'https') {
        throw new HttpProblem('HG_ERR_HTTPS_REQUIRED', 'This endpoint only accepts HTTPS requests');
      }
    },
    preflight(route: RouteRecord) {
      if (!route.spec.cors?.enabled)
        throw new HttpProblem('HG_ERR_CORS_ORIGIN_DENIED', 'CORS is not enabled');
      return {};
    },
    cors() {
      return {};
    },
    authenticate(route: RouteRecord, request: FastifyRequest) {
      const method = route.spec.auth?.method ?? 'none';
      if (method === 'apiKey') return Promise.resolve(authenticateApiKey(route, request.headers));
      if (method === 'none') return Promise.resolve({});
      // Fail closed for any method this gateway cannot verify.
      return Promise.reject(
        new HttpProblem(
          'HG_ERR_AUTH_UNAVAILABLE',
          `Authentication method ${method} is not available`,
        ),
      );
    },
    rateLimit() {
      return Promise.resolve({});
    },
    validateInput(route: RouteRecord, body: unknown) {
      validateInput(schemasFor(route).input, body);
    },
  };
}
