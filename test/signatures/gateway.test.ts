// Signed deliveries end to end through the dev runtime: manifests with a Secret, the
// operator's reconcile, the gateway's request path and the metrics. The signature is
// checked over the exact bytes received, before the workflow runs; refusals are 401
// problem documents that say which check failed and are counted by reason; a Secret
// that is missing or lacks the key keeps the trigger Ready=False with the reason.
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../api/v1alpha1/index.ts';
import { PROBLEM_BASE } from '../../runtime/errors.ts';
import { eventually } from '../support/eventually.ts';
import { startRuntime, type TestRuntime } from '../support/gateway.ts';
import { secret, workflow } from '../support/manifests.ts';
import { parseResponse } from '../hostile/raw-client.ts';
import { githubSignature, signedTrigger, stripeV1 } from './support.ts';

let rt: TestRuntime;
const base = '/webhook/default_production_echo';
const GITHUB_SECRET = 'gh-secret-0123456789';
const OLD_GITHUB_SECRET = 'gh-secret-previous';
const SVIX_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const STRIPE_SECRET = 'whsec_stripe_endpoint_secret';

type Res = { statusCode: number; headers: Record<string, unknown>; body: string; json(): unknown };
function problem(res: Res, type: string): Record<string, unknown> {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.headers['www-authenticate']).toMatch(/^WebhookSignature header="/);
  const body = res.json() as Record<string, unknown>;
  expect(body.type).toBe(PROBLEM_BASE + type);
  for (const s of [GITHUB_SECRET, OLD_GITHUB_SECRET, SVIX_SECRET, STRIPE_SECRET]) {
    expect(res.body).not.toContain(s);
  }
  return body;
}

const conditions = (name: string) =>
  Object.fromEntries(
    (
      (
        rt.source.get({ kind: 'WebhookTrigger', namespace: 'default', name })?.status as
          { conditions?: Condition[] } | undefined
      )?.conditions ?? []
    ).map((c) => [c.type, c]),
  );

beforeAll(async () => {
  rt = await startRuntime();
  await rt.apply('all.yaml', docs(), ['github', 'svix', 'stripe']);
});
afterAll(() => rt.stop());

function docs(githubKeys: Record<string, string> = {}) {
  return [
    secret('github-hook', { current: GITHUB_SECRET, previous: OLD_GITHUB_SECRET, ...githubKeys }),
    secret('svix-hook', { endpoint: SVIX_SECRET }),
    secret('stripe-hook', { endpoint: STRIPE_SECRET, unrelated: 'not-a-signing-secret' }),
    workflow('echo', {
      nodes: [
        {
          id: 'out',
          type: 'transform',
          expression: '{ "got": body, "consumer": metadata.consumer }',
        },
      ],
    }),
    signedTrigger(
      'github',
      'echo',
      { preset: 'github', secretRef: { name: 'github-hook' } },
      { methods: ['POST', 'GET'], response: { mode: 'waitForCompletion' } },
    ),
    signedTrigger(
      'svix',
      'echo',
      { preset: 'standardWebhooks', secretRef: { name: 'svix-hook' } },
      {
        schema: {
          mode: 'manual',
          input: { fields: [{ name: 'orderId', type: 'string', required: true }] },
        },
        response: { mode: 'waitForCompletion' },
      },
    ),
    signedTrigger(
      'stripe',
      'echo',
      { preset: 'stripe', secretRef: { name: 'stripe-hook', keys: ['endpoint'] } },
      { response: { mode: 'waitForCompletion' } },
    ),
    signedTrigger('nosecret', 'echo', { preset: 'github', secretRef: { name: 'absent' } }),
    signedTrigger('nokey', 'echo', {
      preset: 'github',
      secretRef: { name: 'github-hook', keys: ['next'] },
    }),
    signedTrigger('notwhsec', 'echo', {
      preset: 'standardWebhooks',
      secretRef: { name: 'stripe-hook' },
    }),
  ];
}

async function rejected(reason: string): Promise<number> {
  const text = await rt.registry.metrics();
  const match = new RegExp(`hookgate_rejected_requests_total\\{reason="${reason}"\\} (\\d+)`).exec(
    text,
  );
  return match ? Number(match[1]) : 0;
}

