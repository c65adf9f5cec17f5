package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
	"github.com/hermesd/hermesd/internal/watch"
)

// fakePipeline is a Pipeline of func fields, as Litestream's mock/. Take
// and Restore default to a tiny in-memory store that writes a real lock,
// so the agent's own bookkeeping runs as in production.
type fakePipeline struct {
	mu      sync.Mutex
	blobs   map[string]hash.Digest // blob id → bundle hash it holds
	takes   int
	take    func(ctx context.Context, in snapshot.Input) (snapshot.Result, error)
	restore func(ctx context.Context, blobID, target string) (snapshot.Restored, error)
	renewal func(now time.Time) snapshot.Renewal
	last    snapshot.Input // the last Take's input
	brain   string
	nextID  int
	hashes  bool // HashesWhileTaking
	// noLock: restores are of a snapshot without a lock, refused unless
	// unverified.
	noLock bool
}

func (p *fakePipeline) HashesWhileTaking() bool { return p.hashes }

func (p *fakePipeline) Renewal(now time.Time) snapshot.Renewal {
	p.mu.Lock()
	f := p.renewal
	p.mu.Unlock()
	if f == nil {
		return snapshot.Renewal{}
	}
	return f(now)
}

func (p *fakePipeline) setRenewal(f func(now time.Time) snapshot.Renewal) {
	p.mu.Lock()
	p.renewal = f
	p.mu.Unlock()
}

func (p *fakePipeline) lastInput() snapshot.Input {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *fakePipeline) Take(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
	p.mu.Lock()
	p.takes++
	p.last = in
	f := p.take
	p.mu.Unlock()
	if f != nil {
		return f(ctx, in)
	}
	if in.Want == (hash.Digest{}) {
		return p.takeAsHash(ctx, in)
	}
	return p.store(in.Want)
}

// takeAsHash is Take without a Want, as v3 does it: the brain is read
// (here: hashed), every file reported in Result.Reads, and an empty brain
// refused.
func (p *fakePipeline) takeAsHash(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
	if !p.hashes {
		return snapshot.Result{}, snapshot.ErrNeedsHash
	}
	hr, err := hash.Dir(ctx, p.brain, hash.Options{Overlay: in.Overlay})
	if err != nil {
		return snapshot.Result{}, err
	}
	if hr.Digest == hash.Null {
		return snapshot.Result{}, snapshot.ErrEmpty
	}
	root, err := fsys.OpenRoot(p.brain)
	if err != nil {
		return snapshot.Result{}, err
	}
	defer root.Close()
	var reads repo.FileReads
	for _, fl := range hr.Files {
		st, err := root.Lstat(fl.Path)
		if err != nil {
			return snapshot.Result{}, err
		}
		// Read long after its last change: nothing racy.
		reads.Add(repo.FileRead{Path: fl.Path, Stat: st, Start: time.Now().Add(time.Hour), Size: fl.Size, SHA256: fl.SHA256})
	}
	r, err := p.store(hr.Digest)
	r.Reads = reads
	return r, err
}

// store records a snapshot of the brain under a new blob id and writes
// the lock as the real pipeline does.
func (p *fakePipeline) store(h hash.Digest) (snapshot.Result, error) {
	p.mu.Lock()
	p.nextID++
	id := blobID(p.nextID)
	if p.blobs == nil {
		p.blobs = map[string]hash.Digest{}
	}
	p.blobs[id] = h
	p.mu.Unlock()
	lockPath := filepath.Join(p.brain, bundlelock.FileName)
	lock, err := bundlelock.Read(lockPath)
	if err != nil {
		lock = &bundlelock.Lock{}
	}
	lock.Record(h.String(), time.Now().UnixMilli())
	end := uint64(40 + p.nextID) // each blob its own end epoch
	lock.Uploaded(bundlelock.LineageEntry{BlobID: id, BundleHash: h.String(), CreatedAt: time.Now().UnixMilli(), EndEpoch: end})
	if err := bundlelock.Write(lockPath, lock); err != nil {
		return snapshot.Result{}, err
	}
	return snapshot.Result{BlobID: id, BundleHash: h, Version: lock.Version(), CreatedAt: time.Now(), EndEpoch: end}, nil
}

