package snapshot_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/nodetest"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// The reference runtime's Seal cipher is the official SDK (@mysten/seal):
// encrypt({threshold, packageId, id: allowlist ‖ agent, data: tar}) stores
// the EncryptedObject bytes; restore is decrypt then `tar -x`. These tests
// run that SDK (installed into .deps/seal by scripts/fetch-seal-sdk.sh,
// which they run when it is missing) through internal/seal's driver
// script, against the Go key servers on 127.0.0.1. They need Node.js and
// GNU tar, and fail without them.

var sdkInstall struct {
	sync.Once
	dir string
	err error
}

func sealSDK(t *testing.T) string {
	t.Helper()
	sdkInstall.Do(func() {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			sdkInstall.err = err
			return
		}
		if d := os.Getenv("HERMESD_SEAL_SDK"); d != "" {
			sdkInstall.dir = d
			return
		}
		sdkInstall.dir = filepath.Join(root, ".deps", "seal")
		cmd := exec.Command(filepath.Join(root, "scripts", "fetch-seal-sdk.sh"))
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			sdkInstall.err = errors.New(string(out))
		}
	})
	if sdkInstall.err != nil {
		t.Fatalf("the official Seal SDK is needed for this test (scripts/fetch-seal-sdk.sh): %v", sdkInstall.err)
	}
	return sdkInstall.dir
}

// runSDK runs tasks through internal/seal/testdata/interop.mjs.
func runSDK(t *testing.T, tasks []map[string]any) []map[string]any {
	t.Helper()
	var res []map[string]any
	nodetest.RunModule(t, sealSDK(t), filepath.Join("..", "seal", "testdata", "interop.mjs"), "the Seal SDK interop tests", tasks, &res)
	if len(res) != len(tasks) {
		t.Fatalf("node interop.mjs: %d results for %d tasks", len(res), len(tasks))
	}
	for i, r := range res {
		if e, ok := r["error"]; ok {
			t.Fatalf("SDK task %d: %v", i, e)
		}
	}
	return res
}

func sdkServers(cfg seal.Config) []map[string]any {
	var out []map[string]any
	for _, s := range cfg.Servers {
		pk := s.PublicKey.Bytes()
		out = append(out, map[string]any{"objectId": s.ObjectID.String(), "pk": hex.EncodeToString(pk[:]), "weight": 1, "url": s.URL})
	}
	return out
}

func gnuTar(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tar")
	if err != nil {
		t.Fatalf("GNU tar is needed for the interoperability tests: %v", err)
	}
	if out, err := exec.Command(p, "--version").Output(); err != nil || !strings.Contains(string(out), "GNU tar") {
		t.Fatalf("%s is not GNU tar: %s %v", p, out, err)
	}
	return p
}

