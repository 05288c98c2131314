// The error catalogue and docs/errors.md must agree, entry for entry.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CATALOGUE, HttpProblem, PROBLEM_BASE, type ErrorCode } from '../../runtime/errors.ts';

const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'errors.md'), 'utf8');
const rows = new Map(
  doc
    .split('\n')
    .filter((line) => line.startsWith('| HG_ERR_'))
    .map((line) => {
      const [code, status, type, title] = line
        .split('|')
        .slice(1, 5)
        .map((c) => c.trim());
      return [code as string, { status: Number(status), type, title }];
    }),
);

describe('error catalogue', () => {
  it('documents every code, and documents nothing that does not exist', () => {
    expect([...rows.keys()].sort()).toEqual(Object.keys(CATALOGUE).sort());
  });

  it('documents each code once (one table, not a stale copy beside it)', () => {
    const documented = doc.split('\n').filter((line) => line.startsWith('| HG_ERR_'));
    expect(documented).toHaveLength(rows.size);
  });

  it.each(Object.entries(CATALOGUE))('%s: status, type and title match the docs', (code, entry) => {
    expect(rows.get(code)).toEqual({ status: entry.status, type: entry.type, title: entry.title });
  });

  it('problem types are unique and statuses are errors', () => {
    const types = Object.values(CATALOGUE).map((e) => e.type);
    expect(new Set(types).size).toBe(types.length);
    for (const e of Object.values(CATALOGUE)) expect(e.status).toBeGreaterThanOrEqual(400);
  });

  it('renders an RFC 9457 document with extensions and without internals', () => {
    const p = new HttpProblem('HG_ERR_SCHEMA_VALIDATION', 'bad', {
      extensions: { errors: [{ pointer: '/a', detail: 'x' }] },
    });
    expect(p.toDocument('/webhook/x')).toEqual({
      type: `${PROBLEM_BASE}schema-validation-failed`,
      title: 'Request does not match the input schema',
      status: 422,
      detail: 'bad',
      instance: '/webhook/x',
      code: 'HG_ERR_SCHEMA_VALIDATION' satisfies ErrorCode,
      errors: [{ pointer: '/a', detail: 'x' }],
    });
    expect(Object.keys(p.toDocument())).not.toContain('stack');
  });
});
