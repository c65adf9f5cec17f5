package snapshot_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// sealWorld is three local Seal key servers on 127.0.0.1 (2-of-3) and the
// requester whose snapshots they guard.
type sealWorld struct {
	t       *testing.T
	pkg     seal.Address
	servers []*devnet.KeyServer
	cfg     seal.Config
	user    *seal.SuiKey
}

var testPackage = seal.MustParseAddress("0x" + strings.Repeat("5e", 32))

// newSealWorld starts three key servers enforcing policy (account_based
// when nil).
func newSealWorld(t *testing.T, policy sealserver.Policy) *sealWorld {
	t.Helper()
	if policy == nil {
		policy = sealserver.AccountBased()
	}
	user, err := seal.GenerateSuiKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &sealWorld{t: t, pkg: testPackage, user: user}
	w.cfg = seal.Config{PackageID: w.pkg, Threshold: 2}
	for range 3 {
		mk, err := seal.GenerateMasterKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := devnet.StartKeyServer(sealserver.Config{
			ObjectID: sealserver.LocalObjectID(mk.PublicKey()), MasterKey: mk, Policy: policy,
		}, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ks.Stop() })
		w.servers = append(w.servers, ks)
		w.cfg.Servers = append(w.cfg.Servers, seal.KeyServer{ObjectID: ks.ObjectID, URL: ks.URL(), PublicKey: ks.PublicKey})
	}
	return w
}

// sealing is a fresh Seal side (no cached session or keys) for requester
// user, as a new hermesd process builds it.
func (w *sealWorld) sealing(user *seal.SuiKey, policy snapshot.SealPolicy) *snapshot.Sealing {
	w.t.Helper()
	if policy.Module == "" {
		policy.Module = snapshot.SealAccountBased
	}
	c, err := seal.NewClient(w.cfg, &seal.ClientOptions{
		Retry: seal.RetryPolicy{Attempts: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return &snapshot.Sealing{Client: c, Signer: user, Policy: policy, MaxSize: 64 << 20}
}

// only leaves the servers with the given indexes running.
func (w *sealWorld) only(up ...int) {
	w.t.Helper()
	for i, ks := range w.servers {
		var err error
		if slices.Contains(up, i) {
			err = ks.Start()
		} else {
			err = ks.Stop()
		}
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

func (f *fixture) sealPipeline(identity string, s *snapshot.Sealing) *snapshot.Pipeline {
	p := f.pipeline(identity)
	p.Format, p.Seal, p.Key = snapshot.FormatSeal, s, cipher.Key{}
	return p
}

// blob is the stored bytes of a blob.
func (f *fixture) blob(id string) []byte {
	f.t.Helper()
	var b bytes.Buffer
	if _, err := f.client.Read(f.t.Context(), id, &b); err != nil {
		f.t.Fatal(err)
	}
	return b.Bytes()
}

func TestSealTakeAndRestore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	want := f.hash()
	res, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: want})
	if err != nil {
		t.Fatal(err)
	}

	// The blob is a bare Seal object, as the reference runtime stores it.
	raw := f.blob(res.BlobID)
	o, err := seal.ParseEncryptedObject(raw)
	if err != nil {
		t.Fatalf("blob is not a Seal EncryptedObject: %v", err)
	}
	addr := w.user.Address()
	if o.PackageID != w.pkg || !bytes.Equal(o.ID, addr[:]) || o.Threshold != 2 || len(o.Services) != 3 ||
		o.DEM != seal.AESGCM || string(o.AAD) != "hermesd/seal:alpha.eth" {
		t.Fatalf("object: package %s id %x threshold %d services %d DEM %v AAD %q",
			o.PackageID, o.ID, o.Threshold, len(o.Services), o.DEM, o.AAD)
	}
	if bytes.Contains(raw, []byte("Look for re-entrant calls")) || bytes.Contains(raw, []byte("pagepagepage")) {
		t.Fatal("the blob holds plaintext")
	}
	if int64(len(raw)) != res.Size {
		t.Errorf("result size %d, blob %d bytes", res.Size, len(raw))
	}

	// A new process: no session, no cached keys.
	target := filepath.Join(t.TempDir(), "restored")
	r, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Restore(t.Context(), res.BlobID, target)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verified || r.BundleHash != want {
		t.Fatalf("restored %+v", r)
	}
	same(t, f.brain, target)

	// The lineage reader opens Seal blobs too.
	lock, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).ReadLock(t.Context(), res.BlobID)
	if err != nil || lock.BundleHash() != want.String() {
		t.Fatalf("ReadLock = %v, %v", lock, err)
	}
}

// Any two of the three servers restore; one alone cannot, and the target
// stays as it was.
func TestSealRestoreThreshold(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	want := f.hash()
	res, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: want})
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range [][]int{{0, 1}, {0, 2}, {1, 2}} {
		w.only(up...)
		target := filepath.Join(t.TempDir(), "restored")
		if _, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Restore(t.Context(), res.BlobID, target); err != nil {
			t.Fatalf("servers %v up: %v", up, err)
		}
		same(t, f.brain, target)
	}
	for _, up := range []int{0, 1, 2} {
		w.only(up)
		target := filepath.Join(t.TempDir(), "restored")
		_, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Restore(t.Context(), res.BlobID, target)
		// The server that is up has answered (1 of 2), or had not yet
		// when the other two failed (0 of 2, and it is named as such).
		if !errors.Is(err, seal.ErrNotEnoughKeys) || !strings.Contains(err.Error(), " of 2 shares answered") ||
			strings.Count(err.Error(), "connection refused") != 2 {
			t.Fatalf("only server %d up: %v, want not enough key servers", up, err)
		}
		if _, serr := os.Stat(target); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("target created by a failed restore: %v", serr)
		}
		t.Logf("one server up: %v", err)
	}
}