describe('github preset through the gateway', () => {
  const url = `${base}/github`;

  it('verifies the exact bytes received (whitespace, key order) and names the secret', async () => {
    const raw = '{ "zen": "Keep it logically awesome.",\n  "hook_id": 1 }';
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        'x-hub-signature-256': githubSignature(GITHUB_SECRET, raw),
        'x-github-delivery': 'gw-1',
      },
      payload: raw,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      got: { zen: 'Keep it logically awesome.', hook_id: 1 },
      consumer: 'current',
    });
  });

  it('rotation: a delivery signed with the previous secret is accepted too', async () => {
    const raw = '{"n":2}';
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        'x-hub-signature-256': githubSignature(OLD_GITHUB_SECRET, raw),
      },
      payload: raw,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<{ consumer: string }>().consumer).toBe('previous');
  });

  it('the same JSON re-encoded fails, before the workflow runs; counted by reason', async () => {
    const before = await rejected('signature-mismatch');
    const sent = '{ "a": 1, "b": [1, 2] }';
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        'x-hub-signature-256': githubSignature(GITHUB_SECRET, sent),
      },
      payload: JSON.stringify(JSON.parse(sent)),
    });
    const body = problem(res, 'signature-mismatch');
    expect(body.code).toBe('HG_ERR_SIGNATURE_MISMATCH');
    expect(body.detail).toContain('X-Hub-Signature-256');
    await eventually(async () => expect(await rejected('signature-mismatch')).toBe(before + 1));
  });

  it('a body that is not even JSON is refused for its signature, never parsed', async () => {
    const res = await rt.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
      },
      payload: '{not json',
    });
    problem(res, 'signature-mismatch');
  });

  it('a request without a body is checked too (GET, and an empty POST)', async () => {
    problem(await rt.app.inject({ method: 'GET', url }), 'signature-missing');
    problem(await rt.app.inject({ method: 'POST', url }), 'signature-missing');
    const res = await rt.app.inject({
      method: 'GET',
      url,
      headers: { 'x-hub-signature-256': githubSignature(GITHUB_SECRET, '') },
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('each failed check has its own problem type and metric reason', async () => {
    const before = {
      missing: await rejected('signature-missing'),
      malformed: await rejected('signature-malformed'),
    };
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        payload: 'x',
        headers: { 'content-type': 'text/plain' },
      }),
      'signature-missing',
    );
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        payload: 'x',
        headers: { 'content-type': 'text/plain', 'x-hub-signature-256': 'sha1=abc' },
      }),
      'signature-malformed',
    );
    await eventually(async () => {
      expect(await rejected('signature-missing')).toBe(before.missing + 1);
      expect(await rejected('signature-malformed')).toBe(before.malformed + 1);
    });
  });

  it('the same delivery id twice: the second gets the first answer (no second run)', async () => {
    const raw = '{"n":3}';
    const headers = {
      'content-type': 'application/json',
      'x-hub-signature-256': githubSignature(GITHUB_SECRET, raw),
      'x-github-delivery': 'gw-replay',
    };
    const first = await rt.app.inject({ method: 'POST', url, headers, payload: raw });
    expect(first.statusCode, first.body).toBe(200);
    // The delivery id is the implicit idempotency key (since 2026-11-28; a 401 before).
    const again = await rt.app.inject({ method: 'POST', url, headers, payload: raw });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    // The same id with another body is no retry of it: refused as a replay.
    const other = '{"n":4}';
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: { ...headers, 'x-hub-signature-256': githubSignature(GITHUB_SECRET, other) },
        payload: other,
      }),
      'signature-replayed',
    );
  });
});

