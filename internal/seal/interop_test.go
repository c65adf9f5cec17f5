package seal_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hermesd/hermesd/internal/nodetest"
	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
)

// The interop tests drive the official SDK (@mysten/seal 1.4.12, installed
// into .deps/seal by scripts/fetch-seal-sdk.sh, which the test runs itself
// when the SDK is missing) through testdata/interop.mjs. They need Node.js
// and fail, never skip, without it.

var sdkOnce struct {
	sync.Once
	dir string
	err error
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// sdkDir returns the installed SDK directory, installing it if needed.
func sdkDir(t *testing.T) string {
	t.Helper()
	sdkOnce.Do(func() {
		if d := os.Getenv("HERMESD_SEAL_SDK"); d != "" {
			sdkOnce.dir = d
			return
		}
		root, err := repoRoot()
		if err != nil {
			sdkOnce.err = err
			return
		}
		sdkOnce.dir = filepath.Join(root, ".deps", "seal")
		cmd := exec.Command(filepath.Join(root, "scripts", "fetch-seal-sdk.sh"))
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			sdkOnce.err = fmt.Errorf("scripts/fetch-seal-sdk.sh: %v\n%s", err, out)
		}
	})
	if sdkOnce.err != nil {
		t.Fatalf("the official Seal SDK is needed for this test: %v", sdkOnce.err)
	}
	return sdkOnce.dir
}

type task map[string]any

// runSDK runs tasks through interop.mjs and returns one result per task.
func runSDK(t *testing.T, tasks []task) []map[string]any {
	t.Helper()
	var results []map[string]any
	nodetest.RunModule(t, sdkDir(t), filepath.Join("testdata", "interop.mjs"), "the interop tests with the official Seal SDK", tasks, &results)
	if len(results) != len(tasks) {
		t.Fatalf("node interop.mjs: %d results for %d tasks", len(results), len(tasks))
	}
	return results
}