// A second restore in the same process uses the cached session and keys:
// it needs no key server at all.
func TestSealKeysAreCached(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	s := w.sealing(w.user, snapshot.SealPolicy{})
	res, err := f.sealPipeline("alpha.eth", s).Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.sealPipeline("alpha.eth", s).Restore(t.Context(), res.BlobID, filepath.Join(t.TempDir(), "a")); err != nil {
		t.Fatal(err)
	}
	w.only()
	if _, err := f.sealPipeline("alpha.eth", s).Restore(t.Context(), res.BlobID, filepath.Join(t.TempDir(), "b")); err != nil {
		t.Fatalf("second restore with every server down: %v", err)
	}
}

func TestSealRequesterOutsidePolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	outsider, _ := seal.GenerateSuiKey(nil)

	t.Run("account_based", func(t *testing.T) {
		w := newSealWorld(t, nil)
		res, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: f.hash()})
		if err != nil {
			t.Fatal(err)
		}
		// Sealed to the owner's address: refused before asking anyone.
		_, err = f.sealPipeline("alpha.eth", w.sealing(outsider, snapshot.SealPolicy{})).Restore(t.Context(), res.BlobID, filepath.Join(t.TempDir(), "x"))
		if !errors.Is(err, snapshot.ErrSealIdentity) || !strings.Contains(err.Error(), outsider.Address().String()) {
			t.Fatalf("outsider: %v", err)
		}
	})

	t.Run("allowlist", func(t *testing.T) {
		allowlist := seal.MustParseAddress("0x" + strings.Repeat("a1", 32))
		w := newSealWorld(t, nil)
		w2 := newSealWorld(t, sealserver.Allowlist(w.user.Address()))
		w2.user = w.user
		policy := snapshot.SealPolicy{Module: snapshot.SealAllowlist, Allowlist: allowlist, AllowlistVersion: 1}
		res, err := f.sealPipeline("alpha.eth", w2.sealing(w2.user, policy)).Take(t.Context(), snapshot.Input{Want: f.hash()})
		if err != nil {
			t.Fatal(err)
		}
		// The key servers refuse the outsider: the policy aborts.
		_, err = f.sealPipeline("alpha.eth", w2.sealing(outsider, policy)).Restore(t.Context(), res.BlobID, filepath.Join(t.TempDir(), "x"))
		if !errors.Is(err, seal.ErrNoAccess) || !strings.Contains(err.Error(), "not on the allowlist") {
			t.Fatalf("outsider: %v", err)
		}
		t.Logf("outsider: %v", err)
		target := filepath.Join(t.TempDir(), "y")
		if _, err := f.sealPipeline("alpha.eth", w2.sealing(w2.user, policy)).Restore(t.Context(), res.BlobID, target); err != nil {
			t.Fatal(err)
		}
		same(t, f.brain, target)
	})
}

func TestSealWriteCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	s := w.sealing(w.user, snapshot.SealPolicy{})
	s.MaxSize = 64 << 10 // the fixture's memory.db alone is 200 kB
	_, err := f.sealPipeline("alpha.eth", s).Take(t.Context(), snapshot.Input{Want: f.hash()})
	if !errors.Is(err, snapshot.ErrTooLarge) || !strings.Contains(err.Error(), "seal.max_size") {
		t.Fatalf("Take = %v, want ErrTooLarge naming seal.max_size", err)
	}
	if n := f.srv.Stats().Requests; n != 0 {
		t.Errorf("%d requests reached Walrus", n)
	}
}

func TestSealConfigurationMismatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	want := f.hash()
	sealed, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: want})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := f.take("alpha.eth", want)
	if err != nil {
		t.Fatal(err)
	}

	// Format seal without a seal section is refused before anything runs.
	p := f.sealPipeline("alpha.eth", nil)
	if _, err := p.Take(t.Context(), snapshot.Input{Want: want}); !errors.Is(err, snapshot.ErrSealNotConfigured) {
		t.Errorf("Take without Seal: %v", err)
	}
	// A Seal blob restored without one says what is missing.
	p = f.pipeline("alpha.eth")
	if _, err := p.Restore(t.Context(), sealed.BlobID, filepath.Join(t.TempDir(), "a")); !errors.Is(err, snapshot.ErrSealNotConfigured) {
		t.Errorf("Seal blob without a seal section: %v", err)
	}
	// A v2 blob under format seal without a snapshot key says so too.
	p = f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{}))
	if _, err := p.Restore(t.Context(), v2.BlobID, filepath.Join(t.TempDir(), "b")); !errors.Is(err, snapshot.ErrNoKey) {
		t.Errorf("v2 blob without a key: %v", err)
	}
	// With the key configured as well, format seal still reads v2 blobs.
	p.Key = f.key
	target := filepath.Join(t.TempDir(), "c")
	if _, err := p.Restore(t.Context(), v2.BlobID, target); err != nil {
		t.Errorf("v2 blob with the key under format seal: %v", err)
	}

	// Another agent's snapshot (same requester, same identity, other
	// associated data) is named as such.
	other := f.sealPipeline("beta.eth", w.sealing(w.user, snapshot.SealPolicy{}))
	other.Others = []string{"alpha.eth"}
	_, err = other.Restore(t.Context(), sealed.BlobID, filepath.Join(t.TempDir(), "d"))
	if !errors.Is(err, snapshot.ErrWrongAgent) || !strings.Contains(err.Error(), `sealed for "alpha.eth"`) {
		t.Errorf("another agent's blob: %v", err)
	}
	// Without knowing the other agent: still refused.
	other.Others = nil
	if _, err := other.Restore(t.Context(), sealed.BlobID, filepath.Join(t.TempDir(), "e")); !errors.Is(err, snapshot.ErrSealIdentity) {
		t.Errorf("unknown agent's blob: %v", err)
	}
}

