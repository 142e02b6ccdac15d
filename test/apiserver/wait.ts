// Wait for a condition on real I/O (a server, a socket) that no injected
// clock can drive: poll every few milliseconds, fail with `what` at a deadline.
// Never used to wait for time itself.

export async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
