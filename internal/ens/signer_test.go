package ens

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

func TestLoadSigner(t *testing.T) {
	dir := t.TempDir()
	key := hex.EncodeToString(crypto.FromECDSA(agentKey))
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ks, err := keystore.EncryptKey(&keystore.Key{Address: agentAddr, PrivateKey: agentKey}, "correct horse ", keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERMESD_TEST_KEY", "  0x"+strings.ToUpper(key)+"\n")
	t.Setenv("HERMESD_TEST_EMPTY", " ")
	t.Setenv("HERMESD_TEST_BAD", key[:63]+"g")

	good := []struct {
		name string
		src  SignerSource
	}{
		{"key file with 0x and newline", SignerSource{KeyFile: write("k1", "0x"+key+"\n", 0o600)}},
		{"key file bare hex", SignerSource{KeyFile: write("k2", key, 0o400)}},
		{"env", SignerSource{KeyEnv: "HERMESD_TEST_KEY"}},
		{"keystore", SignerSource{Keystore: write("ks.json", string(ks), 0o644), PasswordFile: write("pw", "correct horse \nsecond line\n", 0o600)}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LoadSigner(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if s.Address() != agentAddr {
				t.Fatalf("address %s, want %s", s.Address(), agentAddr)
			}
		})
	}

	bad := []struct {
		name, want string
		src        SignerSource
	}{
		{"none", "no signer key source", SignerSource{}},
		{"two sources", "more than one", SignerSource{KeyFile: "x", KeyEnv: "Y"}},
		{"world-readable key", "chmod 600", SignerSource{KeyFile: write("k3", key, 0o644)}},
		{"group-writable password", "chmod 600", SignerSource{Keystore: filepath.Join(dir, "ks.json"), PasswordFile: write("pw2", "correct horse ", 0o660)}},
		{"wrong password", "wrong password", SignerSource{Keystore: filepath.Join(dir, "ks.json"), PasswordFile: write("pw3", "battery staple", 0o600)}},
		{"keystore without password", "password file", SignerSource{Keystore: filepath.Join(dir, "ks.json")}},
		{"missing file", "no such file", SignerSource{KeyFile: filepath.Join(dir, "nope")}},
		{"short key", "64 hex digits", SignerSource{KeyFile: write("k4", key[:62], 0o600)}},
		{"not hex", "not a valid", SignerSource{KeyEnv: "HERMESD_TEST_BAD"}},
		{"unset env", "not set", SignerSource{KeyEnv: "HERMESD_TEST_UNSET_VAR"}},
		{"empty env", "not set or empty", SignerSource{KeyEnv: "HERMESD_TEST_EMPTY"}},
		{"zero key", "not a valid", SignerSource{KeyFile: write("k5", strings.Repeat("0", 64), 0o600)}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadSigner(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(strings.ToLower(err.Error()), key[:16]) {
				t.Fatalf("error leaks key material: %v", err)
			}
		})
	}
}

func TestSignerNeverPrintsKey(t *testing.T) {
	s := NewSigner(agentKey)
	key := hex.EncodeToString(crypto.FromECDSA(agentKey))
	// The scalar in decimal, as %v of the big.Int would print it.
	d := new(big.Int).SetBytes(crypto.FromECDSA(agentKey)).String()
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "signer", s)
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), logs.String(),
	} {
		if strings.Contains(strings.ToLower(out), key) || strings.Contains(out, d) {
			t.Fatalf("key material printed: %s", out)
		}
		if !strings.Contains(out, agentAddr.Hex()) {
			t.Fatalf("address not printed: %s", out)
		}
	}
}

// fakeNode scripts SendTransaction errors for the nonce manager.
type fakeNode struct {
	pending uint64
	errs    []error // returned by successive sends
	sent    []uint64
	queries int
}

func (f *fakeNode) PendingNonceAt(context.Context, common.Address) (uint64, error) {
	f.queries++
	return f.pending, nil
}

func (f *fakeNode) SendTransaction(_ context.Context, tx *types.Transaction) error {
	f.sent = append(f.sent, tx.Nonce())
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return err
	}
	return nil
}

func TestNonceManager(t *testing.T) {
	ctx := t.Context()
	build := func(n uint64) (*types.Transaction, error) {
		return types.NewTx(&types.DynamicFeeTx{Nonce: n, ChainID: big.NewInt(1)}), nil
	}
	from := common.Address{1}
	send := func(m *nonceManager, f *fakeNode) (uint64, error) {
		tx, err := m.send(ctx, f, from, build)
		if err != nil {
			return 0, err
		}
		return tx.Nonce(), nil
	}

	// Consecutive nonces from one pending-nonce query.
	m, f := new(nonceManager), &fakeNode{pending: 7}
	for want := uint64(7); want < 10; want++ {
		if n, err := send(m, f); err != nil || n != want {
			t.Fatalf("nonce %d, %v; want %d", n, err, want)
		}
	}
	if f.queries != 1 {
		t.Fatalf("%d pending-nonce queries, want 1", f.queries)
	}

	// "nonce too low": resync and retry once.
	f.pending, f.errs = 20, []error{errors.New("nonce too low: next nonce 20, tx nonce 10")}
	if n, err := send(m, f); err != nil || n != 20 {
		t.Fatalf("after nonce too low: %d, %v", n, err)
	}
	// "already known": the node has this very transaction; count it as sent.
	f.errs = []error{errors.New("already known")}
	if n, err := send(m, f); err != nil || n != 21 {
		t.Fatalf("already known: %d, %v", n, err)
	}
	if n, _ := send(m, f); n != 22 {
		t.Fatalf("after already known: %d", n)
	}
	// Another error: reported, the counter does not move, and the next
	// send resyncs.
	f.errs = []error{errors.New("connection refused")}
	if _, err := send(m, f); err == nil {
		t.Fatal("send error swallowed")
	}
	f.pending = 23
	q := f.queries
	if n, err := send(m, f); err != nil || n != 23 || f.queries != q+1 {
		t.Fatalf("after a failed send: %d, %v, queries %d→%d", n, err, q, f.queries)
	}
	// Two nonce errors in a row: give up.
	f.errs = []error{errors.New("nonce too low"), errors.New("nonce too low")}
	if _, err := send(m, f); err == nil || !strings.Contains(err.Error(), "nonce too low") {
		t.Fatalf("repeated nonce errors: %v", err)
	}
	// invalidate forces a query.
	q = f.queries
	m.invalidate()
	send(m, f)
	if f.queries != q+1 {
		t.Fatal("invalidate did not force a resync")
	}
}