// restoreBytes writes blob to a file and restores it as agent alpha.eth
// with s; the target must stay missing when it fails.
func restoreBytes(t *testing.T, f *fixture, s *snapshot.Sealing, blob []byte) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(p, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	_, err := f.sealPipeline("alpha.eth", s).RestoreFile(t.Context(), p, target, snapshot.RestoreOptions{})
	if err != nil {
		if _, serr := os.Stat(target); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("failed restore created the target: %v", serr)
		}
		return err
	}
	same(t, f.brain, target)
	return nil
}

func TestSealHostileBlobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	res, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	good := f.blob(res.BlobID)
	obj := func() *seal.EncryptedObject {
		o, err := seal.ParseEncryptedObject(bytes.Clone(good))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	marshal := func(o *seal.EncryptedObject) []byte {
		b, err := o.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Offset of the threshold byte: version, package, ID, services.
	thresholdAt := 1 + 32 + 1 + len(seal.Address{}) + 1 + 3*33 // the ID is the requester's address
	if good[thresholdAt] != 2 {
		t.Fatalf("threshold byte at %d is %d", thresholdAt, good[thresholdAt])
	}
	withByte := func(at int, v byte) []byte {
		b := bytes.Clone(good)
		b[at] = v
		return b
	}
	otherPkg := obj()
	otherPkg.PackageID[0] ^= 1
	flipped := obj()
	flipped.Blob[len(flipped.Blob)/2] ^= 1
	share := obj()
	share.EncryptedShares[2][0] ^= 1
	strange := obj()
	strange.Services[2].ObjectID[0] ^= 1

	cases := []struct {
		name string
		blob []byte
		want []error
	}{
		{"trailing byte", append(bytes.Clone(good), 0), []error{seal.ErrMalformed}},
		{"truncated header", good[:100], []error{seal.ErrMalformed}},
		{"truncated payload", good[:len(good)-1], []error{seal.ErrMalformed}},
		{"unknown KEM", withByte(thresholdAt+1, 7), []error{seal.ErrMalformed}},
		{"unsupported KEM", withByte(thresholdAt+1, 1), []error{seal.ErrUnsupported}},
		{"threshold 0", withByte(thresholdAt, 0), []error{seal.ErrMalformed}},
		{"threshold above the shares", withByte(thresholdAt, 4), []error{seal.ErrMalformed}},
		{"threshold lowered", withByte(thresholdAt, 1), []error{seal.ErrNonceMismatch}},
		{"threshold raised", withByte(thresholdAt, 3), []error{seal.ErrNonceMismatch}},
		{"another package", marshal(otherPkg), []error{snapshot.ErrSealIdentity}},
		{"unknown key server", marshal(strange), []error{snapshot.ErrSealIdentity}},
		{"tampered payload", marshal(flipped), []error{seal.ErrAuth}},
		{"tampered share", marshal(share), []error{seal.ErrNonceMismatch, seal.ErrInconsistentShares}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := restoreBytes(t, f, w.sealing(w.user, snapshot.SealPolicy{}), tc.blob)
			ok := false
			for _, e := range tc.want {
				ok = ok || errors.Is(err, e)
			}
			if !ok {
				t.Fatalf("restore = %v, want one of %v", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
	if err := restoreBytes(t, f, w.sealing(w.user, snapshot.SealPolicy{}), good); err != nil {
		t.Fatalf("the good blob: %v", err)
	}
}

// A key server answering keys of another master key is a failed server:
// the two honest ones still restore; with one honest one the restore fails
// naming the bad key.
func TestSealKeyServerWithWrongKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := newSealWorld(t, nil)
	res, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	blob := f.blob(res.BlobID)
	impostor := w.servers[2]
	if err := impostor.Stop(); err != nil {
		t.Fatal(err)
	}
	wrong, _ := seal.GenerateMasterKey(nil)
	bad, err := devnet.StartKeyServer(sealserver.Config{ObjectID: impostor.ObjectID, MasterKey: wrong, Policy: sealserver.Open()}, impostor.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Stop() })

	if err := restoreBytes(t, f, w.sealing(w.user, snapshot.SealPolicy{}), blob); err != nil {
		t.Fatalf("two honest servers: %v", err)
	}
	if err := w.servers[1].Stop(); err != nil {
		t.Fatal(err)
	}
	err = restoreBytes(t, f, w.sealing(w.user, snapshot.SealPolicy{}), blob)
	if !errors.Is(err, seal.ErrInvalidKey) || !errors.Is(err, seal.ErrNotEnoughKeys) || !strings.Contains(err.Error(), impostor.ObjectID.String()) {
		t.Fatalf("one honest server and an impostor: %v", err)
	}
	t.Logf("%v", err)
}

func TestSealEscrow(t *testing.T) {
	t.Parallel()
	w := newSealWorld(t, nil)
	var key [snapshot.AgentKeySize]byte
	copy(key[:], "an agent key of thirty-two bytes")
	alpha := snapshot.SealAgent{Identity: "alpha.eth", Others: []string{"beta.eth"}}
	escrow, err := w.sealing(w.user, snapshot.SealPolicy{}).EscrowKey(alpha, &key)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(escrow, key[:]) {
		t.Fatal("the escrow holds the key in clear")
	}

	// A wiped operator: only its Sui key and the key servers' public side.
	got, err := w.sealing(w.user, snapshot.SealPolicy{}).RecoverKey(t.Context(), alpha, escrow)
	if err != nil || got != key {
		t.Fatalf("RecoverKey = %x, %v", got, err)
	}
	w.only(1, 2)
	if got, err := w.sealing(w.user, snapshot.SealPolicy{}).RecoverKey(t.Context(), alpha, escrow); err != nil || got != key {
		t.Fatalf("two servers up: %x, %v", got, err)
	}
	w.only(1)
	if _, err := w.sealing(w.user, snapshot.SealPolicy{}).RecoverKey(t.Context(), alpha, escrow); !errors.Is(err, seal.ErrNotEnoughKeys) {
		t.Fatalf("one server up: %v", err)
	}
	w.only(0, 1, 2)

	outsider, _ := seal.GenerateSuiKey(nil)
	if _, err := w.sealing(outsider, snapshot.SealPolicy{}).RecoverKey(t.Context(), alpha, escrow); !errors.Is(err, snapshot.ErrSealIdentity) {
		t.Errorf("outsider: %v", err)
	}
	beta := snapshot.SealAgent{Identity: "beta.eth", Others: []string{"alpha.eth"}}
	if _, err := w.sealing(w.user, snapshot.SealPolicy{}).RecoverKey(t.Context(), beta, escrow); !errors.Is(err, snapshot.ErrWrongAgent) {
		t.Errorf("another agent's escrow: %v", err)
	}

	// A snapshot is not an escrow: its associated data differs.
	f := newFixture(t)
	res, err := f.sealPipeline("alpha.eth", w.sealing(w.user, snapshot.SealPolicy{})).Take(t.Context(), snapshot.Input{Want: f.hash()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.sealing(w.user, snapshot.SealPolicy{}).RecoverKey(t.Context(), alpha, f.blob(res.BlobID)); !errors.Is(err, snapshot.ErrSealIdentity) && !errors.Is(err, snapshot.ErrTooLarge) {
		t.Errorf("a snapshot as escrow: %v", err)
	}
	// Nor is an escrow a snapshot.
	if err := restoreBytes(t, f, w.sealing(w.user, snapshot.SealPolicy{}), escrow); !errors.Is(err, snapshot.ErrSealIdentity) {
		t.Errorf("an escrow as snapshot: %v", err)
	}
	// A tampered escrow does not open.
	bad := bytes.Clone(escrow)
	bad[len(bad)-20] ^= 1
	if _, err := w.sealing(w.user, snapshot.SealPolicy{}).RecoverKey(t.Context(), alpha, bad); err == nil {
		t.Error("tampered escrow opened")
	}
}