func TestSealInteropReferenceRuntime(t *testing.T) {
	t.Parallel()
	tarBin := gnuTar(t)
	f := newFixture(t)
	allowlist := seal.MustParseAddress("0x" + strings.Repeat("a7", 32))
	acct := newSealWorld(t, nil)
	// These key servers play the reference runtime's allowlist policy,
	// with this operator on the list.
	allow := newSealWorld(t, sealserver.Allowlist(acct.user.Address()))
	allow.user = acct.user
	user := acct.user
	byName := snapshot.SealPolicy{Module: snapshot.SealAllowlist, Allowlist: allowlist, AllowlistVersion: 1}
	byToken := byName
	byToken.ByToken = true

	// The reference runtime's lock, then its tar (GNU tar's defaults).
	lock := &bundlelock.Lock{}
	lock.Record(f.hash().String(), 1)
	if err := bundlelock.Write(filepath.Join(f.brain, bundlelock.FileName), lock); err != nil {
		t.Fatal(err)
	}
	var tarball, stderr bytes.Buffer
	cmd := exec.Command(tarBin, "-c", "--numeric-owner", "-C", f.brain, ".")
	cmd.Stdout, cmd.Stderr = &tarball, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tar: %v: %s", err, stderr.String())
	}

	// hermesd's snapshots under both allowlist identities and under
	// account_based, for the SDK to open.
	ours := []struct {
		name   string
		world  *sealWorld
		policy snapshot.SealPolicy
		blob   []byte
	}{
		{"allowlist by name", allow, byName, nil},
		{"allowlist by token", allow, byToken, nil},
		{"account_based", acct, snapshot.SealPolicy{Module: snapshot.SealAccountBased}, nil},
	}
	for i := range ours {
		o := &ours[i]
		res, err := f.sealPipeline("auditor.eth", o.world.sealing(user, o.policy)).Take(t.Context(), snapshot.Input{Want: f.hash()})
		if err != nil {
			t.Fatal(err)
		}
		o.blob = f.blob(res.BlobID)
	}

	// Task 0: the reference runtime seals its tar for token 7. Then the
	// SDK decrypts each of hermesd's blobs, as the reference restore does.
	tasks := []map[string]any{{
		"op": "encrypt", "packageId": allow.pkg.String(), "threshold": 2, "servers": sdkServers(allow.cfg), "dem": "aes",
		"id":   hex.EncodeToString(seal.AllowlistID(allowlist, "7")),
		"data": base64.StdEncoding.EncodeToString(tarball.Bytes()),
	}}
	for _, o := range ours {
		tasks = append(tasks, map[string]any{
			"op": "decrypt", "packageId": o.world.pkg.String(), "servers": sdkServers(o.world.cfg), "module": o.policy.Module,
			"suiKey": user.Export(), "object": base64.StdEncoding.EncodeToString(o.blob), "checkShareConsistency": true,
		})
	}
	results := runSDK(t, tasks)

	t.Run("reference snapshot restores in hermesd", func(t *testing.T) {
		obj, err := base64.StdEncoding.DecodeString(results[0]["object"].(string))
		if err != nil {
			t.Fatal(err)
		}
		o, err := seal.ParseEncryptedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		// The SDK writes Some(empty) associated data when given none.
		if o.AAD == nil || len(o.AAD) != 0 {
			t.Errorf("SDK object AAD = %q (nil: %v), want Some(empty)", o.AAD, o.AAD == nil)
		}
		for _, policy := range []snapshot.SealPolicy{byName, byToken} {
			p := filepath.Join(t.TempDir(), "blob")
			if err := os.WriteFile(p, obj, 0o600); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(t.TempDir(), "restored")
			r, err := f.sealPipeline("auditor.eth", allow.sealing(user, policy)).RestoreFile(t.Context(), p, target, snapshot.RestoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Verified {
				t.Errorf("not verified: %v", r.Unchecked)
			}
			same(t, f.brain, target)
		}
	})

	for i, o := range ours {
		t.Run("SDK opens hermesd's "+o.name, func(t *testing.T) {
			pt, err := base64.StdEncoding.DecodeString(results[i+1]["plaintext"].(string))
			if err != nil {
				t.Fatal(err)
			}
			// The reference runtime's restore: tar -x into the agent dir.
			out := t.TempDir()
			cmd := exec.Command(tarBin, "-x", "--numeric-owner", "-C", out)
			cmd.Stdin = bytes.NewReader(pt)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("tar -x: %v: %s", err, stderr.String())
			}
			same(t, f.brain, out)
		})
	}
}

// The key request of policy allowlist carries the transaction the
// reference runtime builds with the SDK: the key servers dry-run it, so it
// must be byte for byte what their full node would accept from the SDK.
func TestSealInteropAllowlistPTB(t *testing.T) {
	t.Parallel()
	w := newSealWorld(t, nil)
	allowlist := seal.MustParseAddress("0x" + strings.Repeat("a7", 32))
	const version = 123456789
	s := w.sealing(w.user, snapshot.SealPolicy{Module: snapshot.SealAllowlist, Allowlist: allowlist, AllowlistVersion: version})
	id := seal.AllowlistID(allowlist, "auditor.eth")
	in := map[string]any{"packageId": w.pkg.String(), "id": hex.EncodeToString(id), "allowlist": allowlist.String(), "version": version}
	var res struct {
		Kind int    `json:"kind"`
		PTB  string `json:"ptb"`
	}
	nodetest.RunModule(t, sealSDK(t), filepath.Join("testdata", "approve_ptb.mjs"), "the Seal SDK interop tests", in, &res)
	want, err := base64.StdEncoding.DecodeString(res.PTB)
	if err != nil || res.Kind != 0 {
		t.Fatalf("SDK transaction kind %d, %v", res.Kind, err)
	}
	got, err := s.ApprovePTB(id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("PTB differs from the SDK's\n got %x\nwant %x", got, want)
	}
}
