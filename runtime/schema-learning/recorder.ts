// What schema learning records, and when: for a trigger in learning mode
// (spec.schema.learning.enabled, automatic IO), the parsed JSON body of each request
// the gateway accepted (it passed the input check and its execution started: a request
// refused after the check, an SSE Stream without a stream slot say, is none; a retry
// under an Idempotency-Key only when its own start created the execution), and the
// output of each execution that passed the output check. Nothing else: no headers, query, path parameters or metadata, so no
// credentials. Non-JSON requests (forms, XML, text) are served but not sampled.
// Recording never delays or fails a request: it is started, not awaited, and a store
// failure is only reported (`onError`).
import type { RouteRecord } from '../../api/records/records.ts';
import { isLearning } from '../../api/schemas.ts';
import type { SampleBounds, SampleSide, SampleStore } from './samples.ts';

/** Default samples kept per side when the trigger does not say (spec.schema.learning.maxSamples). */
export const DEFAULT_MAX_SAMPLES = 50;
/** Bytes of JSON text kept per trigger and side; a bigger single sample is not kept. */
export const DEFAULT_MAX_SAMPLE_BYTES = 256 * 1024;

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** What recording needs of a route: its key and its schema configuration. */
export type LearningRoute = Pick<RouteRecord, 'key' | 'spec'>;

export interface SampleRecorderOptions {
  store: SampleStore;
  /** Bytes kept per trigger and side (default 256 KiB). */
  maxBytes?: number;
  onError?: (error: unknown) => void;
}

export class SampleRecorder {
  readonly store: SampleStore;
  readonly #maxBytes: number;
  readonly #onError: (error: unknown) => void;

  constructor(options: SampleRecorderOptions) {
    this.store = options.store;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_SAMPLE_BYTES;
    this.#onError = options.onError ?? (() => {});
  }

  /** The bounds of a trigger's samples. */
  bounds(route: LearningRoute): SampleBounds {
    return {
      maxSamples: route.spec.schema?.learning?.maxSamples ?? DEFAULT_MAX_SAMPLES,
      maxBytes: this.#maxBytes,
    };
  }

  /** An accepted request's body (checked, its execution started); kept when it is JSON and the route learns. */
  request(route: LearningRoute, body: unknown, contentType: string | undefined): void {
    if (!isLearning(route.spec.schema)) return;
    if (contentType === undefined || !JSON_TYPE.test(contentType)) return;
    this.#add(route, 'requests', body);
  }

  /** A workflow's final output that passed the output check; kept when the route learns. */
  response(route: LearningRoute, output: unknown): void {
    if (!isLearning(route.spec.schema)) return;
    this.#add(route, 'responses', output);
  }

  #add(route: LearningRoute, side: SampleSide, value: unknown): void {
    let json: string | undefined;
    try {
      json = JSON.stringify(value);
    } catch (error) {
      this.#onError(error);
      return;
    }
    if (json === undefined) return; // not JSON (undefined): nothing to learn from
    this.store.add(route.key, side, json, this.bounds(route)).catch(this.#onError);
  }
}
