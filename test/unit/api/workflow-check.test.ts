// checkWorkflow: what admission reports of a Workflow beyond its CRD schema.
import { describe, expect, it } from 'vitest';
import { checkWorkflow } from '../../../api/workflow-check.ts';
import type { WorkflowSpec } from '../../../api/v1alpha1/index.ts';

const spec = (expression: string): WorkflowSpec =>
  ({
    environment: 'development',
    nodes: [{ id: 'shape', type: 'transform', expression }],
  }) as unknown as WorkflowSpec;

describe('checkWorkflow: regular expressions', () => {
  it('reports a pattern the runtime cannot run in linear time', () => {
    expect(checkWorkflow(spec('$match(body.text, /(\\w+)\\s\\1/)'))).toEqual([
      'spec.nodes[0].expression: invalid JSONata expression: regular expression /(\\w+)\\s\\1/ cannot run in linear time (backreferences, lookahead and counted repetitions over 16 are not supported)',
    ]);
  });

  it('accepts the patterns it can', () => {
    expect(checkWorkflow(spec('$match(body.text, /(a+)+$/i)'))).toEqual([]);
  });
});

describe('checkWorkflow: http node request headers', () => {
  it('names a Host or framing header the node may not set', () => {
    const problems = checkWorkflow({
      environment: 'development',
      nodes: [
        {
          id: 'call',
          type: 'http',
          request: {
            url: 'https://api.example.com/orders',
            headers: { Host: 'admin.example.com', 'Transfer-Encoding': 'chunked', 'X-Ok': '1' },
          },
        },
      ],
    } as unknown as WorkflowSpec);
    expect(problems).toEqual([
      'spec.nodes[0].request.headers.Host: the destination is the URL host (the outbound policy checks it); an http node may not set Host',
      'spec.nodes[0].request.headers.Transfer-Encoding: the HTTP client sets the message framing: an http node may not set this header',
    ]);
  });
});
