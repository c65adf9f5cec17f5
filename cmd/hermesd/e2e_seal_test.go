package main

// End-to-end tests of encryption.format seal: the real hermesd binary
// against a devnet with three local Seal key servers (2-of-3).

import (
	"bytes"
	"crypto/aes"
	gocipher "crypto/cipher"
	crand "crypto/rand"
	"crypto/sha3"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
	"github.com/hermesd/hermesd/internal/walrus"
)

func newSealE2EWorld(t *testing.T, agents ...devnet.Agent) *e2eWorld {
	t.Helper()
	return newE2EWorldWith(t, devnet.Options{SealServers: 3, Format: "seal"}, agents...)
}

// only leaves the devnet's key servers with the given indexes running.
func (w *e2eWorld) only(up ...int) {
	w.t.Helper()
	for i, k := range w.dn.Seal {
		var err error
		if slices.Contains(up, i) {
			err = k.Start()
		} else {
			err = k.Stop()
		}
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

// sealKeys are the user secret keys of every devnet key server for the
// identity of o, taken from their master key files (what a test may know
// and an attacker may not).
func (w *e2eWorld) sealKeys(o *seal.EncryptedObject) (map[seal.Address]*seal.UserSecretKey, map[seal.Address]seal.PublicKey) {
	w.t.Helper()
	keys, pks := map[seal.Address]*seal.UserSecretKey{}, map[seal.Address]seal.PublicKey{}
	for _, k := range w.dn.Seal {
		mk, err := seal.ReadMasterKeyFile(k.KeyPath)
		if err != nil {
			w.t.Fatal(err)
		}
		keys[k.ObjectID], pks[k.ObjectID] = mk.Extract(o.FullID()), k.PublicKey
	}
	return keys, pks
}

// upload stores b on the devnet's Walrus and returns its blob id.
func (w *e2eWorld) upload(b []byte) string {
	w.t.Helper()
	c := w.walrusClient(walrus.Config{})
	res, err := c.Store(w.t.Context(), walrus.BytesBody(b))
	if err != nil {
		w.t.Fatal(err)
	}
	return res.BlobID
}

// sealDeriveKey is Seal's key derivation from the base key (purpose 0:
// the randomness key, 1: the DEM key), written from the specification for
// the hostile-object generator below.
func sealDeriveKey(purpose byte, base []byte, o *seal.EncryptedObject) [32]byte {
	h := sha3.New256()
	h.Write([]byte("SUI-SEAL-IBE-BLS12381-H3-00"))
	h.Write(base)
	h.Write([]byte{purpose, o.Threshold})
	for _, s := range o.EncryptedShares {
		h.Write(s[:])
	}
	for _, s := range o.Services {
		h.Write(s.ObjectID[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// inconsistentObject seals msg as a dishonest encryptor can: share 1 is
// taken from another polynomial with the same secret, and the randomness
// and payload are re-encrypted under keys derived over the spliced shares.
// Any two shares that include share 1 give a wrong base key; shares 2 and
// 3 decrypt msg, but the object opens differently depending on which
// servers answer — what the share consistency check refuses.
func inconsistentObject(t *testing.T, cfg *seal.Config, id, aad, msg []byte) *seal.EncryptedObject {
	t.Helper()
	stream := make([]byte, 32+32+64)
	crand.Read(stream)
	otherCoef := make([]byte, 32)
	crand.Read(otherCoef)
	encrypt := func(coef []byte) *seal.EncryptedObject {
		s := slices.Clone(stream)
		copy(s[32:64], coef)
		o, _, err := seal.EncryptObject(cfg, id, msg, &seal.EncryptOptions{AAD: aad, Rand: bytes.NewReader(s)})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a, b := encrypt(stream[32:64]), encrypt(otherCoef)
	if a.Nonce != b.Nonce || a.EncryptedShares[0] == b.EncryptedShares[0] {
		t.Fatal("the two encryptions do not share their randomness")
	}
	base := stream[:32]
	ra := sealDeriveKey(0, base, a)
	c := *a
	c.EncryptedShares = slices.Clone(a.EncryptedShares)
	c.EncryptedShares[0] = b.EncryptedShares[0]
	rc := sealDeriveKey(0, base, &c)
	for i := range c.EncryptedRandomness {
		c.EncryptedRandomness[i] = a.EncryptedRandomness[i] ^ ra[i] ^ rc[i]
	}
	dem := sealDeriveKey(1, base, &c)
	block, err := aes.NewCipher(dem[:])
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := gocipher.NewGCMWithNonceSize(block, 16)
	if err != nil {
		t.Fatal(err)
	}
	iv := []byte{138, 55, 153, 253, 198, 46, 121, 219, 160, 128, 89, 7, 214, 156, 148, 220}
	c.Blob = gcm.Seal(nil, iv, msg, aad)
	return &c
}

func marshalObject(t *testing.T, o *seal.EncryptedObject) []byte {
	t.Helper()
	b, err := o.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestE2ESeal: the daemon seals snapshots with three local key servers;
// any two restore the brain byte-identical after a wipe, one cannot; a
// requester outside the policy, hostile blobs and a lying key server are
// refused with their exit codes, and the brain directory stays untouched.
func TestE2ESeal(t *testing.T) {
	t.Parallel()
	w := newSealE2EWorld(t,
		devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"},
		devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"},
	)
	for _, id := range []string{"alpha", "beta"} {
		bw := newBrainWriter(t, w.brain(id), rand.New(rand.NewPCG(16, uint64(len(id)))))
		bw.put(t, "whoami.md", []byte("I am "+id+", sealed\n"), 0o644)
		for range 20 {
			if err := bw.step(); err != nil {
				t.Fatal(err)
			}
		}
	}
	settleAgents(t, w, "alpha", "beta")
	alphaBlob, betaBlob := w.pointer("alpha.hermes.eth"), w.pointer("beta.hermes.eth")
	alphaFiles := hashedTree(t, w.brain("alpha"))
	cfg := w.dn.ConfigPath
	spool := filepath.Join(w.dn.Config.StateDir, "spool")

	// What is on Walrus: a bare Seal object for alpha, no plaintext.
	raw := packBytes(t, w.dn, alphaBlob)
	o, err := seal.ParseEncryptedObject(raw)
	if err != nil {
		t.Fatalf("alpha's blob is not a Seal object: %v", err)
	}
	if o.PackageID != devnet.SealPackage || o.Threshold != 2 || len(o.Services) != 3 || string(o.AAD) != "hermesd/seal:alpha.hermes.eth" {
		t.Fatalf("alpha's object: package %s threshold %d services %d AAD %q", o.PackageID, o.Threshold, len(o.Services), o.AAD)
	}
	if bytes.Contains(raw, []byte("I am alpha")) {
		t.Fatal("alpha's blob holds plaintext")
	}
	keys, pks := w.sealKeys(o)
	tarball, err := seal.Decrypt(o, keys, pks, &seal.DecryptOptions{CheckShareConsistency: true})
	if err != nil {
		t.Fatal(err)
	}

	brain := w.brain("alpha")
	brains := filepath.Dir(brain)
	wipe := func(t *testing.T) {
		t.Helper()
		if err := os.RemoveAll(brain); err != nil {
			t.Fatal(err)
		}
	}
	// restore runs `hermesd restore alpha` on a wiped brain and checks the
	// exit code, the reason, and that a failure left no trace.
	restore := func(t *testing.T, config string, code int, reason ...string) {
		t.Helper()
		wipe(t)
		before := listDir(t, brains)
		got, stdout, stderr := w.runOnce("restore", "-config", config, "alpha")
		line := lastLine(stderr)
		if got != code {
			t.Fatalf("exit %d, want %d: %s", got, code, line)
		}
		if code == 0 {
			if d := sameTree(alphaFiles, hashedTree(t, brain)); len(d) > 0 {
				t.Fatalf("restored brain differs: %v (%s)", d, stdout)
			}
			// The end epoch the upload recorded is recorded again, and
			// said, by an in-place restore too (never 0).
			lin := readLock(t, brain).Lineage()
			if len(lin) == 0 || lin[0].EndEpoch == 0 || !strings.Contains(stdout, fmt.Sprintf(", end epoch %d)", lin[0].EndEpoch)) {
				t.Errorf("restore said %q; the lock's lineage records %+v", stdout, lin)
			}
			return
		}
		t.Logf("exit %d: %s", got, line)
		failedRestoreLeftNothing(t, line, reason, brain, before)
		if ents := listDir(t, spool); len(ents) > 0 {
			t.Errorf("spool holds %v", ents)
		}
	}
	setPointer := func(t *testing.T, value string) {
		t.Helper()
		cur := w.pointer("alpha.hermes.eth")
		if _, err := w.ensClient(true).Write(t.Context(), "alpha.hermes.eth", value, cur); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("any two key servers restore", func(t *testing.T) {
		defer w.only(0, 1, 2)
		for _, up := range [][]int{{0, 1}, {0, 2}, {1, 2}} {
			w.only(up...)
			restore(t, cfg, 0)
		}
	})
	t.Run("seal check", func(t *testing.T) {
		code, stdout, stderr := w.runOnce("seal", "check", "-config", cfg)
		if code != 0 || strings.Count(stdout, "\nok   ") != 3 {
			t.Fatalf("seal check: exit %d\n%s%s", code, stdout, stderr)
		}
		// Server 1's public key configured for server 0 too: server 0's
		// proof of possession does not verify against it.
		pk0, pk1 := w.dn.Seal[0].PublicKey.String(), w.dn.Seal[1].PublicKey.String()
		code, stdout, stderr = w.runOnce("seal", "check", "-config", rewriteConfig(t, w, pk0, pk1))
		if code != exitFailure || !strings.Contains(stdout, "FAIL "+w.dn.Seal[0].ObjectID.String()) ||
			strings.Count(stdout, "\nok   ") != 2 || !strings.Contains(lastLine(stderr), "1 of 3 key servers failed") {
			t.Fatalf("seal check with a wrong public key: exit %d\n%s%s", code, stdout, stderr)
		}
	})
	t.Run("one key server is not enough", func(t *testing.T) {
		defer w.only(0, 1, 2)
		for _, up := range []int{0, 1, 2} {
			w.only(up)
			restore(t, cfg, exitFailure, "not enough key servers", " of 2 shares answered", "connection refused")
		}
	})

	t.Run("requester outside the policy", func(t *testing.T) {
		p, outsider := outsiderKey(t)
		restore(t, rewriteConfig(t, w, w.dn.SuiKeyPath, p), exitAuth,
			"not sealed for this agent", "not the requester "+outsider)
	})
	t.Run("policy refuses the requester", func(t *testing.T) {
		// The same servers (keys, object IDs, addresses) now allow
		// someone else only.
		someone, _ := seal.GenerateSuiKey(nil)
		var swapped []*devnet.KeyServer
		for _, k := range w.dn.Seal {
			mk, err := seal.ReadMasterKeyFile(k.KeyPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Stop(); err != nil {
				t.Fatal(err)
			}
			s, err := devnet.StartKeyServer(sealserver.Config{ObjectID: k.ObjectID, MasterKey: mk,
				Policy: sealserver.Allowlist(someone.Address())}, k.Addr())
			if err != nil {
				t.Fatal(err)
			}
			swapped = append(swapped, s)
		}
		defer func() {
			for _, s := range swapped {
				s.Stop()
			}
			w.only(0, 1, 2)
		}()
		restore(t, cfg, exitAuth, "403 NoAccess", "not on the allowlist")
	})

	t.Run("hostile blobs", func(t *testing.T) {
		const thresholdAt = 1 + 32 + 1 + 32 + 1 + 3*33 // version, package, ID, services
		if raw[thresholdAt] != 2 {
			t.Fatalf("threshold byte at %d is %d", thresholdAt, raw[thresholdAt])
		}
		withByte := func(at int, v byte) []byte {
			b := bytes.Clone(raw)
			b[at] = v
			return b
		}
		sealCfg := seal.Config{PackageID: o.PackageID, Threshold: 2}
		for _, k := range w.dn.Seal {
			sealCfg.Servers = append(sealCfg.Servers, seal.KeyServer{ObjectID: k.ObjectID, PublicKey: k.PublicKey, URL: k.URL()})
		}
		bad := inconsistentObject(t, &sealCfg, o.ID, o.AAD, tarball)
		// The crafted object is what it claims: shares 2+3 decrypt it,
		// the consistency check sees share 1 is off their polynomial.
		delete(keys, w.dn.Seal[0].ObjectID)
		if pt, err := seal.Decrypt(bad, keys, pks, nil); err != nil || !bytes.Equal(pt, tarball) {
			t.Fatalf("crafted object does not open with shares 2 and 3: %v", err)
		}
		if _, err := seal.Decrypt(bad, keys, pks, &seal.DecryptOptions{CheckShareConsistency: true}); err == nil {
			t.Fatal("crafted object passes the consistency check")
		}

		cases := []struct {
			name   string
			blob   []byte
			up     []int
			code   int
			reason []string
		}{
			{"malformed BCS (trailing byte)", append(bytes.Clone(raw), 0), nil, exitAuth, []string{"not a valid Seal object", "malformed", "trailing"}},
			{"malformed BCS (truncated)", raw[:200], nil, exitAuth, []string{"not a valid Seal object", "malformed"}},
			{"threshold above the shares", withByte(thresholdAt, 4), nil, exitAuth, []string{"malformed", "threshold 4 of 3"}},
			{"threshold lowered", withByte(thresholdAt, 1), nil, exitAuth, []string{"nonce check failed"}},
			{"inconsistent shares", marshalObject(t, bad), []int{1, 2}, exitMismatch, []string{"inconsistent shares", "share 1"}},
			{"another agent's snapshot", nil, nil, exitAuth, []string{"belongs to another agent", `sealed for "beta.hermes.eth"`}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				id := betaBlob
				if tc.blob != nil {
					id = w.upload(tc.blob)
				}
				setPointer(t, id)
				if tc.up != nil {
					w.only(tc.up...)
					defer w.only(0, 1, 2)
				}
				restore(t, cfg, tc.code, tc.reason...)
			})
		}
		setPointer(t, alphaBlob)
	})

	t.Run("key server answering a wrong key", func(t *testing.T) {
		impostor := w.dn.Seal[2]
		if err := impostor.Stop(); err != nil {
			t.Fatal(err)
		}
		wrong, _ := seal.GenerateMasterKey(nil)
		liar, err := devnet.StartKeyServer(sealserver.Config{ObjectID: impostor.ObjectID, MasterKey: wrong, Policy: sealserver.Open()}, impostor.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			liar.Stop()
			w.only(0, 1, 2)
		}()
		// Two honest servers are enough: the wrong key is set aside.
		restore(t, cfg, 0)
		// With one honest server left the restore fails, naming the liar.
		if err := w.dn.Seal[1].Stop(); err != nil {
			t.Fatal(err)
		}
		restore(t, cfg, exitMismatch, "invalid key", "does not verify", impostor.ObjectID.String())
	})

	t.Run("restore after the faults are gone", func(t *testing.T) {
		restore(t, cfg, 0)
	})
}

// TestE2ESealEscrow: format v3 with seal.escrow puts the agent key, sealed
// to the three local key servers, in every head pack. After the brain,
// the state directory and the key file are gone, `restore --escrow` with
// only the Sui key brings the brain back byte- and mode-identical through
// any two servers; one server is not enough and an outsider's Sui key is
// refused, both leaving no brain behind; `drill --escrow` passes and names
// the servers that answered.
func TestE2ESealEscrow(t *testing.T) {
	w := newE2EWorldWith(t, devnet.Options{SealServers: 3}, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	cfg := rewriteConfig(t, w, "  policy: account_based\n", "  policy: account_based\n  escrow: true\n")
	bw := newBrainWriter(t, w.brain("alpha"), rand.New(rand.NewPCG(17, 5)))
	bw.put(t, "whoami.md", []byte("I am alpha, escrowed\n"), 0o600)
	for range 20 {
		if err := bw.step(); err != nil {
			t.Fatal(err)
		}
	}
	settleAgentsWith(t, w, cfg, "alpha")
	head := w.pointer("alpha.hermes.eth")
	raw := packBytes(t, w.dn, head)
	// HRMS 0x03, flags head|escrow, a Seal object of a few hundred bytes.
	if string(raw[:5]) != "HRMS\x03" || raw[5] != 0x03 {
		t.Fatalf("head pack header %x: not a v3 head with a key escrow", raw[:8])
	}
	e := int(raw[6])<<8 | int(raw[7])
	o, err := seal.ParseEncryptedObject(raw[28 : 28+e])
	if err != nil {
		t.Fatalf("the %d-byte escrow is not a Seal object: %v", e, err)
	}
	if o.Threshold != 2 || len(o.Services) != 3 || string(o.AAD) != "hermesd/escrow:alpha.hermes.eth" {
		t.Fatalf("escrow: threshold %d services %d AAD %q", o.Threshold, len(o.Services), o.AAD)
	}
	t.Logf("key escrow: %d bytes in a %d-byte head pack", e, len(raw))

	t.Run("drill --escrow", func(t *testing.T) {
		code, stdout, stderr := w.runOnce("drill", "-config", cfg, "--escrow", "--json", "alpha")
		if code != 0 {
			t.Fatalf("drill --escrow: exit %d: %s", code, lastLine(stderr))
		}
		var rep struct {
			Result        string   `json:"result"`
			EscrowServers []string `json:"escrowServers"`
			Stages        []struct {
				Name, Detail string
				OK           bool
			} `json:"stages"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rep.Stages, func(s struct {
			Name, Detail string
			OK           bool
		}) bool {
			return s.Name == "escrow"
		})
		if rep.Result != "pass" || len(rep.EscrowServers) < 2 || i < 0 || !rep.Stages[i].OK || !strings.Contains(rep.Stages[i].Detail, "key escrow") {
			t.Fatalf("drill report: %s", stdout)
		}
	})

	brain := w.brain("alpha")
	want := hashedTree(t, brain)
	brains := filepath.Dir(brain)
	// The operator's disk is wiped: brain, state and the key file.
	for _, p := range []string{brain, w.dn.Config.StateDir, w.dn.KeyPath} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	restore := func(t *testing.T, config string, code int, reason ...string) {
		t.Helper()
		if err := os.RemoveAll(brain); err != nil {
			t.Fatal(err)
		}
		before := listDir(t, brains)
		got, stdout, stderr := w.runOnce("restore", "-config", config, "--escrow", "--json", "alpha")
		line := lastLine(stderr)
		if got != code {
			t.Fatalf("exit %d, want %d: %s", got, code, line)
		}
		if code == 0 {
			if d := sameTree(want, hashedTree(t, brain)); len(d) > 0 {
				t.Fatalf("restored brain differs: %v", d)
			}
			var out restoreOutput
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatal(err)
			}
			if out.Escrow == nil || out.Escrow.Bytes != e || len(out.Escrow.Servers) < 2 || out.BlobID != head {
				t.Fatalf("restore --escrow output: %s", stdout)
			}
			t.Logf("agent key recovered from the escrow in %d ms by %v", out.Escrow.MS, out.Escrow.Servers)
			return
		}
		t.Logf("exit %d: %s", got, line)
		failedRestoreLeftNothing(t, line, reason, brain, before)
	}

	t.Run("without key file or escrow flag", func(t *testing.T) {
		got, _, stderr := w.runOnce("restore", "-config", cfg, "alpha")
		if got == 0 || !strings.Contains(lastLine(stderr), "snapshot.key") {
			t.Fatalf("restore without the key file: exit %d: %s", got, lastLine(stderr))
		}
	})
	t.Run("any two key servers restore", func(t *testing.T) {
		defer w.only(0, 1, 2)
		for _, up := range [][]int{{0, 1}, {0, 2}, {1, 2}} {
			w.only(up...)
			restore(t, cfg, 0)
		}
	})
	t.Run("one key server is not enough", func(t *testing.T) {
		defer w.only(0, 1, 2)
		w.only(1)
		restore(t, cfg, exitFailure, "not enough key servers", "1 of 2 shares answered")
	})
	t.Run("requester outside the policy", func(t *testing.T) {
		p, outsider := outsiderKey(t)
		restore(t, rewriteConfigFile(t, cfg, w.dn.SuiKeyPath, p), exitAuth,
			"not sealed for this agent", "not the requester "+outsider)
	})
	t.Run("restore after the faults are gone", func(t *testing.T) {
		restore(t, cfg, 0)
	})
	t.Run("--write-key saves the recovered agent key", func(t *testing.T) {
		if err := os.RemoveAll(brain); err != nil {
			t.Fatal(err)
		}
		kf := filepath.Join(t.TempDir(), "alpha.key")
		code, stdout, stderr := w.runOnce("restore", "-config", cfg, "--escrow", "--write-key", kf, "alpha")
		if code != 0 || !strings.Contains(stdout, "agent key saved to "+kf) {
			t.Fatalf("exit %d: %s / %s", code, stdout, lastLine(stderr))
		}
		if d := sameTree(want, hashedTree(t, brain)); len(d) > 0 {
			t.Fatalf("restored brain differs: %v", d)
		}
		k, err := cipher.ReadKeyFile(kf)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(kf); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode: %v %v", fi, err)
		}
		// The saved key is the one the head pack was written under.
		if got, want := repo.NewAgentKey([32]byte(k)).ID(), hex.EncodeToString(raw[8:16]); got != want {
			t.Fatalf("saved key id %s, the head pack's is %s", got, want)
		}
		// An existing file is never overwritten, and nothing is restored.
		if err := os.RemoveAll(brain); err != nil {
			t.Fatal(err)
		}
		code, _, stderr = w.runOnce("restore", "-config", cfg, "--escrow", "--write-key", kf, "alpha")
		if code != exitUsage || !strings.Contains(lastLine(stderr), "refusing to overwrite") {
			t.Fatalf("second --write-key: exit %d: %s", code, lastLine(stderr))
		}
		if _, err := os.Stat(brain); err == nil {
			t.Fatal("a refused --write-key restored the brain")
		}
		if k2, err := cipher.ReadKeyFile(kf); err != nil || k2 != k {
			t.Fatalf("key file changed: %v", err)
		}
	})
}

// outsiderKey writes a fresh Sui key that no policy admits; it returns
// the file and the key's address.
func outsiderKey(t *testing.T) (path, address string) {
	t.Helper()
	k, err := seal.GenerateSuiKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "outsider.key")
	if err := os.WriteFile(path, []byte(k.Export()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, k.Address().String()
}

// failedRestoreLeftNothing checks a failed restore: hermesd's one-line
// reason names every part of reason, and beside the brain's directory
// (which must not exist) the entries are those of before.
func failedRestoreLeftNothing(t *testing.T, line string, reason []string, brain string, before []string) {
	t.Helper()
	if !strings.HasPrefix(line, "hermesd: ") {
		t.Errorf("last stderr line is not hermesd's reason: %q", line)
	}
	for _, r := range reason {
		if !strings.Contains(line, r) {
			t.Errorf("reason does not mention %q", r)
		}
	}
	if _, err := os.Stat(brain); err == nil {
		t.Errorf("failed restore created %s", brain)
	}
	if after := listDir(t, filepath.Dir(brain)); !slices.Equal(before, after) {
		t.Errorf("beside the brain: %v, was %v", after, before)
	}
}