describe('standardWebhooks preset through the gateway', () => {
  const url = `${base}/svix`;
  const signed = (id: string, raw: string) => {
    const now = new Date();
    return {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(SVIX_SECRET).sign(id, now, raw),
    };
  };

  it('duplicate deliveries at once: exactly one runs the workflow', async () => {
    const raw = '{"orderId":"A-1"}';
    const headers = signed('msg_concurrent', raw);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        rt.app.inject({ method: 'POST', url, headers, payload: raw }),
      ),
    );
    // One runs; each other copy gets its stored answer, or 409 while it is in progress
    // (the delivery id is the implicit idempotency key; 401 signature-replayed before).
    const ran = answers.filter((a) => a.statusCode === 200 && !a.headers['idempotent-replayed']);
    expect(ran).toHaveLength(1);
    for (const a of answers.filter((a) => a !== ran[0])) {
      if (a.statusCode === 200) expect(a.body).toBe(ran[0]!.body);
      else expect(a.json<{ type: string }>().type).toBe(`${PROBLEM_BASE}idempotency-in-progress`);
    }
    const runs = await rt.engine.list({ triggerKey: 'default/svix', limit: 100 });
    expect(runs.filter((r) => JSON.stringify(r.input.body) === raw)).toHaveLength(1);
  });

  it('a delivery refused after its signature (422) is not remembered: the retry is accepted', async () => {
    const bad = '{"order":"A-2"}';
    const first = await rt.app.inject({
      method: 'POST',
      url,
      headers: signed('msg_retry', bad),
      payload: bad,
    });
    expect(first.statusCode, first.body).toBe(422);
    await eventually(async () => {
      const retry = await rt.app.inject({
        method: 'POST',
        url,
        headers: signed('msg_retry', bad),
        payload: bad,
      });
      expect(retry.statusCode, retry.body).toBe(422); // not 401 signature-replayed
    });
  });
});

describe('stripe preset through the gateway', () => {
  it('only the listed key signs; a stale timestamp is refused', async () => {
    const url = `${base}/stripe`;
    const raw = '{"id":"evt_1"}';
    const t = Math.floor(Date.now() / 1000);
    const ok = await rt.app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        'stripe-signature': `t=${t},v1=${stripeV1(STRIPE_SECRET, t, raw)}`,
      },
      payload: raw,
    });
    expect(ok.statusCode, ok.body).toBe(200);
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: {
          'content-type': 'application/json',
          'stripe-signature': `t=${t},v1=${stripeV1('not-a-signing-secret', t, raw)}`,
        },
        payload: raw,
      }),
      'signature-mismatch',
    );
    const stale = t - 301;
    problem(
      await rt.app.inject({
        method: 'POST',
        url,
        headers: {
          'content-type': 'application/json',
          'stripe-signature': `t=${stale},v1=${stripeV1(STRIPE_SECRET, stale, raw)}`,
        },
        payload: raw,
      }),
      'signature-timestamp-outside-tolerance',
    );
  });
});

