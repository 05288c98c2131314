// One execution while an engine holds it (queued or running): its record, which goes
// queued → running → succeeded | failed, its event stream, the signal that aborts it
// at shutdown, and the promise of its end.
import { isoTime } from '../time.ts';
import { EventStream, type EventOutlet } from './execution-events.ts';
import { ExecutionFailure } from './execution-failure.ts';
import type { Run } from './interpreter.ts';
import type { Execution, ExecutionError, StartRequest } from './ports.ts';
import { errorMessage } from './util.ts';

export class LiveExecution implements Run {
  readonly execution: Execution;
  readonly request: StartRequest;
  readonly stream: EventStream;
  readonly abort = new AbortController();
  /** Resolves once the run has ended and its record has been saved. */
  readonly done: Promise<void>;
  readonly #resolveDone: () => void;

  /**
   * `execution`: a queued record, whose input is the request's. Its events are
   * numbered after `seqBase` (the events of earlier runs).
   */
  constructor(execution: Execution, request: StartRequest, seqBase: number, outlet: EventOutlet) {
    this.execution = execution;
    this.request = request;
    this.stream = new EventStream(execution, seqBase, outlet);
    let resolveDone = (): void => {};
    this.done = new Promise<void>((resolve) => (resolveDone = resolve));
    this.#resolveDone = resolveDone;
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
    const failure =
      error instanceof ExecutionFailure
        ? error
        : new ExecutionFailure(
            this.abort.signal.aborted
              ? 'engine shut down'
              : `internal error: ${errorMessage(error)}`,
          );
    const detail: ExecutionError = {
      message: failure.message,
      statusCode: failure.statusCode,
      code: failure.code,
      ...(failure.nodeId ? { nodeId: failure.nodeId } : {}),
    };
    const execution = this.execution;
    execution.status = 'failed';
    execution.error = detail;
    execution.finishedAt = isoTime();
    this.stream.emit({ type: 'failed', error: detail }, execution.finishedAt);
  }

  /** The record is saved and the engine has let go of it: `done` resolves. */
  ended(): void {
    this.#resolveDone();
  }
}
