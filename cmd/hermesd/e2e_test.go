package main

// End-to-end tests: the real hermesd binary runs as a subprocess against a
// devnet (the chain with the real ENS contracts and the local Walrus server)
// running inside the test process. They cover what in-process tests cannot:
// SIGKILL at arbitrary moments, signals, exit codes and what a failed
// restore leaves on disk.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/pointertest"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/wait"
)

// e2eSeed is the seed of the randomized end-to-end tests: $HERMESD_E2E_SEED
// replays a run, otherwise the clock picks one (always logged).
func e2eSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("HERMESD_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HERMESD_E2E_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with HERMESD_E2E_SEED=%d)", seed, seed)
	return seed
}

// Log lines the tests wait on (the daemon's slog messages).
const (
	msgUploaded  = `msg="snapshot uploaded and verified"`
	msgPublished = `msg="pointer published"`
	msgReady     = `msg="agent ready"`
)

// brainWriter plays an agent runtime: it keeps changing a brain (small
// files rewritten, notes created and deleted, a multi-MiB "database"
// patched in place) and remembers what each file must hold.
type brainWriter struct {
	dir   string
	rng   *rand.Rand
	files map[string][]byte
	modes map[string]fs.FileMode
	notes []string
	n     int
}

const bigFile = "memory.db"

func newBrainWriter(t *testing.T, dir string, rng *rand.Rand) *brainWriter {
	t.Helper()
	b := &brainWriter{dir: dir, rng: rng, files: map[string][]byte{}, modes: map[string]fs.FileMode{}}
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	b.put(t, bigFile, big, 0o644)
	b.put(t, "system.md", []byte("You are a test agent.\n"), 0o644)
	b.put(t, "skills/reentrancy.md", []byte("---\nname: reentrancy\n---\n"), 0o600)
	b.put(t, "patterns/p1.md", []byte("pattern one\n"), 0o640)
	b.put(t, "patterns/deep/p2.md", []byte("pattern two\n"), 0o644)
	return b
}

func (b *brainWriter) put(t *testing.T, rel string, content []byte, mode fs.FileMode) {
	if err := b.write(rel, content, mode); err != nil {
		t.Fatal(err)
	}
}