describe('what the headers alone show is refused before the body is read', () => {
  // 512 KiB announced (under the 1 MiB limit, so no 413), 1 KiB sent: an answer that
  // arrives now was given without the body, which the gateway cannot have read.
  const BODY = 512 * 1024;
  let port = 0;
  beforeAll(async () => {
    port = Number(new URL(await rt.app.listen({ port: 0, host: '127.0.0.1' })).port);
  });

  /** Sends the head and 1 KiB of the body; `answer` resolves with the answer, if one comes. */
  async function startDelivery(url: string, headers: Record<string, string>) {
    const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    let answered: (r: ReturnType<typeof parseResponse>) => void = () => undefined;
    const answer = new Promise<ReturnType<typeof parseResponse>>((resolve) => (answered = resolve));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const parsed = parseResponse(Buffer.concat(chunks), false);
      if (parsed) answered(parsed);
    });
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const head = [
      `POST ${url} HTTP/1.1`,
      'Host: 127.0.0.1',
      'Content-Type: application/json',
      `Content-Length: ${BODY}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      '',
      '',
    ].join('\r\n');
    socket.write(Buffer.concat([Buffer.from(head, 'latin1'), Buffer.alloc(1024, 0x20)]));
    const within = (ms: number) =>
      Promise.race([answer, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms))]);
    const rest = () =>
      new Promise<void>((resolve) =>
        socket.write(Buffer.alloc(BODY - 1024, 0x20), () => resolve()),
      );
    return { within, rest, close: () => socket.destroy() };
  }

  const unsigned: [string, string, Record<string, string>, string][] = [
    ['no signature header', 'github', {}, 'signature-missing'],
    ['a malformed one', 'github', { 'X-Hub-Signature-256': 'sha1=abc' }, 'signature-malformed'],
    [
      'a stale signed timestamp',
      'stripe',
      { 'Stripe-Signature': `t=${Math.floor(Date.now() / 1000) - 301},v1=${'0'.repeat(64)}` },
      'signature-timestamp-outside-tolerance',
    ],
    [
      'no webhook-timestamp (Standard Webhooks)',
      'svix',
      { 'webhook-signature': 'v1,AAAA' },
      'signature-missing',
    ],
  ];
  it.each(unsigned)('%s: 401 before the body has been sent', async (_name, path, headers, type) => {
    const before = await rejected(type);
    const delivery = await startDelivery(`${base}/${path}`, headers);
    try {
      const answer = await delivery.within(5_000);
      expect(answer?.status).toBe(401);
      expect(answer?.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(answer?.headers['www-authenticate']).toMatch(/^WebhookSignature header="/);
      expect((JSON.parse(answer!.body.toString('utf8')) as { type: string }).type).toBe(
        PROBLEM_BASE + type,
      );
    } finally {
      delivery.close();
    }
    await eventually(async () => expect(await rejected(type)).toBe(before + 1));
  });

  it('a well-formed, timely signature header waits for the body: its HMAC needs it', async () => {
    const delivery = await startDelivery(`${base}/github`, {
      'X-Hub-Signature-256': `sha256=${'0'.repeat(64)}`,
    });
    try {
      expect(await delivery.within(300)).toBeUndefined();
      await delivery.rest();
      const answer = await delivery.within(5_000);
      expect(answer?.status).toBe(401);
      expect((JSON.parse(answer!.body.toString('utf8')) as { type: string }).type).toBe(
        `${PROBLEM_BASE}signature-mismatch`,
      );
    } finally {
      delivery.close();
    }
  });
});

describe('Send Test Request to a signed endpoint', () => {
  type Out = {
    request: { headers: Record<string, string> };
    response: { statusCode: number; body: unknown };
  };
  it.each([
    ['github', { n: 1 }, 'x-hub-signature-256'],
    ['svix', { orderId: 'T-1' }, 'webhook-signature'],
    ['stripe', { id: 'evt_test' }, 'stripe-signature'],
  ])(
    '%s: signed with the first active secret, accepted by the gateway',
    async (name, body, header) => {
      const res = await rt.admin.inject({
        method: 'POST',
        url: `/api/triggers/default/${name}/test`,
        payload: { body },
      });
      expect(res.statusCode, res.body).toBe(200);
      const out = res.json<Out>();
      expect(out.response.statusCode).toBe(200);
      expect(out.response.body).toMatchObject({ got: body });
      expect(out.request.headers[header]).toBeDefined();
    },
  );
});

describe('the operator and the signing Secret', () => {
  it('a missing Secret: Ready=False, SecretNotFound, and nothing is served', async () => {
    const c = conditions('nosecret');
    expect(c.Ready?.status).toBe('False');
    expect(c.Valid).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(c.Valid?.message).toContain('spec.auth.signature.secretRef: Secret "absent" not found');
    const res = await rt.app.inject({ method: 'POST', url: `${base}/nosecret`, payload: 'x' });
    expect(res.statusCode).toBe(404);
  });

  it('a listed key the Secret lacks: Ready=False, SecretInvalid, naming the key', () => {
    const c = conditions('nokey');
    expect(c.Ready?.status).toBe('False');
    expect(c.Valid).toMatchObject({ status: 'False', reason: 'SecretInvalid' });
    expect(c.Valid?.message).toContain('Secret "github-hook" has no key "next"');
  });

  it('standardWebhooks with a value that is no whsec_ secret: SecretInvalid', () => {
    const c = conditions('notwhsec');
    expect(c.Valid).toMatchObject({ status: 'False', reason: 'SecretInvalid' });
    expect(c.Valid?.message).toContain('is not a Standard Webhooks secret');
    expect(c.Valid?.message).not.toContain('not-a-signing-secret');
  });

  it('adding the key makes the trigger Ready, and the new secret signs', async () => {
    await rt.apply('all.yaml', docs({ next: 'gh-next' }), ['nokey']);
    await eventually(() => expect(conditions('nokey').Ready?.status).toBe('True'));
    await rt.table.refresh();
    const raw = 'ping';
    const res = await rt.app.inject({
      method: 'POST',
      url: `${base}/nokey`,
      headers: {
        'content-type': 'text/plain',
        'x-hub-signature-256': githubSignature('gh-next', raw),
      },
      payload: raw,
    });
    expect(res.statusCode, res.body).toBe(202);
  });
});
