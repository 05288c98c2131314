// Input limits: depth, keys, string length and finite numbers are checked over the raw
// bytes before JSON.parse, and each refusal is a 400 problem from the catalogue.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import {
  checkJsonLimits,
  DEFAULT_INPUT_LIMITS,
  inputLimits,
} from '../../runtime/gateway/body/input-limits.ts';
import { installJsonLimits } from '../../runtime/gateway/body/json-parser.ts';
import { parseBody, parseForm } from '../../runtime/gateway/body/parse.ts';
import { installProblemHandlers } from '../../runtime/gateway/problem-handler.ts';
import { problemOf } from './fixtures.ts';

const b = (text: string) => Buffer.from(text, 'utf8');
const nested = (depth: number, open = '[', close = ']') => open.repeat(depth) + close.repeat(depth);
const json = (text: string, limits = DEFAULT_INPUT_LIMITS) =>
  parseBody(b(text), 'application/json', limits);

describe('JSON input limits', () => {
  it('accepts a body at the depth limit and refuses one level more', async () => {
    expect(json(nested(64))).toBeDefined();
    const problem = await problemOf(() => json(nested(65)));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_DEEP');
    expect(problem.status).toBe(400);
    expect(problem.toDocument().type).toBe('https://hookgate.dev/problems/json-too-deep');
  });

  it('refuses 10,000 levels of objects before parsing, without echoing the body', async () => {
    const deep = '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000);
    const problem = await problemOf(() => json(deep));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_DEEP');
    expect(problem.message).not.toContain('{"a"');
  });

  it('does not count brackets, braces, colons or quotes inside strings', () => {
    const text = JSON.stringify({ s: '[[[[{{{{::::\\"'.repeat(100), t: ['a\\', 'b"'] });
    expect(json(text, { maxDepth: 2, maxKeys: 2, maxStringBytes: 4096 })).toEqual(JSON.parse(text));
  });

  it('refuses numbers that are not finite, in any position', async () => {
    for (const text of [
      '{"total":1e309}',
      '{"total":-1e309}',
      '[1E400]',
      '1e+999',
      `{"n":${'9'.repeat(400)}}`,
    ]) {
      const problem = await problemOf(() => json(text));
      expect(problem.code, text).toBe('HG_ERR_BODY_NUMBER_OUT_OF_RANGE');
      expect(problem.toDocument().type).toBe(
        'https://hookgate.dev/problems/json-number-out-of-range',
      );
    }
    expect(json('{"a":1e308,"b":-1.5e-400,"c":0.1,"d":"1e309"}')).toEqual({
      a: 1e308,
      b: -0,
      c: 0.1,
      d: '1e309',
    });
  });

  it('refuses more keys than the limit, across the whole document', async () => {
    const body = JSON.stringify(Array.from({ length: 6 }, (_, i) => ({ [`k${i}`]: i })));
    expect(json(body, { ...DEFAULT_INPUT_LIMITS, maxKeys: 6 })).toHaveLength(6);
    const problem = await problemOf(() => json(body, { ...DEFAULT_INPUT_LIMITS, maxKeys: 5 }));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_MANY_KEYS');
  });

  it('refuses a string longer than the limit, counting UTF-8 bytes as written', async () => {
    const limits = { ...DEFAULT_INPUT_LIMITS, maxStringBytes: 8 };
    expect(json('["12345678"]', limits)).toEqual(['12345678']);
    expect(json('{"ééé\\"":1}', limits)).toEqual({ 'ééé"': 1 });
    for (const text of ['["123456789"]', '{"123456789":1}', '["éééé\\n"]']) {
      const problem = await problemOf(() => json(text, limits));
      expect(problem.code, text).toBe('HG_ERR_BODY_STRING_TOO_LONG');
    }
  });

  it('leaves malformed JSON to the parser: 400 malformed-body', async () => {
    for (const text of ['{"a":"unterminated', '{"a":-}', ']]]]', '{"a":1e}', '\u00ff\u00fe']) {
      const problem = await problemOf(() => json(text));
      expect(problem.code, text).toBe('HG_ERR_BODY_MALFORMED');
    }
  });

  it('checks a body in another charset after decoding it', async () => {
    const utf16 = Buffer.from(nested(65), 'utf16le');
    const problem = await problemOf(() => parseBody(utf16, 'application/json; charset=utf-16le'));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_DEEP');
  });

  it('merges a route’s own limits with the defaults', () => {
    expect(inputLimits(undefined)).toBe(DEFAULT_INPUT_LIMITS);
    expect(inputLimits({ maxDepth: 8 })).toEqual({ ...DEFAULT_INPUT_LIMITS, maxDepth: 8 });
  });

  it('scans invalid UTF-8 without failing: JSON.parse sees replacement characters', () => {
    const bytes = Buffer.concat([b('{"a":"'), Buffer.from([0xff, 0xc3]), b('"}')]);
    expect(() => checkJsonLimits(bytes, DEFAULT_INPUT_LIMITS)).not.toThrow();
  });
});

describe('form input limits', () => {
  it('refuses more fields than the limit, repeats included', async () => {
    expect(parseForm('a=1&a=2&b=3', 3)).toEqual({ a: ['1', '2'], b: '3' });
    const problem = await problemOf(() => parseForm('a=1&a=2&b=3', 2));
    expect(problem.code).toBe('HG_ERR_BODY_TOO_MANY_KEYS');
  });

  it('collects a key repeated many times in linear time', () => {
    const text = 'a=1&'.repeat(40_000);
    const started = performance.now();
    const form = parseForm(text);
    expect((form.a as string[]).length).toBe(40_000);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('JSON limits outside the webhook path (admin API bodies)', () => {
  it('refuses a deep body with a 400 problem and keeps prototype-poisoning checks', async () => {
    const app = Fastify();
    installProblemHandlers(app);
    installJsonLimits(app);
    app.post('/api/echo', (request) => ({ body: request.body }));
    const post = (payload: string) =>
      app.inject({
        method: 'POST',
        url: '/api/echo',
        headers: { 'content-type': 'application/json' },
        payload,
      });
    const deep = await post(nested(10_000));
    expect(deep.statusCode).toBe(400);
    expect(deep.json()).toMatchObject({ type: 'https://hookgate.dev/problems/json-too-deep' });
    const huge = await post('{"n":1e309}');
    expect(huge.json()).toMatchObject({
      type: 'https://hookgate.dev/problems/json-number-out-of-range',
    });
    expect((await post('{"a":[1,{"b":2}]}')).json()).toEqual({ body: { a: [1, { b: 2 }] } });
    const poisoned = await post('{"__proto__":{"x":1}}');
    expect(poisoned.statusCode).toBe(400);
    expect(poisoned.headers['content-type']).toMatch(/^application\/problem\+json/);
    await app.close();
  });

  it('takes UTF-8 JSON only: another charset is 415, as on the webhook side', async () => {
    const app = Fastify();
    installProblemHandlers(app);
    installJsonLimits(app);
    app.post('/api/echo', (request) => ({ body: request.body }));
    const post = (contentType: string) =>
      app.inject({
        method: 'POST',
        url: '/api/echo',
        headers: { 'content-type': contentType },
        payload: '{"a":1}',
      });
    for (const ok of [
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset="UTF-8"',
    ])
      expect((await post(ok)).statusCode, ok).toBe(200);
    const refused = await post('application/json; charset=foo');
    expect(refused.statusCode).toBe(415);
    expect(refused.json()).toMatchObject({
      type: 'https://hookgate.dev/problems/unsupported-media-type',
    });
    await app.close();
  });
});
