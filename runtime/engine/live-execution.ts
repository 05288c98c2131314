// One execution while an engine holds it (queued or running): its record, which goes
// queued → running → succeeded | failed, its event stream, the signal that aborts it
// at shutdown, and the promise of its end.
import { isoTime } from '../time.ts';
import { EventStream, type EventOutlet } from './execution-events.ts';
import { ExecutionFailure } from './execution-failure.ts';
import type { Run } from './interpreter.ts';
import type { Execution, ExecutionError, StartRequest } from './ports.ts';
import type { TraceSpan } from '../tracing/tracing.ts';
import { errorMessage } from './util.ts';

export class LiveExecution implements Run {
  readonly execution: Execution;
  readonly request: StartRequest;
  readonly stream: EventStream;
  /** Made when first asked for: most runs end without anything waiting on a signal. */
  #abort: AbortController | undefined;
  /** Resolves once the run has ended and its record has been saved. */
  readonly done: Promise<void>;
  /**
   * Run again from a queued record (a worker's job): a store failure leaves it for the
   * queue to run again instead of finishing it here.
   */
  readonly resumed: boolean;
  /** A worker's run: its job's queue entry, acknowledged with the final record (engine.resume). */
  queueEntry: string | undefined;
  /** The span of the attempt running, when tracing is on (ADR 0040). */
  span: TraceSpan | undefined;
  readonly #resolveDone: () => void;

  /**
   * `execution`: a queued record, whose input is the request's. Its events are
   * numbered after `seqBase` (the events of earlier runs).
   */
  constructor(
    execution: Execution,
    request: StartRequest,
    seqBase: number,
    outlet: EventOutlet,
    resumed = false,
  ) {
    this.execution = execution;
    this.resumed = resumed;
    this.request = request;
    this.stream = new EventStream(execution, seqBase, outlet);
    let resolveDone = (): void => {};
    this.done = new Promise<void>((resolve) => (resolveDone = resolve));
    this.#resolveDone = resolveDone;
  }

  /** Aborts the run at shutdown: delays and outbound requests wait on its signal. */
  get abort(): AbortController {
    return (this.#abort ??= new AbortController());
  }

  /** Whether the run was aborted (without making the controller to ask). */
  get aborted(): boolean {
    return this.#abort?.signal.aborted ?? false;
  }

  /** A copy of the record as it is now. */
  snapshot(): Execution {
    return structuredClone(this.execution);
  }

  markRunning(): void {
    this.execution.status = 'running';
    this.execution.startedAt = isoTime();
  }

  succeed(output: unknown): void {
    const execution = this.execution;
    execution.status = 'succeeded';
    execution.output = output;
    execution.finishedAt = isoTime();
    this.stream.emit({ type: 'completed', output }, execution.finishedAt);
  }

  /** `error`: an ExecutionFailure, else an internal error (or shutdown, once aborted). */
  fail(error: unknown): void {
    const detail = this.failure(error);
    const execution = this.execution;
    execution.status = 'failed';
    execution.error = detail;
    execution.finishedAt = isoTime();
    // One that waited for its next attempt (an engine closing) has none now.
    delete execution.nextAttemptAt;
    this.stream.emit({ type: 'failed', error: detail }, execution.finishedAt);
  }

  /**
   * Ends the execution as failed with its retry policy exhausted: the record says when it
   * went to the dead-letter list, the terminal event says that it did.
   */
  deadLetter(error: unknown): void {
    const detail = this.failure(error);
    const execution = this.execution;
    execution.status = 'failed';
    execution.error = detail;
    execution.finishedAt = execution.deadLetteredAt = isoTime();
    this.stream.emit({ type: 'failed', error: detail, deadLettered: true }, execution.finishedAt);
  }

  /**
   * The attempt failed and another is due in `retryInMs`: the record waits (status
   * queued, nextAttemptAt) with the failure in `failedAttempts`, and an attempt.failed
   * event says so.
   */
  attemptFailed(error: unknown, retryInMs: number): void {
    const detail = this.failure(error);
    const execution = this.execution;
    const attempt = execution.attempt ?? 1;
    const finishedAt = isoTime();
    const nextAttemptAt = isoTime(Date.now() + retryInMs);
    (execution.failedAttempts ??= []).push({
      attempt,
      startedAt: execution.startedAt ?? execution.createdAt,
      finishedAt,
      error: detail,
      retryInMs,
    });
    execution.status = 'queued';
    execution.nextAttemptAt = nextAttemptAt;
    delete execution.startedAt;
    this.stream.emit(
      { type: 'attempt.failed', attempt, error: detail, retryInMs, nextAttemptAt },
      finishedAt,
    );
  }

  /** The next attempt starts (after attemptFailed): numbered, announced with attempt.started. */
  nextAttempt(): void {
    const execution = this.execution;
    execution.attempt = (execution.attempt ?? 1) + 1;
    delete execution.nextAttemptAt;
    this.stream.emit({ type: 'attempt.started', attempt: execution.attempt }, isoTime());
  }

  /** The error detail of a failure: an ExecutionFailure, else internal (or shutdown). */
  failure(error: unknown): ExecutionError {
    const failure =
      error instanceof ExecutionFailure
        ? error
        : this.aborted
          ? new ExecutionFailure('engine shut down', { kind: 'shutdown' })
          : new ExecutionFailure(`internal error: ${errorMessage(error)}`, { kind: 'internal' });
    return {
      message: failure.message,
      statusCode: failure.statusCode,
      code: failure.code,
      kind: failure.kind,
      ...(failure.nodeId ? { nodeId: failure.nodeId } : {}),
    };
  }

  /** The record is saved and the engine has let go of it: `done` resolves. */
  ended(): void {
    this.#resolveDone();
  }
}
