// A start-up check that needs Redis, run in the background: the roles start while Redis
// is unreachable (they report that on their own), so a check that fails is tried again
// a few times, then given up silently.
export function checkInBackground(
  check: () => Promise<void>,
  attempts = 10,
  delayMs = 3_000,
): void {
  void (async () => {
    for (let attempt = 0; attempt < attempts; attempt++) {
      try {
        await check();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, delayMs).unref());
      }
    }
  })();
}
