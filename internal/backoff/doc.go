// Package backoff paces the retries of one repeated operation, as
// Litestream's replica monitor does: capped exponential backoff with
// jitter, an error log line at most every LogEvery (with the count of
// consecutive failures and the wait), and one line when the operation
// recovers.
//
// It is hermesd's one backoff: every loop that waits for a failure to
// pass uses a Backoff per operation — an agent's sync, its state saves
// and its start-up, pointer publishing, read-backs and the shutdown
// flush, Walrus HTTP retries (through retryablehttp's Backoff hook) and
// Seal key-server requests (Wait only: they log per request).
//
// Loops that wait for a condition rather than for a failure are polls,
// not backoffs, and pace themselves: a transaction's receipt (ens), a
// SQLite lock (sqlite), the probes that notice the end of an outage
// (daemon: a fixed, jittered couple of seconds, so recovery is seen
// soon), and a Seal key server whose node has not indexed a new object
// yet (a fixed delay).
package backoff