func field(t *testing.T, r map[string]any, key string) string {
	t.Helper()
	if e, ok := r["error"]; ok {
		t.Fatalf("SDK error: %v", e)
	}
	s, ok := r[key].(string)
	if !ok {
		t.Fatalf("SDK result has no %q: %v", key, r)
	}
	return s
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sdkServers(cfg seal.Config) []map[string]any {
	var out []map[string]any
	for _, s := range cfg.Servers {
		pk := s.PublicKey.Bytes()
		out = append(out, map[string]any{"objectId": s.ObjectID.String(), "pk": hex.EncodeToString(pk[:]), "weight": s.Weight, "url": s.URL})
	}
	return out
}

// The threshold matrix of both directions.
var interopCases = []struct {
	name      string
	weights   []int
	threshold int
	dem       string
	aad       []byte
	size      int
	// subset: indexes of servers whose keys alone must decrypt.
	subset []int
}{
	{"1-of-1", []int{1}, 1, "aes", nil, 100, []int{0}},
	{"2-of-3", []int{1, 1, 1}, 2, "aes", []byte("agent-7"), 1 << 20, []int{0, 2}},
	{"3-of-5", []int{1, 1, 1, 1, 1}, 3, "hmac", []byte("brain"), 1000, []int{1, 3, 4}},
	{"weighted 3-of-4 (2+1+1)", []int{2, 1, 1}, 3, "aes", nil, 5000, []int{0, 2}},
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// SDK encrypts; Go decrypts with the servers' user secret keys (all of them
// with the share consistency check, and a minimal subset), through its
// client against the Go key servers, and with the SDK's symmetric key.
func TestInteropSDKEncryptGoDecrypt(t *testing.T) {
	nets := make([]*testNet, len(interopCases))
	var tasks []task
	for i, c := range interopCases {
		nets[i] = newTestNet(t, c.weights, c.threshold, nil)
		tk := task{"op": "encrypt", "packageId": testPkg.String(), "id": hex.EncodeToString([]byte("agent-" + c.name)),
			"threshold": c.threshold, "servers": sdkServers(nets[i].cfg), "data": base64.StdEncoding.EncodeToString(payload(c.size)), "dem": c.dem}
		if c.aad != nil {
			tk["aad"] = base64.StdEncoding.EncodeToString(c.aad)
		}
		tasks = append(tasks, tk)
	}
	results := runSDK(t, tasks)
	for i, c := range interopCases {
		t.Run(c.name, func(t *testing.T) {
			tn, want := nets[i], payload(c.size)
			raw := b64(t, field(t, results[i], "object"))
			o, err := seal.ParseEncryptedObject(raw)
			if err != nil {
				t.Fatal(err)
			}
			if re, err := o.MarshalBinary(); err != nil || !bytes.Equal(re, raw) {
				t.Fatalf("re-marshal differs (%v)", err)
			}
			total := 0
			for _, w := range c.weights {
				total += w
			}
			if len(o.Services) != total || int(o.Threshold) != c.threshold || string(o.ID) != "agent-"+c.name {
				t.Fatalf("header: %d services, threshold %d, id %q", len(o.Services), o.Threshold, o.ID)
			}

			all := tn.usks(o)
			pt, err := seal.Decrypt(o, all, tn.pks(), &seal.DecryptOptions{CheckShareConsistency: true})
			if err != nil || !bytes.Equal(pt, want) {
				t.Fatalf("decrypt with every key: %v", err)
			}
			sub := map[seal.Address]*seal.UserSecretKey{}
			for _, j := range c.subset {
				id := tn.cfg.Servers[j].ObjectID
				sub[id] = all[id]
			}
			if pt, err := seal.Decrypt(o, sub, tn.pks(), nil); err != nil || !bytes.Equal(pt, want) {
				t.Fatalf("decrypt with servers %v: %v", c.subset, err)
			}

			cl, err := seal.NewClient(tn.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pt, err := cl.Decrypt(t.Context(), raw, tn.session(t), approve, &seal.DecryptOptions{CheckShareConsistency: true}); err != nil || !bytes.Equal(pt, want) {
				t.Fatalf("client decrypt: %v", err)
			}

			key := seal.Key(mustHexT(t, field(t, results[i], "key")))
			if pt, err := seal.DecryptWithKey(o, key); err != nil || !bytes.Equal(pt, want) {
				t.Fatalf("decrypt with the SDK's symmetric key: %v", err)
			}
		})
	}
}

// Go encrypts; the SDK's SealClient decrypts, fetching keys from the Go key
// servers with its own session key, certificate and request signature, and
// verifying each server's proof of possession via /v1/service.
func TestInteropGoEncryptSDKDecrypt(t *testing.T) {
	user, err := seal.GenerateSuiKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []task
	for i, c := range interopCases {
		// Servers outside the subset refuse the user: the subset's weight
		// must do, and the SDK must tolerate the refusals.
		tn := newTestNet(t, c.weights, c.threshold, func(j int, _ seal.Address) sealserver.Policy {
			if contains(c.subset, j) {
				return sealserver.Allowlist(user.Address())
			}
			return sealserver.Allowlist()
		})
		obj, _, err := seal.Encrypt(&tn.cfg, []byte("agent-"+c.name), payload(c.size), &seal.EncryptOptions{DEM: map[string]seal.DEM{"aes": seal.AESGCM, "hmac": seal.HMACCTR}[c.dem], AAD: c.aad})
		if err != nil {
			t.Fatal(err)
		}
		tk := task{"op": "decrypt", "packageId": testPkg.String(), "module": "allowlist", "object": base64.StdEncoding.EncodeToString(obj),
			"servers": sdkServers(tn.cfg), "suiKey": user.Export(), "verifyKeyServers": true, "checkShareConsistency": i%2 == 0}
		tasks = append(tasks, tk)
	}
	// A requester outside the allowlist is refused by every server.
	denied := newTestNet(t, []int{1, 1, 1}, 2, func(int, seal.Address) sealserver.Policy { return sealserver.Allowlist(seal.Address{1}) })
	obj, _, err := seal.Encrypt(&denied.cfg, []byte("x"), []byte("secret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks = append(tasks, task{"op": "decrypt", "packageId": testPkg.String(), "module": "allowlist", "object": base64.StdEncoding.EncodeToString(obj),
		"servers": sdkServers(denied.cfg), "suiKey": user.Export()})

	results := runSDK(t, tasks)
	for i, c := range interopCases {
		t.Run(c.name, func(t *testing.T) {
			if got := b64(t, field(t, results[i], "plaintext")); !bytes.Equal(got, payload(c.size)) {
				t.Fatalf("SDK decrypted %d bytes, not the plaintext", len(got))
			}
		})
	}
	t.Run("not on the allowlist", func(t *testing.T) {
		e, _ := results[len(results)-1]["error"].(string)
		if !strings.Contains(e, "NoAccessError") {
			t.Fatalf("SDK result %v, want a NoAccessError", results[len(results)-1])
		}
	})
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func mustHexT(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The Sui primitives of the SDK, recomputed in Go byte for byte: address,
// suiprivkey export, personal-message signature, and the seal_approve PTB
// (transaction kind ProgrammableTransaction, then the PTB's BCS).
func TestInteropSuiPrimitives(t *testing.T) {
	type want struct {
		key *seal.SuiKey
		msg []byte
		pkg seal.Address
		mod string
		id  []byte
	}
	var cases []want
	var tasks []task
	for i := 0; i < 3; i++ {
		k, err := seal.GenerateSuiKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		w := want{key: k, msg: payload(40 + 300*i), pkg: seal.Address{0: byte(i), 31: 0x42}, mod: []string{"allowlist", "account_based", "m"}[i], id: payload(i * 20)}
		cases = append(cases, w)
		tasks = append(tasks, task{"op": "sui", "suiKey": k.Export(), "message": base64.StdEncoding.EncodeToString(w.msg),
			"packageId": w.pkg.String(), "module": w.mod, "id": hex.EncodeToString(w.id)})
	}
	results := runSDK(t, tasks)
	for i, w := range cases {
		r := results[i]
		if got := field(t, r, "address"); got != w.key.Address().String() {
			t.Errorf("%d: SDK address %s, Go %s", i, got, w.key.Address())
		}
		if got := field(t, r, "exported"); got != w.key.Export() {
			t.Errorf("%d: SDK export differs", i)
		}
		sig, err := w.key.SignPersonalMessage(w.msg)
		if err != nil || field(t, r, "signature") != sig {
			t.Errorf("%d: SDK signature %s, Go %s (%v)", i, field(t, r, "signature"), sig, err)
		}
		p, err := seal.Approve{Module: w.mod}.BuildPTB(w.pkg, [][]byte{w.id})
		if err != nil {
			t.Fatal(err)
		}
		if got := field(t, r, "ptb"); got != base64.StdEncoding.EncodeToString(p.MarshalBCS()) || r["kind"] != float64(0) {
			t.Errorf("%d: SDK PTB %s (kind %v), Go %s", i, got, r["kind"], base64.StdEncoding.EncodeToString(p.MarshalBCS()))
		}
	}
}

// The SDK's own user-secret-key check agrees with Go's: keys Go extracts
// verify, and the SealCLI.mdx documented keys (an early derivation, see
// TestSealCLIVector) do not, for the SDK either.
func TestInteropSealCLIKeys(t *testing.T) {
	usks, pks, fullID := seal.CLIVectorKeys()
	var keys []map[string]any
	for i := range usks {
		keys = append(keys, map[string]any{"usk": usks[i], "pk": pks[i], "fullId": hex.EncodeToString(fullID)})
	}
	mk, err := seal.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ours := mk.Extract(fullID).Bytes()
	pk := mk.PublicKey().Bytes()
	keys = append(keys, map[string]any{"usk": hex.EncodeToString(ours[:]), "pk": hex.EncodeToString(pk[:]), "fullId": hex.EncodeToString(fullID)})
	r := runSDK(t, []task{{"op": "verifyKeys", "keys": keys}})[0]
	valid, ok := r["valid"].([]any)
	if !ok || len(valid) != len(keys) {
		t.Fatalf("SDK result %v", r)
	}
	for i := range usks {
		if valid[i] != false {
			t.Errorf("the SDK accepts documented key %d", i)
		}
	}
	if valid[len(keys)-1] != true {
		t.Errorf("the SDK rejects a key Go extracted")
	}
}
