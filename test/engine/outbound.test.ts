import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import {
  OutboundGuard,
  OutboundRefusedError,
  blockedRange,
  type LookupFn,
} from '../../runtime/engine/outbound/guard.ts';
import { sendOutbound } from '../../runtime/engine/outbound/request.ts';
import { run } from './helpers.ts';
import { startReceiver, type Receiver } from './receiver.ts';

/** A stub resolver: fixed answers per host name (a rebinding DNS in miniature). */
function stubLookup(answers: Record<string, string[]>): LookupFn {
  return (hostname, _options, callback) => {
    const list = answers[hostname];
    if (!list) {
      callback(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
      return;
    }
    callback(
      null,
      list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
}

const guards: OutboundGuard[] = [];
function guard(options: ConstructorParameters<typeof OutboundGuard>[0] = {}): OutboundGuard {
  const g = new OutboundGuard(options);
  guards.push(g);
  return g;
}
afterEach(async () => {
  await Promise.all(guards.splice(0).map((g) => g.close()));
});

describe('outbound guard: URL checks', () => {
  const refused = [
    'http://127.0.0.1/',
    'http://10.0.0.1/',
    'http://172.16.5.4/',
    'http://192.168.1.1/',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://0.1.2.3/',
    'http://224.0.0.1/',
    'http://255.255.255.255/',
    'http://[::1]/',
    'http://[::]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://[fc00::1]/',
    'http://[fd12:3456::1]/',
    'http://[fe80::1]/',
    'http://[ff02::1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[::127.0.0.1]/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://017700000001/',
    'http://127.1/',
  ];
  for (const url of refused) {
    it(`refuses ${url}`, () => {
      expect(() => guard().check(url, { protocols: ['http:', 'https:'] })).toThrow(
        OutboundRefusedError,
      );
    });
  }

  it('WHATWG URL normalises decimal, hex and mapped forms to the address checked', () => {
    expect(new URL('http://2130706433/').hostname).toBe('127.0.0.1');
    expect(new URL('http://0x7f000001/').hostname).toBe('127.0.0.1');
    expect(new URL('http://[::ffff:127.0.0.1]/').hostname).toBe('[::ffff:7f00:1]');
  });

  it('names the range it refused', () => {
    expect(blockedRange('127.0.0.1')).toBe('loopback');
    expect(blockedRange('10.1.2.3')).toBe('private');
    expect(blockedRange('169.254.169.254')).toBe('metadata');
    expect(blockedRange('169.254.1.1')).toBe('linkLocal');
    expect(blockedRange('100.64.0.1')).toBe('carrierGradeNat');
    // IPv4-mapped addresses are checked as the IPv4 address they carry.
    expect(blockedRange('::ffff:7f00:1')).toBe('loopback');
    expect(blockedRange('64:ff9b::a00:1')).toBe('rfc6052');
    expect(blockedRange('fc00::1')).toBe('uniqueLocal');
    expect(blockedRange('8.8.8.8')).toBeUndefined();
    expect(blockedRange('2606:4700::1111')).toBeUndefined();
  });

  it('accepts public literals and host names (checked again at connect time)', () => {
    const g = guard();
    expect(g.check('https://93.184.216.34/x', { protocols: ['https:'] }).url.hostname).toBe(
      '93.184.216.34',
    );
    expect(g.check('https://example.com/hook', { protocols: ['https:'] }).hostAllowed).toBe(false);
  });

  it('refuses other schemes, http where https is required, and credentials', () => {
    const g = guard();
    expect(() => g.check('ftp://example.com/', { protocols: ['http:', 'https:'] })).toThrow(
      /scheme/,
    );
    expect(() => g.check('http://example.com/', { protocols: ['https:'] })).toThrow(/scheme/);
    expect(() => g.check('https://u:p@example.com/', { protocols: ['https:'] })).toThrow(
      /credentials/,
    );
    expect(() => g.check('not a url', { protocols: ['https:'] })).toThrow(
      /invalid URL 'not a url'/,
    );
    // The refusal reaches the record, the log and the trace: no query, fragment or user info.
    let message = '';
    try {
      g.check('https://us er:pw@exa mple.com/p?token=s3cret#frag', { protocols: ['https:'] });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe("invalid URL 'https://…@exa mple.com/…'");
    expect(() => g.check(`https://a b${'x'.repeat(300)}/path`, { protocols: ['https:'] })).toThrow(
      /^invalid URL '.{120}…'$/,
    );
  });

  it('allow-list: CIDR and host:port entries permit local destinations', () => {
    const g = guard({ allow: ['10.0.0.0/8', '127.0.0.1:9999'] });
    expect(g.check('http://10.1.1.1/', { protocols: ['http:'] }).url.hostname).toBe('10.1.1.1');
    expect(g.check('http://127.0.0.1:9999/', { protocols: ['https:'] }).hostAllowed).toBe(true);
    expect(() => g.check('http://127.0.0.1:9998/', { protocols: ['http:'] })).toThrow(
      OutboundRefusedError,
    );
  });
});

describe('outbound guard: connect-time DNS checks and redirects', () => {
  let receiver: Receiver;
  let target: Receiver;
  beforeAll(async () => {
    target = await startReceiver(() => ({ status: 200, body: 'private data' }));
    receiver = await startReceiver((req) => {
      if (req.url === '/redirect') {
        return { status: 302, headers: { location: `${target.url}/secret` } };
      }
      if (req.url === '/metadata') {
        return { status: 302, headers: { location: 'http://169.254.169.254/latest/' } };
      }
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ok: true, got: req.body }),
      };
    });
  });
  afterAll(async () => {
    await receiver.close();
    await target.close();
  });

  const request = (g: OutboundGuard, url: string) =>
    sendOutbound(g, { method: 'GET', url, timeoutMs: 2000, protocols: ['http:', 'https:'] });

  it('refuses a host name that resolves to 127.0.0.1 (injected resolver)', async () => {
    const g = guard({ lookup: stubLookup({ 'evil.test': ['127.0.0.1'] }) });
    await expect(request(g, `http://evil.test:${receiver.port}/`)).rejects.toThrow(
      /evil\.test resolves to a refused address 127\.0\.0\.1/,
    );
    expect(receiver.received).toHaveLength(0);
  });

  it('refuses when any answer of a rebinding resolver is private', async () => {
    const g = guard({ lookup: stubLookup({ 'rebind.test': ['93.184.216.34', '10.0.0.7'] }) });
    await expect(request(g, `http://rebind.test:${receiver.port}/`)).rejects.toBeInstanceOf(
      OutboundRefusedError,
    );
  });

  it('refuses localhost through the real resolver', async () => {
    await expect(request(guard(), `http://localhost:${receiver.port}/`)).rejects.toBeInstanceOf(
      OutboundRefusedError,
    );
    expect(receiver.received).toHaveLength(0);
  });

  it('a CIDR allow-list entry permits a resolved local address', async () => {
    const g = guard({
      allow: ['127.0.0.0/8'],
      lookup: stubLookup({ 'receiver.test': ['127.0.0.1'] }),
    });
    const response = await request(g, `http://receiver.test:${receiver.port}/`);
    expect(response.status).toBe(200);
  });

  it('does not follow a 302 from an allow-listed receiver to a private address', async () => {
    const g = guard({ allow: [`127.0.0.1:${receiver.port}`] });
    const before = target.received.length;
    const response = await request(g, `${receiver.url}/redirect`);
    expect(response.status).toBe(302);
    expect(response.headers.location).toBe(`${target.url}/secret`);
    expect(target.received.length).toBe(before);
  });

  it('a direct request to the redirect target is refused (it is not allow-listed)', async () => {
    const g = guard({ allow: [`127.0.0.1:${receiver.port}`] });
    await expect(request(g, `${target.url}/secret`)).rejects.toBeInstanceOf(OutboundRefusedError);
  });
});

describe('http node', () => {
  let receiver: Receiver;
  let flakyCalls = 0;
  let slowCalls = 0;
  beforeAll(async () => {
    receiver = await startReceiver((req) => {
      if (req.url === '/flaky') {
        flakyCalls++;
        return flakyCalls < 3 ? { status: 503 } : { status: 200, body: 'third time' };
      }
      if (req.url === '/missing') return { status: 404, body: 'nope' };
      if (req.url === '/slow') {
        slowCalls++;
        return { status: 200, hangMs: 2000 };
      }
      if (req.url === '/moved') {
        return { status: 302, headers: { location: 'http://169.254.169.254/' } };
      }
      return {
        status: 200,
        headers: { 'content-type': 'application/json', 'x-echo': 'yes' },
        body: JSON.stringify({
          method: req.method,
          contentType: req.headers['content-type'],
          auth: req.headers.authorization,
          body: req.body ? (JSON.parse(req.body) as unknown) : null,
        }),
      };
    });
  });
  afterAll(async () => {
    await receiver.close();
  });

  const engines: InProcessEngine[] = [];
  function engine(options: { maxRunMs?: number } = {}): InProcessEngine {
    const e = new InProcessEngine({
      onInternalError: () => {},
      outbound: { allow: [`127.0.0.1:${receiver.port}`] },
      httpBackoffMs: 1,
      ...options,
    });
    engines.push(e);
    return e;
  }
  afterEach(async () => {
    await Promise.all(engines.splice(0).map((e) => e.close(1000)));
  });

  it('sends method, headers and the body expression; output feeds later nodes', async () => {
    const execution = await run(
      engine(),
      [
        {
          id: 'call',
          type: 'http',
          request: {
            method: 'PUT',
            url: `${receiver.url}/echo`,
            headers: { authorization: 'Bearer t' },
            body: '{ "order": body.n }',
            timeout: '2s',
            retries: 0,
          },
        },
        {
          id: 'use',
          type: 'transform',
          expression: '{ "status": status, "echo": body, "hdr": headers."x-echo" }',
        },
      ],
      { n: 9 },
    );
    expect(execution.status).toBe('succeeded');
    expect(execution.output).toEqual({
      status: 200,
      echo: {
        method: 'PUT',
        contentType: 'application/json',
        auth: 'Bearer t',
        body: { order: 9 },
      },
      hdr: 'yes',
    });
  });

  it('sends the node input as the body by default', async () => {
    const execution = await run(
      engine(),
      [
        { id: 't', type: 'transform', expression: '{ "x": 1 }' },
        {
          id: 'call',
          type: 'http',
          request: { method: 'POST', url: `${receiver.url}/echo`, timeout: '2s', retries: 0 },
        },
      ],
      {},
    );
    expect((execution.output as { body: { body: unknown } }).body.body).toEqual({ x: 1 });
  });

  it('retries on 5xx with backoff and succeeds', async () => {
    flakyCalls = 0;
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: { method: 'GET', url: `${receiver.url}/flaky`, timeout: '2s', retries: 3 },
      },
    ]);
    expect(execution.status).toBe('succeeded');
    expect(flakyCalls).toBe(3);
    expect(execution.output).toMatchObject({ status: 200, body: 'third time' });
  });

  it('a 404 fails the node without retries', async () => {
    const before = receiver.received.filter((r) => r.url === '/missing').length;
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: { method: 'GET', url: `${receiver.url}/missing`, timeout: '2s', retries: 3 },
      },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/answered 404/);
    expect(receiver.received.filter((r) => r.url === '/missing').length - before).toBe(1);
  });

  it('times out per attempt and retries timeouts', async () => {
    slowCalls = 0;
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: { method: 'GET', url: `${receiver.url}/slow`, timeout: '250ms', retries: 1 },
      },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/timed out after 250 ms/);
    expect(slowCalls).toBe(2);
  });

  it("an attempt is cut to what is left of the run's time; no attempt starts past it", async () => {
    slowCalls = 0;
    const started = Date.now();
    const execution = await run(engine({ maxRunMs: 400 }), [
      {
        id: 'call',
        type: 'http',
        // Each attempt would wait 10 s on the receiver (it answers after 2 s).
        request: { method: 'GET', url: `${receiver.url}/slow`, timeout: '10s', retries: 5 },
      },
    ]);
    expect(execution.status).toBe('failed');
    // The first attempt got the 400 ms, not 10 s (nor the receiver's 2 s); the next one
    // found no time left and was not sent.
    expect(Date.now() - started).toBeLessThan(1900);
    expect(slowCalls).toBe(1);
    // The cut attempt fails the node on the run's limit (the attempts left are not sent).
    expect(execution.error?.message).toMatch(
      /^node 'call': attempt 1 would pass the run's time limit of 400 ms \(\d+ ms left\)$/,
    );
  });

  it("an attempt cut by the run's time limit fails the run on that limit: no retry policy runs it again", async () => {
    slowCalls = 0;
    // No retries of the node (request.retries 0) and a workflow retry policy whose `on` names timeout:
    // the cut attempt was an ordinary outbound timeout ('timeout', "timed out after 300
    // ms"), and every attempt of the policy ran it again, each with an hour of its own.
    const execution = await run(
      engine({ maxRunMs: 300 }),
      [
        {
          id: 'call',
          type: 'http',
          request: { method: 'GET', url: `${receiver.url}/slow`, timeout: '10s', retries: 0 },
        },
      ],
      { n: 1 },
      { retry: { attempts: 3, backoff: { initial: '1ms', max: '1ms', multiplier: 2, jitter: 0 } } },
    );
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(
      /^node 'call': attempt 1 would pass the run's time limit of 300 ms \(\d+ ms left\)$/,
    );
    expect(execution.error?.kind).toBe('workflow');
    // One attempt of the workflow: none recorded past the first.
    expect(execution.attempt ?? 1).toBe(1);
    expect(execution.log).toHaveLength(1);
    expect(slowCalls).toBe(1);
  });

  it('a request timeout over the engine limit fails the node before any request', async () => {
    slowCalls = 0;
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: { method: 'GET', url: `${receiver.url}/slow`, timeout: '999999m', retries: 10 },
      },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toBe(
      "node 'call': request timeout 999999m exceeds the limit of 900000 ms",
    );
    expect(slowCalls).toBe(0);
  });

  it('a Host header of its own fails the node before any request (another virtual host)', async () => {
    slowCalls = 0;
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: {
          method: 'GET',
          url: `${receiver.url}/slow`,
          headers: { Host: 'admin.internal.example' },
          timeout: '2s',
          retries: 3,
        },
      },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(
      /^node 'call': request header 'Host': the destination is the URL host/,
    );
    expect(slowCalls).toBe(0);
  });

  it('a redirect is the response, not followed', async () => {
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: { method: 'GET', url: `${receiver.url}/moved`, timeout: '2s', retries: 0 },
      },
    ]);
    expect(execution.output).toMatchObject({
      status: 302,
      headers: { location: 'http://169.254.169.254/' },
    });
  });

  it('a refused destination fails the node (no retries) and continue passes the error on', async () => {
    const execution = await run(engine(), [
      {
        id: 'call',
        type: 'http',
        request: {
          method: 'GET',
          url: 'http://169.254.169.254/latest/meta-data/',
          timeout: '2s',
          retries: 3,
        },
        onError: { action: 'continue', maxRetries: 3, backoff: '1ms' },
      },
    ]);
    expect(execution.status).toBe('succeeded');
    expect((execution.output as { error: { message: string } }).error.message).toMatch(
      /169\.254\.169\.254 is a cloud metadata endpoint \(never allowed\)/,
    );
  });
});
