// Package quilt gathers the small packs of every agent of a daemon into
// Walrus quilts (docs/design.md §11): one blob holding up to 666 packs,
// each readable alone by its patch id. Walrus charges every blob a fixed
// ~64 MB of encoded metadata and its Sui transactions, so a thousand
// agents snapshotting a few KiB each pay a thousand times that as blobs
// and about once as a quilt.
//
// A Batcher is shared by all agents. Add hands it one pack and returns
// the pack's Ticket at once; Ticket.Wait blocks (Put is both): the pack
// joins the open batch of its epochs (a batch opens with its first pack
// and is stored Window later, or at once when the next pack would not
// fit: MaxPatches patches, MaxBody bytes of body, or more padding than a
// blob of its own would cost, see fits); the batch is stored as one
// quilt, every patch is read back and compared byte for byte with its
// pack, and only then does each Wait return its patch id. A pack whose
// read-back differs fails alone; a quilt that cannot be stored (after the
// Walrus client's retries and failover) fails every pack in it, and their
// agents retry their snapshots. So nothing can reference a patch that was
// not read back intact, and a pack never stays in a batch longer than
// Window (plus the store and the read-backs).
//
// The batcher calls nothing of its callers: what a caller must do while
// its pack waits (an agent gives its sync slot to the others meanwhile)
// it does around Wait, and what the pack cost comes back in its Result.
//
// Coalescing: a caller whose owner has a newer state of its brain ready
// withdraws its pack (Ticket.Withdraw), which then leaves its batch with
// ErrSuperseded, so that the agent takes its next snapshot into the same
// batch instead of paying for both, as long as at least half the window
// remains (else it stays and the newer state goes into the next batch)
// and the pack did not itself replace one that then missed its batch (so
// a busy agent is never starved of durable snapshots). A change is
// therefore stored within about 1.5 windows plus its snapshot's own time.
//
// Cost: once a quilt is stored, its charge as the publisher answered it
// is shared among its packs in proportion to their bytes, exactly
// (walruscost.Charge.Split), each share in its pack's Result.Charge,
// also when the pack's read-back then fails: a quilt is paid for whatever
// becomes of its packs after (a read-back that fails, a snapshot
// abandoned), while a pack that left its batch, or whose quilt was not
// stored, pays nothing. Whoever keeps the owner's account records the
// share from the result.
//
// A batch whose body has been sent is never withdrawn from: Wait returns
// only when its batch is done, since the batch reads the pack's bytes
// (Request.Open) until then. Close fails the batches still open and waits
// for those in flight, whose requests fail fast.
package quilt