func (b *brainWriter) write(rel string, content []byte, mode fs.FileMode) error {
	p := filepath.Join(b.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	// A plain (non-atomic) write, as most runtimes do it: hermesd must
	// cope with files that change while it packs them.
	if err := os.WriteFile(p, content, mode); err != nil {
		return err
	}
	b.files[rel] = content
	b.modes[rel] = mode
	return nil
}

// step makes one change.
func (b *brainWriter) step() error {
	b.n++
	switch r := b.rng.IntN(100); {
	case r < 40:
		small := []string{"system.md", "skills/reentrancy.md", "patterns/p1.md", "patterns/deep/p2.md"}
		rel := small[b.rng.IntN(len(small))]
		return b.write(rel, fmt.Appendf(nil, "%s revision %d\n%s", rel, b.n, strings.Repeat("x", b.rng.IntN(2000))), b.modes[rel])
	case r < 60:
		rel := fmt.Sprintf("notes/n%03d.md", b.n)
		b.notes = append(b.notes, rel)
		return b.write(rel, fmt.Appendf(nil, "note %d\n", b.n), 0o644)
	case r < 68 && len(b.notes) > 0:
		i := b.rng.IntN(len(b.notes))
		rel := b.notes[i]
		b.notes = slices.Delete(b.notes, i, i+1)
		delete(b.files, rel)
		delete(b.modes, rel)
		return os.Remove(filepath.Join(b.dir, filepath.FromSlash(rel)))
	default:
		// Patch 64 KiB of the database in place, like a page write.
		big := b.files[bigFile]
		off := b.rng.IntN(len(big) - 64<<10)
		for i := off; i < off+64<<10; i++ {
			big[i] = byte(b.rng.Uint32())
		}
		f, err := os.OpenFile(filepath.Join(b.dir, bigFile), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(big[off:off+64<<10], int64(off)); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}

// runUntil changes the brain at random intervals until stop is closed,
// finishing the change in progress.
func (b *brainWriter) runUntil(stop <-chan struct{}) error {
	for {
		if err := b.step(); err != nil {
			return err
		}
		pause := time.NewTimer(time.Duration(5+b.rng.IntN(100)) * time.Millisecond)
		select {
		case <-stop:
			pause.Stop()
			return nil
		case <-pause.C:
		}
	}
}

// want is what the brain must hold, in hashedTree form.
func (b *brainWriter) want() map[string]hashedFile {
	out := map[string]hashedFile{}
	for rel, c := range b.files {
		out[rel] = hashedFile{string(c), b.modes[rel]}
	}
	return out
}

// spoolBusy reports whether a snapshot of agent id is being packed,
// uploaded or verified (its spool file exists).
func spoolBusy(spool, id string) bool {
	m, _ := filepath.Glob(filepath.Join(spool, id+"-*.snapshot"))
	return len(m) > 0
}

// walrusProxy sits between hermesd and the local Walrus server and counts
// the uploads (PUT) and reads (GET) in flight, so the kill test knows, and
// can choose, which stage of a snapshot a SIGKILL interrupts.
type walrusProxy struct {
	srv      *httptest.Server
	mu       sync.Mutex
	inflight map[string]int
	started  map[string]int
	changed  chan struct{} // closed and replaced whenever a request starts
}

func newWalrusProxy(t *testing.T, target string) *walrusProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &walrusProxy{inflight: map[string]int{}, started: map[string]int{}, changed: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	quietProxy(rp)
	p.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch r.Method {
		case http.MethodPut:
			kind = "upload"
		case http.MethodGet, http.MethodHead:
			kind = "read"
		}
		p.mu.Lock()
		p.inflight[kind]++
		p.started[kind]++
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.inflight[kind]--
			p.mu.Unlock()
		}()
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// quietProxy makes a proxy answer 502 without logging when the client (a
// hermesd being killed) goes away mid-request.
func quietProxy(rp *httputil.ReverseProxy) {
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ErrorHandler = func(rw http.ResponseWriter, r *http.Request, err error) {
		rw.WriteHeader(http.StatusBadGateway)
	}
}

// state returns the requests of kind in flight and started so far.
func (p *walrusProxy) state(kind string) (inflight, started int, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight[kind], p.started[kind], p.changed
}

// waitStarted waits until more than after requests of kind have started;
// false when limit passes or proc exits first.
func (p *walrusProxy) waitStarted(kind string, after int, limit time.Duration, proc *hermesdProc) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		_, n, changed := p.state(kind)
		if n > after {
			return true
		}
		select {
		case <-changed:
		case <-proc.done:
			return false
		case <-deadline.C:
			return false
		}
	}
}

// TestE2EKill9DuringSnapshots SIGKILLs hermesd at random moments while the
// brain keeps changing, restarts it, and checks after every crash that the
// brain, its lock, the local state, the ENS pointer and the snapshot it
// names agree, that the snapshot restores to exactly the brain, and that
// no change was lost: 24 kills in format v3 (the default, with Walrus
// epochs passing so that live packs are re-packed), 6 in format v2.
func TestE2EKill9DuringSnapshots(t *testing.T) {
	t.Parallel()
	// Each format has its own devnet; they run side by side.
	t.Run("v3", func(t *testing.T) { t.Parallel(); kill9DuringSnapshots(t, "v3", 24) })
	t.Run("v2", func(t *testing.T) { t.Parallel(); kill9DuringSnapshots(t, "v2", 6) })
}

// msgRepack is logged when a v3 snapshot writes live objects again.
const msgRepack = `msg="re-packing live objects"`

// Debug lines of the quilt batcher: a pack starts waiting for its batch;
// a batch is stored and verified, or fails.
const (
	msgBatched     = `msg="pack waits for its quilt batch"`
	msgQuilted     = `msg="quilt stored and verified"`
	msgQuiltFailed = `msg="quilt batch failed"`
)

func kill9DuringSnapshots(t *testing.T, format string, iterations int) {
	seed := e2eSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const id, name = "alpha", "alpha.hermes.eth"
	w := newE2EWorld(t, devnet.Agent{ID: id, ENSName: name})
	brain := w.brain(id)
	spool := filepath.Join(w.dn.Config.StateDir, "spool")
	bw := newBrainWriter(t, brain, rng)
	wp := newWalrusProxy(t, w.dn.Walrus.URL())
	// A batch window the kills can land in: a v3 head waits that long
	// for its quilt (the debug log says when it starts waiting).
	cfg := rewriteConfig(t, w, w.dn.Walrus.URL(), wp.srv.URL, "encryption:\n", "encryption:\n  format: "+format+"\n",
		"batch_window: 100ms", "batch_window: 400ms")
	w.logLevel = "debug"

	restorer := w.restorer(id) // straight to the server
	chain := w.ensClient(false)

	// The triggers spread the kills over the pipeline: start-up and the
	// first hash; packing (v2: the spool file appears; v3: the previous
	// head's commit is read, then files are chunked and packed in
	// memory); the upload (a PUT starts); the read-back verification (a
	// GET starts after a PUT); the chain write right after a verified
	// upload; the next snapshot after a publish; and (v3) a snapshot that
	// re-packs live objects, once Walrus has moved an epoch on. On the
	// devnet each of these stages lasts some 10-50 ms.
	type trigger struct {
		name  string
		delay time.Duration // maximum random delay after the trigger
	}
	triggers := []trigger{
		{"start", 400 * time.Millisecond},
		{"spool", 30 * time.Millisecond},
		{"put", 10 * time.Millisecond},
		{"get", 4 * time.Millisecond},
		{"uploaded", 8 * time.Millisecond},
		{"published", 400 * time.Millisecond},
	}
	if format == "v3" {
		triggers[1] = trigger{"read", 30 * time.Millisecond}
		triggers = append(triggers, trigger{"repack", 30 * time.Millisecond}, trigger{"batch", 300 * time.Millisecond})
	}
	stages := map[string]int{}
	repacks := 0
	started := time.Now()

	for i := range iterations {
		tr := triggers[i%len(triggers)]
		delay := time.Duration(rng.Int64N(int64(tr.delay) + 1))
		if tr.name == "repack" {
			// One epoch passes: live packs come within the margin of
			// their end epoch (stored 5 epochs, re-packed 1 before, on an
			// epoch clock that may be one ahead) every few of these.
			if err := w.dn.Walrus.AdvanceEpochs(1); err != nil {
				t.Fatal(err)
			}
		}

		stop := make(chan struct{})
		var wg sync.WaitGroup
		var werr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			werr = bw.runUntil(stop)
		}()
		_, puts, _ := wp.state("upload")
		_, gets, _ := wp.state("read")
		p := w.start("run", "-config", cfg)
		fired := true
		putsAtFire, upAtFire := puts, 0
		switch tr.name {
		case "spool":
			fired = wait.Until(3*time.Second, func() bool { return spoolBusy(spool, id) || p.exited() })
		case "read":
			fired = wp.waitStarted("read", gets, 3*time.Second, p)
		case "put":
			fired = wp.waitStarted("upload", puts, 3*time.Second, p)
		case "get":
			if format == "v3" {
				// v3 reads the previous head before it packs: the
				// verification is the GET after a PUT.
				fired = wp.waitStarted("upload", puts, 3*time.Second, p)
				_, gets, _ = wp.state("read")
			}
			fired = fired && wp.waitStarted("read", gets, 3*time.Second, p)
		case "uploaded":
			fired = p.waitLine(msgUploaded, 1, 3*time.Second)
		case "published":
			fired = p.waitLine(msgPublished, 1, 3*time.Second)
		case "repack":
			fired = p.waitLine(msgRepack, 1, 10*time.Second)
		case "batch":
			fired = p.waitLine(msgBatched, 1, 10*time.Second)
		}
		_, putsAtFire, _ = wp.state("upload")
		upAtFire, _ = p.out.count(msgUploaded)
		if delay > 0 {
			<-time.After(delay) // the random kill moment itself, not a wait for a condition
		}
		if p.exited() {
			close(stop)
			wg.Wait()
			t.Fatalf("iteration %d: hermesd exited by itself: %v", i, p.err)
		}
		// Where the kill lands, as far as can be seen from outside.
		up, _ := p.out.count(msgUploaded)
		pub, _ := p.out.count(msgPublished)
		rp, _ := p.out.count(msgRepack)
		batched, _ := p.out.count(msgBatched)
		quilted, _ := p.out.count(msgQuilted)
		failedQ, _ := p.out.count(msgQuiltFailed)
		quilted += failedQ
		putting, _, _ := wp.state("upload")
		reading, _, _ := wp.state("read")
		_, putsNow, _ := wp.state("upload")
		_, getsNow, _ := wp.state("read")
		stage := "hash/idle"
		switch {
		case putting > 0:
			stage = "upload"
		case reading > 0 && format == "v3" && putsNow-puts == up:
			stage = "read head" // the previous head, before packing
		case reading > 0:
			stage = "verify"
		case batched > quilted:
			stage = "batch" // a pack waits for its quilt
		case spoolBusy(spool, id) && getsNow-gets > up:
			stage = "record" // verified; lock and state being written
		case spoolBusy(spool, id) && putsNow-puts > up:
			stage = "upload" // uploaded, verification about to start
		case spoolBusy(spool, id):
			stage = "pack"
		case format == "v3" && fired && (tr.name == "read" || tr.name == "repack") && putsNow == putsAtFire && up == upAtFire:
			stage = "chunk/pack" // a snapshot started; nothing uploaded yet
		case up > pub:
			stage = "publish"
		}
		if tr.name == "repack" && fired && up == upAtFire {
			stage = "repack: " + stage
		}
		p.kill9()
		close(stop)
		wg.Wait()
		if werr != nil {
			t.Fatalf("iteration %d: brain writer: %v", i, werr)
		}
		if !fired {
			stage += " (trigger timed out)"
		}
		stages[stage]++
		repacks += rp
		t.Logf("iteration %2d: killed %-9s +%3dms: %-9s (%d uploads, %d publishes, %d re-packs in this run; epoch %d)",
			i, tr.name, delay.Milliseconds(), stage, up, pub, rp, w.dn.Walrus.Epoch())

		// Restart without interference and let it settle.
		want := bw.want()
		p = w.start("run", "-config", cfg)
		// The brain to expect is the one after start-up: hermesd deletes
		// the temporary files a kill left in it (they are not brain
		// content), so hash only once the agent is ready.
		wait.Within(t, 30*time.Second, fmt.Sprintf("iteration %d: hermesd ready", i), func() bool {
			if p.exited() {
				t.Fatalf("iteration %d: restarted hermesd exited: %v", i, p.err)
			}
			rep, err := w.status()
			return err == nil && rep.Ready
		})
		wantHash := dirHash(t, brain)
		wait.Within(t, 30*time.Second, fmt.Sprintf("iteration %d: hermesd to settle on %s", i, wantHash), func() bool {
			if p.exited() {
				t.Fatalf("iteration %d: restarted hermesd exited: %v", i, p.err)
			}
			rep, err := w.status()
			if err != nil || !rep.Ready || len(rep.Agents) != 1 {
				return false
			}
			a := rep.Agents[0]
			if a.BundleHash != wantHash || a.Last == nil || a.Last.BundleHash != wantHash || a.Pending != nil || a.Published != a.Last.BlobID {
				return false
			}
			// A snapshot of the same brain (a re-pack after a catch-up)
			// may be on its way: its lock names it before the state does.
			l, err := bundlelock.Read(filepath.Join(brain, bundlelock.FileName))
			return err == nil && l.BlobID() == a.Published
		})
		checkConsistent(t, w, i, id, name, wantHash, want, restorer, chain)
		p.signal(syscall.SIGTERM)
		if code := p.wait(15 * time.Second); code != 0 {
			t.Fatalf("iteration %d: settled hermesd exited %d on SIGTERM", i, code)
		}
		// After a clean exit, not while running: a settled daemon may
		// start a re-pack at any time, and every pack is spooled.
		if leftovers := listDir(t, spool); len(leftovers) > 0 {
			t.Errorf("iteration %d: spool holds %v after a clean exit", i, leftovers)
		}
		rp, _ = p.out.count(msgRepack)
		repacks += rp
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d kills in %v; stages hit: %v; %d re-packing snapshots", iterations, time.Since(started).Round(time.Millisecond), stages, repacks)
	if len(stages) < 3 {
		t.Errorf("the kills landed in fewer than 3 stages: %v", stages)
	}
	if format == "v3" && repacks == 0 {
		t.Errorf("no snapshot re-packed live objects although Walrus moved %d epochs on", w.dn.Walrus.Epoch())
	}
}

// TestE2ECrashLeftoversInBrain plants what a SIGKILL in the middle of
// hermesd's own atomic writes into the brain leaves behind — the temporary
// files of bundle.lock.json and receipts.ndjson, half written — and checks
// that the next start removes them instead of snapshotting them as brain
// content. (The random kills above rarely hit that window of a few
// milliseconds, so it is set up here deterministically.)
func TestE2ECrashLeftoversInBrain(t *testing.T) {
	t.Parallel()
	const id, name = "alpha", "alpha.hermes.eth"
	w := newE2EWorld(t, devnet.Agent{ID: id, ENSName: name})
	brain := w.brain(id)
	bw := newBrainWriter(t, brain, rand.New(rand.NewPCG(4, 4)))
	settleAgents(t, w, id)

	leftovers := map[string]string{
		".bundle.lock.json.tmp-1234567": "{\n  \"bundleHash\": \"0x12",
		".receipts.ndjson.tmp-7654321":  `{"type":"snapshot","agentId":"alph`,
	}
	for n, c := range leftovers {
		if err := os.WriteFile(filepath.Join(brain, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A change made while hermesd was down, so the next start snapshots.
	bw.put(t, "system.md", []byte("changed while stopped\n"), 0o644)
	want := bw.want()
	p := w.run()
	var wantHash string
	wait.Within(t, 20*time.Second, "hermesd to settle", func() bool {
		rep, err := w.status()
		if err != nil || !rep.Ready || len(rep.Agents) != 1 {
			return false
		}
		a := rep.Agents[0]
		wantHash = a.BundleHash
		return a.Last != nil && a.Last.BundleHash == a.BundleHash && a.Pending == nil && a.Published == a.Last.BlobID &&
			a.Last.BundleHash != ""
	})
	for n := range leftovers {
		if _, err := os.Lstat(filepath.Join(brain, n)); err == nil {
			t.Errorf("%s is still in the brain", n)
		}
	}
	if h := dirHash(t, brain); h != wantHash {
		t.Fatalf("brain hashes to %s, hermesd settled on %s", h, wantHash)
	}
	restorer := w.restorer(id)
	checkConsistent(t, w, 0, id, name, wantHash, want, restorer, w.ensClient(false))
	p.signal(syscall.SIGTERM)
	if code := p.wait(15 * time.Second); code != 0 {
		t.Errorf("exit %d on SIGTERM", code)
	}
}

// checkConsistent verifies a settled agent against the chain, its state
// file, its lock, its brain and the blob the pointer names.
func checkConsistent(t *testing.T, w *e2eWorld, i int, id, name, wantHash string, want map[string]hashedFile,
	restorer *snapshot.Pipeline, chain interface {
		Read(context.Context, string) (string, error)
	}) {
	t.Helper()
	st := w.agentState(id)
	ptr, err := chain.Read(t.Context(), name)
	if err != nil {
		t.Fatalf("iteration %d: read pointer: %v", i, err)
	}
	// (a) the pointer, the published value and the last snapshot agree,
	// and no pointer is left pending.
	if st.Last == nil || ptr != st.Published || ptr != st.Last.BlobID || st.Pending != nil {
		t.Fatalf("iteration %d: pointer %s, state published %s, last %+v, pending %+v", i, ptr, st.Published, st.Last, st.Pending)
	}
	// (b) the brain hashes to what its lock and the state record, and the
	// lock names the published blob.
	brain := w.brain(id)
	lock := readLock(t, brain)
	if lock.BundleHash() != wantHash || st.Last.BundleHash != wantHash || lock.BlobID() != ptr {
		t.Fatalf("iteration %d: brain %s, lock %s (blob %s), state %s (blob %s)",
			i, wantHash, lock.BundleHash(), lock.BlobID(), st.Last.BundleHash, ptr)
	}
	// (d) nothing local was lost: the brain holds exactly what the writer
	// wrote last.
	got := hashedTree(t, brain)
	if d := sameTree(want, got); len(d) > 0 {
		t.Fatalf("iteration %d: brain differs from what was written: %v", i, d)
	}
	// (c) the published blob restores to the same files; a v3 head needs
	// no pack past its end epoch.
	if f, err := restorer.BlobFormat(t.Context(), ptr); err == nil && f == snapshot.FormatV3 {
		r, err := restorer.OpenV3(t.Context(), ptr)
		if err != nil {
			t.Fatalf("iteration %d: open v3 head %s: %v", i, ptr, err)
		}
		epoch := uint64(w.dn.Walrus.Epoch())
		for _, pk := range r.Commit().Packs {
			if pk.EndEpoch <= epoch {
				t.Fatalf("iteration %d (epoch %d): head %s needs pack %s, which ends with epoch %d", i, epoch, ptr, pk.BlobID, pk.EndEpoch)
			}
		}
	}
	scratch := filepath.Join(t.TempDir(), "restored")
	r, err := restorer.Restore(t.Context(), ptr, scratch)
	if err != nil {
		t.Fatalf("iteration %d: restore %s: %v", i, ptr, err)
	}
	if r.BundleHash.String() != wantHash {
		t.Fatalf("iteration %d: restored bundle hash %s, want %s", i, r.BundleHash, wantHash)
	}
	if d := sameTree(got, hashedTree(t, scratch)); len(d) > 0 {
		t.Fatalf("iteration %d: restored blob differs from the brain: %v", i, d)
	}
	os.RemoveAll(scratch)
}

// settleAgents runs hermesd until every listed agent's newest snapshot is
// published, then stops it with SIGTERM (exit 0).
func settleAgents(t *testing.T, w *e2eWorld, ids ...string) {
	t.Helper()
	settleAgentsWith(t, w, w.dn.ConfigPath, ids...)
}

// settleAgentsWith is settleAgents with the configuration file cfg.
func settleAgentsWith(t *testing.T, w *e2eWorld, cfg string, ids ...string) {
	t.Helper()
	p := w.start("run", "-config", cfg)
	wait.Within(t, 20*time.Second, fmt.Sprintf("%v to be published", ids), func() bool {
		rep, err := w.status()
		if err != nil || !rep.Ready {
			return false
		}
		for _, a := range rep.Agents {
			if slices.Contains(ids, a.ID) && (a.Last == nil || a.Pending != nil || a.Published != a.Last.BlobID) {
				return false
			}
		}
		return true
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(15 * time.Second); code != 0 {
		t.Fatalf("hermesd exited %d on SIGTERM", code)
	}
}

// runOnce runs a hermesd command to completion and returns its exit code,
// stdout and stderr (both also go to the test's log).
func (w *e2eWorld) runOnce(args ...string) (int, string, string) {
	w.t.Helper()
	w.runs++
	fmt.Fprintf(w.logf, "=== hermesd #%d: %s\n", w.runs, strings.Join(args, " "))
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(w.t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesdBinary(w.t), args...)
	cmd.Env = w.env()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	fmt.Fprintf(w.logf, "--- stdout:\n%s--- stderr:\n%s--- exit: %v\n", stdout.String(), stderr.String(), err)
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		w.t.Fatalf("hermesd %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// lastLine is the final line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestE2ERestoreFailures runs `hermesd restore` against blobs that must not
// restore — corrupted, another agent's, under a wrong key, missing — and
// checks the exit code, the one-line reason, and that the target directory
// is exactly as it was.
func TestE2ERestoreFailures(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t,
		devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"},
		devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"},
		devnet.Agent{ID: "gamma", ENSName: "gamma.hermes.eth"}, // never snapshotted
	)
	for _, id := range []string{"alpha", "beta"} {
		bw := newBrainWriter(t, w.brain(id), rand.New(rand.NewPCG(1, uint64(len(id)))))
		bw.put(t, "whoami.md", []byte("I am "+id+"\n"), 0o644)
	}
	settleAgents(t, w, "alpha", "beta")
	alphaBlob, betaBlob := w.pointer("alpha.hermes.eth"), w.pointer("beta.hermes.eth")
	if alphaBlob == "" || betaBlob == "" || alphaBlob == betaBlob {
		t.Fatalf("pointers: alpha %q, beta %q", alphaBlob, betaBlob)
	}
	alphaFiles := hashedTree(t, w.brain("alpha"))
	cfg := w.dn.ConfigPath
	scratch := t.TempDir()

	// The good path first, so the failures below are the blobs' fault.
	code, stdout, stderr := w.runOnce("restore", "-config", cfg, "--dir", filepath.Join(scratch, "good"), "alpha")
	if code != 0 {
		t.Fatalf("good restore: exit %d: %s", code, stderr)
	}
	if d := sameTree(alphaFiles, hashedTree(t, filepath.Join(scratch, "good"))); len(d) > 0 {
		t.Fatalf("good restore differs: %v (%s)", d, stdout)
	}

	// The agent's own brain goes away, so `restore` without --dir has
	// something to do.
	if err := os.Rename(w.brain("alpha"), w.brain("alpha")+".away"); err != nil {
		t.Fatal(err)
	}
	brains := filepath.Dir(w.brain("alpha"))
	brainsBefore := listDir(t, brains)
	signer := w.ensClient(true)
	setPointer := func(t *testing.T, value, expected string) {
		t.Helper()
		if _, err := signer.Write(t.Context(), "alpha.hermes.eth", value, expected); err != nil {
			t.Fatal(err)
		}
	}
	origKey, err := os.ReadFile(w.dn.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	writeKey := func(t *testing.T, b []byte) {
		t.Helper()
		if err := os.WriteFile(w.dn.KeyPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(w.dn.KeyPath, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(t *testing.T) {
		t.Helper()
		flipPackByte(t, w.dn, alphaBlob, 0x20)
	}

	missingBlob := strings.Repeat("A", 43)
	cases := []struct {
		name     string
		setup    func(t *testing.T)
		teardown func(t *testing.T)
		code     int
		reason   []string // each must appear in the last stderr line ("a|b": either)
	}{
		{
			name:     "corrupt blob",
			setup:    flip,
			teardown: flip,
			code:     exitAuth,
			reason:   []string{"authenticat|corrupt"},
		},
		{
			name:     "blob of another agent",
			setup:    func(t *testing.T) { setPointer(t, betaBlob, alphaBlob) },
			teardown: func(t *testing.T) { setPointer(t, alphaBlob, betaBlob) },
			code:     exitAuth,
			reason:   []string{"belongs to another agent", `decrypts as "beta.hermes.eth"|snapshot of "beta.hermes.eth"`},
		},
		{
			name: "wrong key",
			setup: func(t *testing.T) {
				k, err := cipher.GenerateKey()
				if err != nil {
					t.Fatal(err)
				}
				writeKey(t, []byte(k.Secret()+"\n"))
			},
			teardown: func(t *testing.T) { writeKey(t, origKey) },
			code:     exitAuth,
			reason:   []string{"authenticat|another key"},
		},
		{
			name:     "missing blob",
			setup:    func(t *testing.T) { setPointer(t, missingBlob, alphaBlob) },
			teardown: func(t *testing.T) { setPointer(t, alphaBlob, missingBlob) },
			code:     exitNotFound,
			reason:   []string{missingBlob},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(t)
			defer tc.teardown(t)
			parent := filepath.Join(scratch, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.MkdirAll(filepath.Join(parent, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
			targets := []struct {
				name   string
				args   []string
				dir    string // the target
				exists bool
				parent []string // the parent's entries afterwards
			}{
				{"missing --dir", []string{"--dir", filepath.Join(parent, "missing")}, filepath.Join(parent, "missing"), false, []string{"empty"}},
				{"empty --dir", []string{"--dir", filepath.Join(parent, "empty")}, filepath.Join(parent, "empty"), true, []string{"empty"}},
				{"the agent's brain", nil, w.brain("alpha"), false, brainsBefore},
			}
			for _, tg := range targets {
				args := append(append([]string{"restore", "-config", cfg}, tg.args...), "alpha")
				code, _, stderr := w.runOnce(args...)
				line := lastLine(stderr)
				if code != tc.code {
					t.Errorf("%s: exit %d, want %d (%s)", tg.name, code, tc.code, line)
				}
				if !strings.HasPrefix(line, "hermesd: ") {
					t.Errorf("%s: last stderr line is not hermesd's reason: %q", tg.name, line)
				}
				for _, r := range tc.reason {
					if !slices.ContainsFunc(strings.Split(r, "|"), func(s string) bool { return strings.Contains(line, s) }) {
						t.Errorf("%s: reason %q does not mention %q", tg.name, line, r)
					}
				}
				t.Logf("%s: exit %d: %s", tg.name, code, line)
				ents := listDir(t, tg.dir)
				if _, err := os.Stat(tg.dir); tg.exists != (err == nil) || len(ents) > 0 {
					t.Errorf("%s: target %s touched: exists=%v (%v), entries %v", tg.name, tg.dir, err == nil, err, ents)
				}
				if got := listDir(t, filepath.Dir(tg.dir)); !slices.Equal(got, tg.parent) {
					t.Errorf("%s: beside the target: %v, want %v", tg.name, got, tg.parent)
				}
			}
			if got := listDir(t, filepath.Join(w.dn.Config.StateDir, "spool")); len(got) > 0 {
				t.Errorf("spool holds %v", got)
			}
		})
	}

	t.Run("fresh agent without a pointer", func(t *testing.T) {
		target := filepath.Join(scratch, "fresh-dir")
		code, _, stderr := w.runOnce("restore", "-config", cfg, "--dir", target, "gamma")
		if line := lastLine(stderr); code != exitNotFound || !strings.Contains(line, "no agent-snapshot record") {
			t.Errorf("--dir: exit %d (%s), want %d", code, line, exitNotFound)
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("--dir target %s was created", target)
		}
		os.RemoveAll(w.brain("gamma"))
		code, stdout, stderr := w.runOnce("restore", "-config", cfg, "gamma")
		if code != 0 || !strings.Contains(stdout, "fresh") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 0 and a fresh start", code, stdout, lastLine(stderr))
		}
		if _, err := os.Stat(w.brain("gamma")); err != nil {
			t.Errorf("fresh brain directory not created: %v", err)
		}
		if ents := listDir(t, w.brain("gamma")); len(ents) > 0 {
			t.Errorf("fresh brain holds %v", ents)
		}
	})

	// Everything restored: the agent's own brain comes back.
	t.Run("restore after the faults are gone", func(t *testing.T) {
		code, stdout, stderr := w.runOnce("restore", "-config", cfg, "alpha")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, lastLine(stderr))
		}
		if d := sameTree(alphaFiles, hashedTree(t, w.brain("alpha"))); len(d) > 0 {
			t.Errorf("restored brain differs: %v (%s)", d, stdout)
		}
	})
}

// TestE2ESecondRunRefused starts two daemons on one state directory: the
// second must refuse with exit 5 and a clear reason while the first keeps
// serving.
func TestE2ESecondRunRefused(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "solo", ENSName: "solo.hermes.eth"})
	newBrainWriter(t, w.brain("solo"), rand.New(rand.NewPCG(2, 2)))
	first := w.run()
	first.mustWaitLine(msgReady, 1, 20*time.Second)
	wait.Within(t, 10*time.Second, "the first daemon to serve /healthz", w.healthy)

	code, _, stderr := w.runOnce("run", "-config", w.dn.ConfigPath)
	line := lastLine(stderr)
	if code != exitLocked {
		t.Errorf("second run: exit %d, want %d (%s)", code, exitLocked, line)
	}
	for _, want := range []string{"in use by another hermesd process", w.dn.Config.StateDir, "pid " + strconv.Itoa(first.pid())} {
		if !strings.Contains(line, want) {
			t.Errorf("second run's reason %q does not mention %q", line, want)
		}
	}
	if first.exited() {
		t.Fatalf("first daemon exited: %v", first.err)
	}
	if !w.healthy() {
		t.Error("first daemon stopped serving /healthz")
	}
	first.signal(syscall.SIGTERM)
	if code := first.wait(15 * time.Second); code != 0 {
		t.Errorf("first daemon exited %d on SIGTERM", code)
	}
}

// rewriteConfig writes a copy of the devnet configuration with every
// occurrence of each old string (given in old, new pairs) replaced.
func rewriteConfig(t *testing.T, w *e2eWorld, pairs ...string) string {
	t.Helper()
	return rewriteConfigFile(t, w.dn.ConfigPath, pairs...)
}

// rewriteConfigFile is rewriteConfig on any configuration file.
func rewriteConfigFile(t *testing.T, path string, pairs ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("configuration %s has no %q", path, pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	p := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestE2ESigtermFlush checks the shutdown path: SIGTERM right after a
// verified upload still publishes its pointer before exiting 0; with the
// chain hanging, SIGTERM gives up after shutdown_timeout and a second
// SIGINT aborts the flush at once — either way the pointer stays pending in
// the state directory and is published by the next start.
func TestE2ESigtermFlush(t *testing.T) {
	t.Parallel()
	const id, name = "alpha", "alpha.hermes.eth"
	w := newE2EWorld(t, devnet.Agent{ID: id, ENSName: name})
	brain := w.brain(id)
	bw := newBrainWriter(t, brain, rand.New(rand.NewPCG(3, 3)))
	const limit = 2 * time.Second
	proxy := pointertest.NewChainProxy(t, w.dn.Chain.URL())
	// The chain is reached through the proxy, and the flush may take limit.
	cfg := rewriteConfig(t, w, "rpc: "+w.dn.Chain.URL(), "rpc: "+proxy.URL,
		"shutdown_timeout: 10s", "shutdown_timeout: "+limit.String())
	run := func() *hermesdProc { return w.start("run", "-config", cfg) }

	t.Run("flush publishes", func(t *testing.T) {
		for round := range 3 {
			// Round 0: the pointer may well be published before the
			// signal. Later rounds: transactions take 300 ms, so the
			// publish is still in flight when SIGTERM arrives and the
			// flush must do it.
			slow := round > 0
			proxy.Pass()
			if slow {
				proxy.Delay(300 * time.Millisecond)
			}
			p := run()
			p.mustWaitLine(msgReady, 1, 20*time.Second)
			if round == 0 {
				p.mustWaitLine(msgPublished, 1, 20*time.Second)
			}
			if err := bw.write("system.md", fmt.Appendf(nil, "round %d\n", round), 0o644); err != nil {
				t.Fatal(err)
			}
			// Wait for this write's snapshot, not for an upload count:
			// another upload (of the write half done, since the write
			// truncates first; a re-pack) may come first, and the SIGTERM
			// would then flush a snapshot that is not the brain's state.
			p.mustWaitUpload(dirHash(t, brain), 20*time.Second)
			start := time.Now()
			p.signal(syscall.SIGTERM)
			code := p.wait(limit + 5*time.Second)
			took := time.Since(start)
			if code != 0 {
				t.Fatalf("round %d: exit %d after SIGTERM", round, code)
			}
			if took > limit+2*time.Second {
				t.Errorf("round %d: shutdown took %v (limit %v)", round, took, limit)
			}
			st := w.agentState(id)
			if st.Pending != nil || st.Last == nil || st.Published != st.Last.BlobID {
				t.Fatalf("round %d: after exit: pending %+v, published %s, last %+v", round, st.Pending, st.Published, st.Last)
			}
			if ptr := w.pointer(name); ptr != st.Last.BlobID {
				t.Fatalf("round %d: ENS names %s, last verified blob is %s", round, ptr, st.Last.BlobID)
			}
			if h := dirHash(t, brain); st.Last.BundleHash != h {
				t.Fatalf("round %d: last snapshot %s, brain %s", round, st.Last.BundleHash, h)
			}
			out := p.out.String()
			at := strings.Index(out, "flushing pending pointers")
			flushed := at >= 0 && strings.Contains(out[at:], msgPublished)
			if slow && !flushed {
				t.Errorf("round %d: the pointer was not published by the shutdown flush", round)
			}
			t.Logf("round %d: SIGTERM after the upload: exit 0 in %v, published by the flush: %v", round, took.Round(time.Millisecond), flushed)
		}
		proxy.Pass()
	})

	// The chain stops taking transactions: sends hang until the caller
	// gives up.
	var pending string
	t.Run("flush gives up at shutdown_timeout", func(t *testing.T) {
		p := run()
		p.mustWaitLine(msgReady, 1, 20*time.Second)
		proxy.Hold()
		before := w.pointer(name)
		if err := bw.write("system.md", []byte("written while the chain hangs\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p.mustWaitLine(msgUploaded, 1, 20*time.Second)
		start := time.Now()
		p.signal(syscall.SIGTERM)
		// A generous deadline: the process must end, but how long past
		// the limit depends on the machine's load.
		code := p.wait(limit + 60*time.Second)
		took := time.Since(start)
		t.Logf("SIGTERM with a hanging chain: exit %d after %v (limit %v)", code, took.Round(time.Millisecond), limit)
		// It kept trying until the limit (a lower bound cannot flake),
		// said it stopped there, and exited 1: a supervisor must know
		// that a pointer stayed pending.
		if took < limit {
			t.Errorf("shutdown took %v, less than the %v limit", took, limit)
		}
		if code != exitFailure {
			t.Errorf("exit %d, want %d (pointers left pending)", code, exitFailure)
		}
		out := p.out.String()
		if !strings.Contains(out, "the flush reached shutdown_timeout") || !strings.Contains(out, "pointers still pending at shutdown") {
			t.Errorf("the log does not say the flush stopped at the limit with a pointer pending:\n%s", out)
		}
		st := w.agentState(id)
		if st.Pending == nil || st.Last == nil || st.Pending.Value != st.Last.BlobID {
			t.Fatalf("the unpublished snapshot is not pending: pending %+v, last %+v", st.Pending, st.Last)
		}
		if ptr := w.pointer(name); ptr != before {
			t.Fatalf("pointer moved to %s with the chain hanging", ptr)
		}
		pending = st.Pending.Value
	})

	t.Run("second signal aborts the flush", func(t *testing.T) {
		if pending == "" {
			t.Fatal("the previous subtest left no pending pointer")
		}
		p := run()
		p.mustWaitLine(msgReady, 1, 20*time.Second)
		p.signal(syscall.SIGINT)
		p.mustWaitLine("flushing pending pointers", 1, 5*time.Second)
		start := time.Now()
		p.signal(syscall.SIGINT)
		code := p.wait(limit + 60*time.Second)
		t.Logf("second SIGINT: exit %d after %v", code, time.Since(start).Round(time.Millisecond))
		// The flush was cut short by the signal, not by the limit.
		out := p.out.String()
		if !strings.Contains(out, "second signal: aborting the flush") {
			t.Error("no log line says the flush was aborted")
		}
		if strings.Contains(out, "the flush reached shutdown_timeout") {
			t.Error("the flush ran to its limit despite the second signal")
		}
		if code != exitFailure {
			t.Errorf("exit %d, want %d (a pointer left pending)", code, exitFailure)
		}
		st := w.agentState(id)
		if st.Pending == nil || st.Pending.Value != pending {
			t.Fatalf("pending pointer lost: %+v", st.Pending)
		}
	})

	t.Run("next start publishes", func(t *testing.T) {
		if pending == "" {
			t.Fatal("the previous subtests left no pending pointer")
		}
		p := w.run() // straight to the chain
		wait.Within(t, 20*time.Second, "the pending pointer to be published", func() bool {
			return w.pointer(name) == pending
		})
		p.signal(syscall.SIGTERM)
		if code := p.wait(15 * time.Second); code != 0 {
			t.Errorf("exit %d", code)
		}
		if st := w.agentState(id); st.Pending != nil || st.Published != pending {
			t.Errorf("after publishing: pending %+v, published %s", st.Pending, st.Published)
		}
	})
}
