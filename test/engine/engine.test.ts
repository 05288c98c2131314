import { afterEach, describe, expect, it, vi } from 'vitest';
import { InProcessEngine } from '../../runtime/engine/engine.ts';
import type { SequencedEvent } from '../../runtime/engine/ports.ts';
import { finished, ref, run, trigger, workflow } from './helpers.ts';

const engines: InProcessEngine[] = [];
function engine(options: ConstructorParameters<typeof InProcessEngine>[0] = {}): InProcessEngine {
  const e = new InProcessEngine({ onInternalError: () => {}, ...options });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close(1000)));
});

describe('InProcessEngine: close', () => {
  it('closed twice (a second signal), answers both and closes what it owns once', async () => {
    const e = new InProcessEngine({ onInternalError: () => {} });
    await run(e, [{ id: 'a', type: 'transform', expression: '{ "ok": true }' }], {});
    const [first, second] = await Promise.all([e.close(1000), e.close(1000)]);
    expect(first).toEqual({ drained: true });
    expect(second).toBe(first);
    await expect(e.close(1000)).resolves.toBe(first);
  });
});

describe('InProcessEngine: nodes', () => {
  it('transform: $ is the previous output, $trigger and $nodes are bound', async () => {
    const e = engine();
    const execution = await run(
      e,
      [
        { id: 'a', type: 'transform', expression: '{ "doubled": body.n * 2 }' },
        {
          id: 'b',
          type: 'transform',
          expression:
            '{ "fromInput": doubled, "fromNodes": $nodes.a.doubled, "param": $trigger.params.id, "exec": $trigger.metadata.executionId }',
        },
      ],
      { n: 21 },
    );
    expect(execution.status).toBe('succeeded');
    expect(execution.output).toEqual({
      fromInput: 42,
      fromNodes: 42,
      param: '42',
      exec: execution.id,
    });
    expect(execution.log.map((r) => [r.nodeId, r.type, r.status, r.attempts])).toEqual([
      ['a', 'transform', 'succeeded', 1],
      ['b', 'transform', 'succeeded', 1],
    ]);
    expect(execution.log[0]?.outputSummary).toBe('{"doubled":42}');
    expect(execution.log[0]?.finishedAt).toBeDefined();
  });

  it('uses the trigger output id as the execution id and does not run it twice; only the first start says it created it', async () => {
    const e = engine();
    const wf = workflow([{ id: 'a', type: 'transform', expression: 'body' }]);
    const first = await e.start({
      workflow: wf,
      trigger: ref(),
      input: trigger({ x: 1 }, 'exec-fixed'),
    });
    expect(first.id).toBe('exec-fixed');
    expect(first.status).toBe('queued');
    const again = await e.start({
      workflow: wf,
      trigger: ref(),
      input: trigger({ x: 2 }, 'exec-fixed'),
    });
    expect(again.id).toBe('exec-fixed');
    expect(first.created).toBe(true);
    expect(again.created).toBeUndefined();
    const done = await finished(e, 'exec-fixed');
    expect(done.output).toEqual({ x: 1 });
    expect(done).not.toHaveProperty('created');
    // Found in the store once finished: not created either.
    const later = await e.start({
      workflow: wf,
      trigger: ref(),
      input: trigger({ x: 3 }, 'exec-fixed'),
    });
    expect(later.created).toBeUndefined();
    expect((await e.list({})).length).toBe(1);
  });

  it('workflow output expression sees $nodes, $trigger and the last output', async () => {
    const execution = await run(
      engine(),
      [
        { id: 'a', type: 'transform', expression: '{ "v": 1 }' },
        { id: 'b', type: 'transform', expression: '{ "v": v + 1 }' },
      ],
      { n: 1 },
      { output: '{ "a": $nodes.a.v, "last": v, "n": $trigger.body.n }' },
    );
    expect(execution.output).toEqual({ a: 1, last: 2, n: 1 });
  });

  it('default output is the last node output; the first node sees the trigger record', async () => {
    const execution = await run(engine(), [{ id: 'a', type: 'transform', expression: '$' }], {
      hello: 'world',
    });
    const output = execution.output as {
      body: unknown;
      params: unknown;
      metadata: { method: string };
    };
    expect(output.body).toEqual({ hello: 'world' });
    expect(output.params).toEqual({ id: '42' });
    expect(output.metadata.method).toBe('POST');
  });

  it('delay waits and passes its input on', async () => {
    const execution = await run(engine(), [
      { id: 'a', type: 'transform', expression: '{ "k": 1 }' },
      { id: 'd', type: 'delay', duration: '5ms' },
    ]);
    expect(execution.output).toEqual({ k: 1 });
    expect(execution.log[1]?.type).toBe('delay');
  });

  it('delay above the limit fails the execution', async () => {
    const execution = await run(engine({ maxDelayMs: 10 }), [
      { id: 'd', type: 'delay', duration: '1s' },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/exceeds the limit/);
  });

  it('fail: message expression and status code; the run stops there', async () => {
    const execution = await run(
      engine(),
      [
        { id: 'f', type: 'fail', expression: '"bad order " & $string(body.n)', statusCode: 422 },
        { id: 'never', type: 'transform', expression: '1' },
      ],
      { n: 7 },
    );
    expect(execution.status).toBe('failed');
    expect(execution.error).toEqual({
      message: 'bad order 7',
      nodeId: 'f',
      statusCode: 422,
      code: 'HG_ERR_EXECUTION_FAILED',
      kind: 'fail',
    });
    expect(execution.log.map((r) => r.nodeId)).toEqual(['f']);
  });

  it('fail defaults to status 500 and a message naming the node', async () => {
    const execution = await run(engine(), [{ id: 'stop', type: 'fail' }]);
    expect(execution.error?.statusCode).toBe(500);
    expect(execution.error?.message).toMatch(/'stop'/);
  });

  it('respond emits one respond event (first wins) and the workflow continues', async () => {
    const e = engine();
    const wf = workflow([
      {
        id: 'r1',
        type: 'respond',
        statusCode: 201,
        headers: { 'x-order': 'yes' },
        expression: '{ "accepted": body.n }',
      },
      { id: 'wait', type: 'delay', duration: '20ms' },
      { id: 'r2', type: 'respond', statusCode: 500 },
      { id: 'after', type: 'transform', expression: '{ "continued": true }' },
    ]);
    const started = await e.start({ workflow: wf, trigger: ref(), input: trigger({ n: 3 }) });
    const events: SequencedEvent[] = [];
    let responded: SequencedEvent | undefined;
    const done = new Promise<void>((resolve) => {
      e.subscribe(started.id, 0, (event) => {
        events.push(event);
        if (event.type === 'respond') responded = event;
        if (event.type === 'completed') resolve();
      });
    });
    await done;
    expect(responded).toMatchObject({
      type: 'respond',
      response: { statusCode: 201, headers: { 'x-order': 'yes' }, body: { accepted: 3 } },
    });
    expect(events.filter((ev) => ev.type === 'respond')).toHaveLength(1);
    // The respond event comes before the delay node starts: the caller need not wait.
    const respondAt = events.findIndex((ev) => ev.type === 'respond');
    const delayAt = events.findIndex((ev) => ev.type === 'node.started' && ev.nodeId === 'wait');
    expect(respondAt).toBeLessThan(delayAt);
    const execution = await e.get(started.id);
    expect(execution?.output).toEqual({ continued: true });
    expect(execution?.response?.statusCode).toBe(201);
  });

  it('respond without expression sends the node input, status 200', async () => {
    const execution = await run(engine(), [
      { id: 't', type: 'transform', expression: '{ "x": 1 }' },
      { id: 'r', type: 'respond' },
    ]);
    expect(execution.response).toEqual({ statusCode: 200, headers: {}, body: { x: 1 } });
  });

  it('an invalid expression fails the node with a clear message', async () => {
    const execution = await run(engine(), [
      { id: 'bad', type: 'transform', expression: '{ "a": ' },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/node 'bad' failed: invalid expression/);
    expect(execution.error?.nodeId).toBe('bad');
  });

  it('compiles each expression once per workflow generation', async () => {
    const e = engine();
    const wf = workflow([{ id: 'a', type: 'transform', expression: 'body.n + 1' }]);
    for (let i = 0; i < 3; i++) {
      const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({ n: i }) });
      await finished(e, s.id);
    }
    expect(e.expressions.size(`${wf.workflowId}@${wf.generation}`)).toBe(1);
  });

  it('an expression that runs too long fails on the evaluation timeout', async () => {
    const execution = await run(engine({ expressions: { timeoutMs: 50 } }), [
      {
        id: 'spin',
        type: 'transform',
        expression: '($f := function($n) { $n > 0 ? $f($n - 1) + $f($n - 1) : 1 }; $f(40))',
      },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/D1012|D1011|timeout|stack/i);
  });
});

describe('InProcessEngine: branching and error policies', () => {
  const branches = [
    { id: 'check', type: 'if' as const, condition: 'body.n > 10', then: 'big', else: 'small' },
    { id: 'big', type: 'transform' as const, expression: '"big"', next: 'end' },
    { id: 'small', type: 'transform' as const, expression: '"small"' },
    { id: 'end', type: 'transform' as const, expression: '{ "size": $ }' },
  ];

  it('if takes then or else', async () => {
    const e = engine();
    expect((await run(e, branches, { n: 11 })).output).toEqual({ size: 'big' });
    const small = await run(e, branches, { n: 1 });
    expect(small.output).toEqual({ size: 'small' });
    expect(small.log.map((r) => r.nodeId)).toEqual(['check', 'small', 'end']);
  });

  it('if without else goes on to the following node; if passes its input through', async () => {
    const execution = await run(
      engine(),
      [
        { id: 'check', type: 'if', condition: 'false', then: 'x' },
        { id: 'y', type: 'transform', expression: 'body.n' },
        { id: 'x', type: 'transform', expression: '"x"' },
      ],
      { n: 5 },
    );
    expect(execution.log.map((r) => r.nodeId)).toEqual(['check', 'y', 'x']);
    expect(execution.output).toBe('x');
  });

  it('switch takes the first truthy case, else default', async () => {
    const nodes = [
      {
        id: 'route',
        type: 'switch' as const,
        cases: [
          { condition: 'body.kind = "a"', next: 'a' },
          { condition: 'body.kind in ["a", "b"]', next: 'b' },
        ],
        default: 'other',
      },
      { id: 'a', type: 'transform' as const, expression: '"A"', next: 'done' },
      { id: 'b', type: 'transform' as const, expression: '"B"', next: 'done' },
      { id: 'other', type: 'transform' as const, expression: '"OTHER"' },
      { id: 'done', type: 'transform' as const, expression: '$' },
    ];
    const e = engine();
    expect((await run(e, nodes, { kind: 'a' })).output).toBe('A');
    expect((await run(e, nodes, { kind: 'b' })).output).toBe('B');
    expect((await run(e, nodes, { kind: 'z' })).output).toBe('OTHER');
  });

  it('onError stop (default) fails the execution', async () => {
    const execution = await run(engine(), [
      { id: 'boom', type: 'transform', expression: '$error("kaput")' },
      { id: 'never', type: 'transform', expression: '1' },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/node 'boom' failed: .*kaput/);
    expect(execution.log.map((r) => [r.nodeId, r.status])).toEqual([['boom', 'failed']]);
  });

  it('onError continue passes { error: { message } } on', async () => {
    const execution = await run(engine(), [
      {
        id: 'boom',
        type: 'transform',
        expression: '$error("kaput")',
        onError: { action: 'continue', maxRetries: 3, backoff: '1ms' },
      },
      { id: 'next', type: 'transform', expression: '{ "saw": error.message }' },
    ]);
    expect(execution.status).toBe('succeeded');
    expect((execution.output as { saw: string }).saw).toMatch(/kaput/);
    expect(execution.log[0]?.status).toBe('failed');
  });

  it('onError retry runs the node again, then fails with the attempts counted', async () => {
    const execution = await run(engine(), [
      {
        id: 'boom',
        type: 'transform',
        expression: '$error("kaput")',
        onError: { action: 'retry', maxRetries: 2, backoff: '1ms' },
      },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.log[0]?.attempts).toBe(3);
  });

  it('onError retry succeeds when a later attempt works', async () => {
    // A flaky function registered on the compiled (cached) expression fails twice.
    let calls = 0;
    const e = engine();
    const wf = workflow([
      {
        id: 'flaky',
        type: 'transform',
        expression: '$flaky()',
        onError: { action: 'retry', maxRetries: 3, backoff: '1ms' },
      },
    ]);
    const scope = `${wf.workflowId}@${wf.generation}`;
    e.expressions.compile(scope, '$flaky()').registerFunction('flaky', () => {
      calls++;
      if (calls < 3) throw new Error('not yet');
      return 'ok';
    });
    const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    const execution = await finished(e, s.id);
    expect(execution.status).toBe('succeeded');
    expect(execution.output).toBe('ok');
    expect(execution.log[0]?.attempts).toBe(3);
  });

  it('guards against infinite loops with a step limit', async () => {
    const execution = await run(engine({ maxSteps: 50 }), [
      { id: 'a', type: 'transform', expression: '1', next: 'b' },
      { id: 'b', type: 'transform', expression: '2', next: 'a' },
    ]);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toMatch(/step limit reached: 50 node runs/);
    expect(execution.log).toHaveLength(50);
  });

  it('a run past its time limit fails at once: a delay that would pass it does not wait', async () => {
    const started = performance.now();
    // 1000 node runs of 15 min each held a run slot for ten days.
    const execution = await run(engine({ maxRunMs: 1000 }), [
      { id: 'wait', type: 'delay', duration: '400ms', next: 'again' },
      { id: 'again', type: 'transform', expression: '1', next: 'wait' },
    ]);
    expect(execution.status).toBe('failed');
    // Two delays fit in the second; the third would end past it and fails at once. On a
    // machine slow enough that the second delay itself ends past the limit, the run fails
    // before its next node instead: the limit either way.
    expect(execution.error?.message).toMatch(
      /^node 'wait': delay 400ms would pass the run's time limit of 1000 ms \(\d+ ms left\)$|^run time limit reached: 1000 ms; next node was '(wait|again)'$/,
    );
    expect(['wait', 'again']).toContain(execution.error?.nodeId);
    // The third delay was not waited (that would be 1200 ms at the least).
    expect(performance.now() - started).toBeLessThan(1200);
    expect(
      execution.log.filter((r) => r.type === 'delay' && r.status === 'succeeded').length,
    ).toBeGreaterThanOrEqual(1);
  });

  it("the run's time limit counts elapsed time: a wall clock stepped meanwhile changes nothing", async () => {
    const e = engine({ maxRunMs: 60_000 });
    const wf = workflow([
      { id: 'step', type: 'transform', expression: '$step()' },
      { id: 'wait', type: 'delay', duration: '10ms' },
      { id: 'last', type: 'transform', expression: '1' },
    ]);
    const wall = Date.now.bind(Date);
    let offset = 0;
    const clock = vi.spyOn(Date, 'now').mockImplementation(() => wall() + offset);
    // The host's clock set two hours on (NTP, a VM resumed) while the run is in its
    // first node: with the limit read on the wall clock, the run failed at once.
    e.expressions
      .compile(`${wf.workflowId}@${wf.generation}`, '$step()')
      .registerFunction('step', () => {
        offset = 2 * 3_600_000;
        return 1;
      });
    try {
      const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
      const execution = await finished(e, s.id);
      expect(execution.error?.message).toBeUndefined();
      expect(execution.status).toBe('succeeded');
    } finally {
      clock.mockRestore();
    }
  });

  it('a run past its time limit fails before its next node, whatever the nodes', async () => {
    const e = engine({ maxRunMs: 50 });
    const wf = workflow([
      { id: 'slow', type: 'transform', expression: '$slow()' },
      { id: 'never', type: 'transform', expression: '1' },
    ]);
    e.expressions
      .compile(`${wf.workflowId}@${wf.generation}`, '$slow()')
      .registerFunction('slow', () => new Promise((resolve) => setTimeout(() => resolve(1), 120)));
    const s = await e.start({ workflow: wf, trigger: ref(), input: trigger({}) });
    const execution = await finished(e, s.id);
    expect(execution.status).toBe('failed');
    expect(execution.error?.message).toBe("run time limit reached: 50 ms; next node was 'never'");
    expect(execution.log.map((r) => r.nodeId)).toEqual(['slow']);
  });

  it('a next pointing nowhere fails clearly', async () => {
    const execution = await run(engine(), [
      { id: 'a', type: 'transform', expression: '1', next: 'ghost' },
    ]);
    expect(execution.error?.message).toMatch(/next node 'ghost' does not exist/);
  });

  it('output schema violation fails with HG_ERR_OUTPUT_SCHEMA', async () => {
    const e = engine();
    const s = await e.start({
      workflow: workflow([{ id: 'a', type: 'transform', expression: '{ "total": "ten" }' }]),
      trigger: ref(),
      input: trigger({}),
      outputValidator: (output) =>
        typeof (output as { total?: unknown }).total === 'number'
          ? { ok: true }
          : { ok: false, errors: ['/total must be number'] },
    });
    const execution = await finished(e, s.id);
    expect(execution.status).toBe('failed');
    expect(execution.error?.code).toBe('HG_ERR_OUTPUT_SCHEMA');
    expect(execution.error?.message).toMatch(/output schema: \/total must be number/);
  });
});

describe('InProcessEngine: failure messages are bounded', () => {
  const big = 'x'.repeat(200_000);

  it("a fail node's message made of the caller's body is cut", async () => {
    const execution = await run(engine(), [{ id: 'no', type: 'fail', expression: 'body.text' }], {
      text: big,
    });
    expect(execution.status).toBe('failed');
    expect(execution.error?.message.length).toBeLessThanOrEqual(2049);
    expect(execution.error?.message.endsWith('…')).toBe(true);
    expect(execution.log[0]?.error?.length).toBeLessThanOrEqual(2049);
  });

  it('an expression error with a long message is cut, stopped or passed on', async () => {
    const stopped = await run(
      engine(),
      [{ id: 'boom', type: 'transform', expression: '$error(body.text)' }],
      { text: big },
    );
    expect(stopped.error?.message.length).toBeLessThanOrEqual(2049);
    const passed = await run(
      engine(),
      [
        {
          id: 'boom',
          type: 'transform',
          expression: '$error(body.text)',
          onError: { action: 'continue', maxRetries: 3, backoff: '1ms' },
        },
      ],
      { text: big },
    );
    expect(passed.status).toBe('succeeded');
    expect(passed.log[0]?.error?.length).toBeLessThanOrEqual(2049);
  });
});
