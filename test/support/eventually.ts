// Waiting helpers for tests: poll an assertion until it passes or time runs out
// (then rethrow its last error), and a plain sleep.
export async function eventually<T>(
  check: () => T | Promise<T>,
  timeoutMs = 8_000,
  intervalMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(intervalMs);
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
