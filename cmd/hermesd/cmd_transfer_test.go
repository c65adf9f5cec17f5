package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/handover"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/repo"
)

func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	code = report(&errOut, err)
	return out.String(), errOut.String(), code
}

func testHandover() handover.Handover {
	token := uint64(42)
	var k [repo.KeySize]byte
	for i := range k {
		k[i] = byte(0xa0 + i)
	}
	return handover.Handover{
		Agent: "auditor", Identity: "auditor.hermes.eth", ENSName: "auditor.hermes.eth", TokenID: &token,
		Head: "Qm9vdHN0cmFwX2hlYWRfYmxvYl9pZF9mb3JfdGVzdHM", BundleHash: hash.Digest{1, 2, 3},
		Key: repo.NewAgentKey(k), Created: time.Date(2026, 9, 2, 8, 30, 0, 0, time.UTC),
		Seller: common.HexToAddress("0x00000000000000000000000000000000000000aa"),
	}
}

func TestTransferRequest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "buyer.key")
	stdout, stderr, code := runCmd(t, "transfer", "request", "auditor", "--identity", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recipient := strings.TrimSpace(stdout)
	if !strings.HasPrefix(recipient, "age1") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("stdout %q, want one recipient line", stdout)
	}
	if !strings.Contains(stderr, path) {
		t.Errorf("stderr does not name the identity file: %q", stderr)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v, mode %v", err, st.Mode())
	}
	body, _ := os.ReadFile(path)
	secret := strings.TrimSpace(string(body[bytes.Index(body, []byte("AGE-SECRET-KEY-")):]))
	if strings.Contains(stdout+stderr, secret) {
		t.Fatal("request printed the secret identity")
	}
	// The identity opens what is sealed to the printed recipient, with
	// hermesd and with the age CLI.
	var sealed bytes.Buffer
	if err := handover.Seal(&sealed, testHandover(), recipient); err != nil {
		t.Fatal(err)
	}
	ids, err := handover.ReadIdentityFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handover.Open(bytes.NewReader(sealed.Bytes()), ids...); err != nil {
		t.Fatalf("Open with the requested identity: %v", err)
	}
	ageBin, err := exec.LookPath("age")
	if err != nil {
		t.Fatal("age CLI not found: run scripts/ensure-tools.sh (make deps)")
	}
	cmd := exec.Command(ageBin, "-d", "-i", path)
	cmd.Stdin = bytes.NewReader(sealed.Bytes())
	if out, err := cmd.Output(); err != nil || !bytes.Contains(out, []byte(`"agent": "auditor"`)) {
		t.Fatalf("age -d with the requested identity: %v %q", err, out)
	}

	// Never overwritten: usage error, file unchanged.
	_, stderr, code = runCmd(t, "transfer", "request", "auditor", "--identity", path)
	if code != exitUsage || !strings.Contains(stderr, "refusing to overwrite") {
		t.Fatalf("second request: exit %d, %q", code, stderr)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, body) {
		t.Fatal("identity file changed")
	}
}

func TestTransferRequestDefaultsAndJSON(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	stdout, stderr, code := runCmd(t, "transfer", "request", "--json", "auditor")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct{ Agent, Identity, Recipient string }
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	want := filepath.Join(dir, "auditor.transfer.key")
	if got.Agent != "auditor" || got.Identity != want || !strings.HasPrefix(got.Recipient, "age1") {
		t.Fatalf("got %+v, want identity %s", got, want)
	}
	ids, err := handover.ReadIdentityFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if r := ids[0].(*age.X25519Identity).Recipient().String(); r != got.Recipient {
		t.Fatalf("file's recipient %s, printed %s", r, got.Recipient)
	}
	for _, args := range [][]string{
		{"transfer", "request"},
		{"transfer", "request", "a", "b"},
		{"transfer", "request", "Bad/Name"},
		{"transfer", "request", "\x1b[31mred"},
		{"transfer", "bogus"},
		{"transfer"},
	} {
		_, stderr, code := runCmd(t, args...)
		if code != exitUsage || strings.Contains(stderr, "\x1b") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestTransferShow(t *testing.T) {
	dir := t.TempDir()
	idPath := filepath.Join(dir, "buyer.key")
	recipient, err := handover.NewIdentityFile(idPath, "")
	if err != nil {
		t.Fatal(err)
	}
	h := testHandover()
	var sealed bytes.Buffer
	if err := handover.Seal(&sealed, h, recipient); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "auditor.handover")
	if err := os.WriteFile(file, sealed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	key := h.Key.Bytes()
	secret := base64.RawURLEncoding.EncodeToString(key[:])

	stdout, stderr, code := runCmd(t, "transfer", "show", "--identity", idPath, file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"agent:       auditor\n", "ens name:    auditor.hermes.eth\n", "token id:    42\n",
		"head:        " + h.Head + "\n", "bundle hash: " + h.BundleHash.String() + "\n", "key id:      " + h.KeyID() + "\n",
		"created:     2026-09-02T08:30:00Z\n", "seller:      " + h.Seller.Hex() + "\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Fatal("show printed the key")
	}

	stdout, _, code = runCmd(t, "transfer", "show", file, "--json", "--identity", idPath)
	if code != exitOK {
		t.Fatalf("--json: exit %d", code)
	}
	var v transferView
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if v.KeyID != h.KeyID() || v.Head != h.Head || v.TokenID == nil || *v.TokenID != 42 || strings.Contains(stdout, secret) {
		t.Fatalf("--json: %+v", v)
	}

	// Refusals, each with its exit code and one clear line.
	otherID := filepath.Join(dir, "other.key")
	if _, err := handover.NewIdentityFile(otherID, ""); err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.handover")
	tb := bytes.Clone(sealed.Bytes())
	tb[len(tb)-5] ^= 1
	os.WriteFile(tampered, tb, 0o644)
	notDoc := filepath.Join(dir, "notdoc.handover")
	var nd bytes.Buffer
	r, _ := age.ParseX25519Recipient(recipient)
	w, _ := age.Encrypt(&nd, r)
	w.Write([]byte(`{"format": "hermesd/handover/v1"}`))
	w.Close()
	os.WriteFile(notDoc, nd.Bytes(), 0o644)
	openID := filepath.Join(dir, "open.key")
	body, _ := os.ReadFile(idPath)
	os.WriteFile(openID, body, 0o644)
	os.Chmod(openID, 0o644)

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"wrong identity", []string{"--identity", otherID, file}, exitAuth, "not encrypted to this identity"},
		{"tampered", []string{"--identity", idPath, tampered}, exitAuth, "damaged or was tampered with"},
		{"not a handover", []string{"--identity", idPath, notDoc}, exitMismatch, "not a valid handover"},
		{"missing", []string{"--identity", idPath, filepath.Join(dir, "nope")}, exitNotFound, "no such file"},
		{"no identity flag", []string{file}, exitUsage, "--identity FILE is required"},
		{"identity readable by others", []string{"--identity", openID, file}, exitUsage, "chmod 600"},
		{"no file", []string{"--identity", idPath}, exitUsage, "want one HANDOVER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(t, append([]string{"transfer", "show"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) || stdout != "" {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q (want %q)", code, tc.code, stdout, stderr, tc.msg)
			}
		})
	}
}
