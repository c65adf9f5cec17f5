package snapshot

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/repo"
)

// RepackPolicy says when the v3 pipeline writes live objects again
// (docs/format-v3.md §10): before the packs holding them expire, and when
// the head's packs are too many or mostly dead.
type RepackPolicy struct {
	// Margin: a pack whose end epoch is at most the current epoch plus
	// Margin is re-packed. At least 1 (a pack ending with the next epoch
	// would otherwise be kept until it is gone).
	Margin uint64
	// MaxPacks bounds the packs a head lists; past it, the packs holding
	// the least live data are re-packed together. 0: no bound.
	MaxPacks int
	// MinLive re-packs a pack when less than this fraction of its bytes is
	// still referenced (0: never).
	MinLive float64
}

// epochClock is the last time a Walrus upload told the network's epoch.
// Walrus has no HTTP call that tells the current epoch; an upload's
// answer does (registeredEpoch), and epochs have a fixed length.
type epochClock struct {
	Epoch uint64    `json:"epoch"`
	At    time.Time `json:"at"`
}

// upper returns the latest epoch the network can be in at now: the
// observed epoch began at most one epoch length before it was observed.
func (c epochClock) upper(now time.Time, d time.Duration) (uint64, bool) {
	if c.Epoch == 0 || d <= 0 {
		return 0, false
	}
	el := max(now.Sub(c.At), 0)
	return c.Epoch + uint64((el+d-1)/d), true
}

// dueAt is the first time upper(t) + margin reaches end.
func (c epochClock) dueAt(end, margin uint64, d time.Duration) time.Time {
	if end <= c.Epoch+margin {
		return c.At
	}
	k := end - margin - c.Epoch // epochs still to pass
	return c.At.Add(time.Duration(k-1)*d + 1)
}

// observeEpoch records that the store was in epoch e at time at. An epoch
// later than the clock allowed means walrus.epoch_duration is longer than
// the network's epochs: packs would be re-packed too late, so say so.
func (p *Pipeline) observeEpoch(st *v3state, e uint64, at time.Time) {
	if up, ok := st.clock.upper(at, p.EpochDuration); ok && e > up {
		p.log().Warn("Walrus is in a later epoch than walrus.epoch_duration predicts; set it to the network's epoch length",
			"epoch", e, "predicted_at_most", up, "epoch_duration", p.EpochDuration)
	}
	if e >= st.clock.Epoch {
		st.clock = epochClock{Epoch: e, At: at}
	}
}

// repackPlanned is what a snapshot must write again, and why.
type repackPlanned struct {
	list   []string // packs to re-pack
	before uint64   // and every pack ending at or before this epoch (0: none)
	n      int      // packs re-packed in all
	why    []string
}

// repackPlan decides which packs of st.index the next snapshot re-packs:
// those whose end epoch is unknown or within the margin, those mostly
// dead, and the least used ones when the head lists too many.
func (p *Pipeline) repackPlan(st *v3state, now time.Time) repackPlanned {
	var pl repackPlanned
	if st.index == nil {
		return pl
	}
	packs := st.index.Packs()
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			pl.list = append(pl.list, id)
		}
	}
	expires := func(id string) bool {
		for _, pk := range packs {
			if pk.BlobID == id {
				return pk.EndEpoch != 0 && pk.EndEpoch <= pl.before
			}
		}
		return false
	}
	unknown, expiring := 0, 0
	for _, pk := range packs {
		if pk.EndEpoch == 0 {
			add(pk.BlobID)
			unknown++
		}
	}
	if cur, ok := st.clock.upper(now, p.EpochDuration); ok {
		pl.before = cur + p.margin()
		for _, pk := range packs {
			if pk.EndEpoch != 0 && pk.EndEpoch <= pl.before {
				expiring++
			}
		}
	}
	pl.n = unknown + expiring
	if unknown > 0 {
		pl.why = append(pl.why, fmt.Sprintf("%d pack(s) of unknown end epoch", unknown))
	}
	if expiring > 0 {
		pl.why = append(pl.why, fmt.Sprintf("%d pack(s) ending by epoch %d", expiring, pl.before))
	}
	if st.liveHead != "" && st.liveHead == st.index.Head() {
		pol := p.Repack
		sparse := 0
		if pol.MinLive > 0 {
			for _, u := range st.live {
				if float64(u.Live) < pol.MinLive*float64(u.Size) && !seen[u.BlobID] && !expires(u.BlobID) {
					add(u.BlobID)
					sparse++
				}
			}
		}
		pl.n += sparse
		if sparse > 0 {
			pl.why = append(pl.why, fmt.Sprintf("%d pack(s) less than %.0f%% live", sparse, 100*pol.MinLive))
		}
		if pol.MaxPacks > 0 && len(st.live) > pol.MaxPacks {
			// Merge the least used packs until a quarter of the bound is
			// free again: one compaction per many snapshots, not one per
			// snapshot.
			byLive := slices.Clone(st.live)
			slices.SortFunc(byLive, func(a, b repo.PackUse) int { return cmp.Compare(a.Live, b.Live) })
			merged := 0
			for _, u := range byLive {
				if len(st.live)-merged <= pol.MaxPacks*3/4 {
					break
				}
				if !seen[u.BlobID] && !expires(u.BlobID) {
					add(u.BlobID)
					pl.n++
				}
				merged++
			}
			pl.why = append(pl.why, fmt.Sprintf("%d live packs, more than %d", len(st.live), pol.MaxPacks))
		}
	}
	return pl
}

func (p *Pipeline) margin() uint64 { return max(p.Repack.Margin, 1) }

// Renewal says whether an unchanged brain needs a snapshot anyway.
type Renewal struct {
	// Due: take a snapshot now.
	Due    bool
	Reason string
	// At is when one will be due, when known (zero: nothing scheduled).
	At time.Time
}

// Renewal tells whether the agent's last snapshot must be renewed although
// the brain did not change: in format v3, when a pack the head needs nears
// its end epoch (a repack), when the live packs are not known here (after
// a restore on a new machine), or when the last snapshot was v1/v2 (the
// agent continues in v3). For v1/v2 it is never due: the agent refreshes
// those by age. It reads only local files.
func (p *Pipeline) Renewal(now time.Time) Renewal {
	if p.Format != FormatV3 {
		return Renewal{}
	}
	lock, err := bundlelock.Read(filepath.Join(p.BrainDir, bundlelock.FileName))
	if err != nil || lock.BlobID() == "" {
		return Renewal{}
	}
	head := lock.BlobID()
	p.v3mu.Lock()
	defer p.v3mu.Unlock()
	st, err := p.stateLocked()
	if err != nil {
		return Renewal{}
	}
	if st.index == nil || st.index.Head() != headref.ID(head) {
		return Renewal{Due: true, At: now, Reason: "the end epochs of the packs of " + head + " are not known here (or it is a v1/v2 snapshot)"}
	}
	pl := p.repackPlan(st, now)
	for _, pk := range st.index.Packs() {
		if pk.EndEpoch == 0 || pl.before > 0 && pk.EndEpoch <= pl.before {
			return Renewal{Due: true, At: now, Reason: fmt.Sprintf("pack %s ends with epoch %d (at most %d epoch(s) away)", pk.BlobID, pk.EndEpoch, p.margin())}
		}
	}
	if st.clock.Epoch == 0 {
		return Renewal{}
	}
	var at time.Time
	for _, pk := range st.index.Packs() {
		if t := st.clock.dueAt(pk.EndEpoch, p.margin(), p.EpochDuration); at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return Renewal{At: at}
}
