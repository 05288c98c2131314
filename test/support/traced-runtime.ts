// A dev runtime traced to an OTLP receiver on loopback, with a downstream HTTP receiver
// its http nodes may call, for the tracing suites that send requests through the
// embedded server (test/tracing/embedded, protobuf, redaction, grpc).
import type { DevOptions } from '../../roles/dev.ts';
import { createOtelTracing } from '../../runtime/tracing/otel.ts';
import type { Tracing, TracingConfig } from '../../runtime/tracing/tracing.ts';
import { startRuntime, type TestRuntime } from './gateway.ts';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.ts';
import { startReceiver, type Received } from './receiver.ts';
import { tracingConfig } from './tracing.ts';

export type Downstream = Awaited<ReturnType<typeof startReceiver>>;

export interface TracedRuntime<R extends OtlpReceiver = OtlpReceiver> {
  otlp: R;
  downstream: Downstream;
  tracing: Tracing;
  rt: TestRuntime;
  /** The webhook listener's base URL. */
  base: string;
  /** Stops the runtime, flushes and shuts the tracing down, closes both receivers. */
  stop(): Promise<void>;
}

export interface TracedRuntimeOptions<R extends OtlpReceiver = OtlpReceiver> {
  /** The status the downstream receiver answers each request with (default 200). */
  answer?: (r: Received, n: number) => number;
  /** The OTLP receiver (default: OTLP/HTTP, startOtlpReceiver). */
  receiver?: () => Promise<R>;
  /** The tracing configuration (default: tracingConfig for the OTLP receiver's endpoint). */
  config?: (otlp: R) => TracingConfig;
  /** Engine options besides outbound (the downstream receiver allowed) and tracing. */
  engine?: Omit<NonNullable<DevOptions['engine']>, 'outbound' | 'tracing'>;
  /** The manifest file written, its objects (given the downstream's URL), the triggers awaited. */
  file: string;
  manifests: (downstreamUrl: string) => object[];
  ready: string[];
}

/** Starts the receivers, the tracing and the runtime, applies the manifests and listens. */
export async function startTracedRuntime<R extends OtlpReceiver = OtlpReceiver>(
  options: TracedRuntimeOptions<R>,
): Promise<TracedRuntime<R>> {
  const closers: (() => Promise<unknown>)[] = [];
  const stop = async () => {
    for (const close of closers.reverse()) await close();
  };
  try {
    // Without a receiver of its own, R is OtlpReceiver (the default type argument).
    const otlp = await (options.receiver ?? (startOtlpReceiver as () => Promise<R>))();
    closers.push(() => otlp.close());
    const downstream = await startReceiver(options.answer);
    closers.push(() => downstream.close());
    const tracing = await createOtelTracing(options.config?.(otlp) ?? tracingConfig(otlp.endpoint));
    closers.push(() => tracing.shutdown(2000));
    const outbound = { allow: [`127.0.0.1:${downstream.port}`] };
    const rt = await startRuntime({ engine: { ...options.engine, outbound, tracing }, tracing });
    closers.push(() => rt.stop());
    await rt.apply(options.file, options.manifests(downstream.url), options.ready);
    const base = await rt.app.listen({ port: 0, host: '127.0.0.1' });
    return { otlp, downstream, tracing, rt, base, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