func (p *fakePipeline) RestoreWith(ctx context.Context, blobID, target string, opts snapshot.RestoreOptions) (snapshot.Restored, error) {
	if p.restore != nil {
		return p.restore(ctx, blobID, target)
	}
	if p.noLock {
		if !opts.Unverified {
			return snapshot.Restored{}, snapshot.ErrNoLock
		}
		r, err := restoreInto(target, blobID)
		os.Remove(filepath.Join(target, bundlelock.FileName))
		r.Verified, r.Lock, r.Unchecked = false, nil, []string{snapshot.ErrNoLock.Error()}
		r.Stripped = []string{"bin/tool: setuid not restored (recorded 4755, restored 0755)"}
		return r, err
	}
	return restoreInto(target, blobID)
}

func (p *fakePipeline) Takes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takes
}

// restoreInto writes a small brain with a lock into target, as a restore
// of blobID would.
func restoreInto(target, blobID string) (snapshot.Restored, error) {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return snapshot.Restored{}, err
	}
	if err := os.WriteFile(filepath.Join(target, "system.md"), []byte("restored from "+blobID+"\n"), 0o644); err != nil {
		return snapshot.Restored{}, err
	}
	r, err := hash.Dir(context.Background(), target, hash.Options{})
	if err != nil {
		return snapshot.Restored{}, err
	}
	lock := &bundlelock.Lock{}
	lock.Record(r.Digest.String(), 1700000000000)
	if err := bundlelock.Write(filepath.Join(target, bundlelock.FileName), lock); err != nil {
		return snapshot.Restored{}, err
	}
	return snapshot.Restored{BlobID: blobID, BundleHash: r.Digest, Verified: true, Lock: lock, Files: 1}, nil
}

func blobID(n int) string { return ref("blob" + string(rune('A'+n))) }

// ref makes name a valid blob id (padded with zeros): the agent follows
// an ENS record only when it is one (ValidatePointer).
func ref(name string) string { return name + strings.Repeat("0", walrus.BlobIDLen-len(name)) }

// fakeChain is one ENS record per name: a pointer.Reader and a
// pointer.Chain with compare-and-set semantics, and hooks to fail.
type fakeChain struct {
	mu      sync.Mutex
	records map[string]string
	writes  int
	readErr error
	write   func(u ens.Update) (ens.UpdateResult, bool) // override one write
	owners  map[string]common.Address
}

func (c *fakeChain) Owner(ctx context.Context, name string) (common.Address, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[name], nil
}

func (c *fakeChain) setOwner(name string, a common.Address) {
	c.mu.Lock()
	c.owners[name] = a
	c.mu.Unlock()
}

func newFakeChain() *fakeChain {
	return &fakeChain{records: map[string]string{}, owners: map[string]common.Address{}}
}

func (c *fakeChain) Read(ctx context.Context, name string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readErr != nil {
		return "", false, c.readErr
	}
	v, ok := c.records[name]
	return v, ok, nil
}

// fakeTx is the transaction every write of the fakes is mined in.
var fakeTx = common.HexToHash("0x7e57")

func (c *fakeChain) WriteBatches(ctx context.Context, ups []ens.Update, each func(ens.UpdateResult)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, u := range ups {
		if c.write != nil {
			if r, ok := c.write(u); ok {
				r.Index, r.Update = i, u
				each(r)
				continue
			}
		}
		r := ens.UpdateResult{Index: i, Update: u, ChainID: 1337}
		switch cur := c.records[u.Name]; {
		case cur == u.Value:
			r.Outcome = ens.Unchanged
		case cur != u.Expected:
			r.Outcome, r.Actual, r.Err = ens.Conflict, cur, errors.New("conflict")
		default:
			c.records[u.Name] = u.Value
			c.writes++
			r.Outcome, r.TxHash, r.BlockNumber, r.BatchSize = ens.Published, fakeTx, uint64(c.writes), 1
		}
		each(r)
	}
	return nil
}

func (c *fakeChain) ResyncNonce() {}

func (c *fakeChain) set(name, v string) {
	c.mu.Lock()
	c.records[name] = v
	c.mu.Unlock()
}

func (c *fakeChain) get(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records[name]
}

// rig is one agent on a real state directory with fakes for the rest.
type rig struct {
	t     *testing.T
	state string
	brain string
	seed  string
	pipe  *fakePipeline
	chain *fakeChain
	name  string
	// self is the operator's chain address; handover, when set, makes
	// the agent a handed-over one.
	self     common.Address
	handover *Handover
	// records and visibility make the agent's record live on an L2
	// (Config.Records); pointer, when set, replaces chain as the agent's
	// Pointer (what L1 resolution shows); now is the agent's clock.
	records    string
	visibility time.Duration
	pointer    Pointer
	record     Pointer
	now        func() time.Time
	// wakes counts the head's wake-ups of its publisher.
	wakes atomic.Int32
	// env is what run gives Run beside its watcher (Env.Watch).
	env Env
}

func newRig(t *testing.T) *rig {
	root := t.TempDir()
	r := &rig{t: t, state: filepath.Join(root, "state"), brain: filepath.Join(root, "brain"),
		seed: filepath.Join(root, "seed"), chain: newFakeChain(), name: "alpha.hermes.eth"}
	r.pipe = &fakePipeline{brain: r.brain}
	return r
}

// open opens the agent (closing it at the end of the test).
func (r *rig) open() *Agent {
	r.t.Helper()
	sd, err := state.Open(r.state, state.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	deps := Deps{State: sd, Pipeline: r.pipe, Now: r.now}
	cfg := Config{ID: "alpha", BrainDir: r.brain, Quiet: time.Millisecond, MaxLag: time.Second, Records: r.records}
	hcfg := pointer.Config{Agent: "alpha", Target: r.records, VisibilityTimeout: r.visibility}
	var hdeps pointer.Deps
	if r.name != "" {
		cfg.ENSName = r.name
		deps.Pointer, deps.Owners = r.chain, r.chain
		if r.pointer != nil {
			deps.Pointer = r.pointer
		}
		cfg.Self, cfg.Handover = r.self, r.handover
		hcfg.Name, hcfg.Self = r.name, r.self
		hdeps = pointer.Deps{Reader: deps.Pointer, AtTarget: r.record, Owners: r.chain}
	}
	hdeps.Now = r.now
	deps.Head = pointer.NewHead(hcfg, hdeps)
	deps.Head.OnPending(func() { r.wakes.Add(1) })
	if _, err := os.Stat(r.seed); err == nil {
		cfg.SeedDir = r.seed
	}
	a, err := New(cfg, deps)
	if err != nil {
		sd.Close()
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		a.Close()
		sd.Close()
	})
	return a
}

// reopen closes a and opens the agent again on the same state, as a
// restart would.
func (r *rig) reopen(a *Agent) *Agent {
	r.t.Helper()
	a.Close()
	a.deps.State.Close()
	return r.open()
}

// run runs a's loop on a watcher that delivers nothing until the test
// ends.
func (r *rig) run(a *Agent) {
	w := newFakeWatcher()
	ctx, cancel := context.WithCancel(r.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		env := r.env
		env.Watch = func(string, watch.Options) (Watcher, error) { return w, nil }
		a.Run(ctx, env)
	}()
	r.t.Cleanup(func() { cancel(); <-done })
}

func (r *rig) write(rel, content string) {
	r.t.Helper()
	p := filepath.Join(r.brain, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// publishOnce publishes a's pending pointer once through c, as the
// publisher's lane does: its result, or none when nothing is pending.
func publishOnce(t *testing.T, a *Agent, c pointer.Chain) []pointer.Result {
	t.Helper()
	res, ok := a.Head().PublishOnce(t.Context(), map[string]pointer.Chain{a.Head().Config().Target: c})
	if !ok {
		return nil
	}
	return []pointer.Result{res}
}

// fakeWatcher delivers batches the test pushes.
type fakeWatcher struct {
	ready chan struct{}
	mu    sync.Mutex
	batch watch.Batch
	has   bool
}

func newFakeWatcher() *fakeWatcher { return &fakeWatcher{ready: make(chan struct{}, 1)} }

func (w *fakeWatcher) Ready() <-chan struct{} { return w.ready }
func (w *fakeWatcher) Close() error           { return nil }
func (w *fakeWatcher) Take() (watch.Batch, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.batch, w.has
	w.batch, w.has = watch.Batch{}, false
	return b, ok
}
