package main

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/state"
)

func runReceiptsCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(t.Context(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func receiptKey(label string) *ecdsa.PrivateKey {
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("hermesd/cmd-receipts-test/" + label)))
	if err != nil {
		panic(err)
	}
	return k
}

func receiptsAddr(k *ecdsa.PrivateKey) string { return crypto.PubkeyToAddress(k.PublicKey).Hex() }

// runtimeLine is a small runtime-shaped receipt, signed by key (nil: "0x").
func runtimeReceiptLine(t *testing.T, callID string, ts int64, key *ecdsa.PrivateKey) string {
	t.Helper()
	f := receipts.DigestFields{CallID: callID, TokenID: "3", Subscriber: "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234",
		OutputHash: "0x" + strings.Repeat("bb", 32), StateDeltaHash: "0x" + strings.Repeat("33", 32), TS: ts}
	sig := "0x"
	if key != nil {
		var err error
		if sig, err = receipts.Sign(f, key); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf(`{"schemaVersion":"stratum/receipt/v2","tokenId":3,"subscriber":%q,"callId":%q,"outputHash":%q,`+
		`"model":"hermes <3>","bundleHashBefore":"0x%s","bundleHashAfter":"0x%s","stateDeltaHash":%q,"ts":%d,"signature":%q}`,
		f.Subscriber, callID, f.OutputHash, strings.Repeat("11", 32), strings.Repeat("22", 32), f.StateDeltaHash, ts, sig)
}

func snapshotReceiptLine(t *testing.T, key *ecdsa.PrivateKey, ts int64) string {
	t.Helper()
	r, err := receipts.NewSnapshotReceipt(receipts.SnapshotInfo{
		AgentID: "a1", TokenID: "3",
		BundleHashBefore: "0x" + strings.Repeat("11", 32), BundleHashAfter: "0x" + strings.Repeat("22", 32),
		ParentBlobID: "blob-0", TS: ts,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return r.String()
}

func writeReceiptsFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func receiptsInLog(t *testing.T, stateDir, agent string) []string {
	t.Helper()
	l, err := receipts.OpenLog(receipts.LogPath(stateDir, agent), receipts.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	all, err := l.All()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range all {
		ids = append(ids, r.CallID)
	}
	return ids
}

func TestReceiptsAddListVerify(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op, stranger := receiptKey("operator"), receiptKey("stranger")
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	nd := strings.Join([]string{
		runtimeReceiptLine(t, "call-good", 1700000300, op),
		"",
		snapshotReceiptLine(t, op, 1700000200),
		runtimeReceiptLine(t, "call-stranger", 1700000100, stranger),
		runtimeReceiptLine(t, "call-unsigned", 1700000050, nil),
		`{"callId":"torn","ts":17`,
	}, "\n")
	file := writeReceiptsFile(t, dir, "in.ndjson", nd)

	stdout, _, err := runReceiptsCmd(t, "", "receipts", "add", "--state-dir", stateDir, "--agent", "a1", "--trust", receiptsAddr(op), file)
	if err != nil {
		t.Fatalf("add: %v\n%s", err, stdout)
	}
	for _, want := range []string{"a1: 6 lines: 2 added, 0 duplicates, 3 quarantined, 0 dropped (quarantine full), 0 rejected, 1 blank line",
		"line 4 call-stranger: quarantined:", "line 5 call-unsigned: quarantined:", "line 6: quarantined:", "receipts.log.quarantine"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("add output lacks %q:\n%s", want, stdout)
		}
	}
	ids := receiptsInLog(t, stateDir, "a1")
	if len(ids) != 2 || ids[0] != "call-good" || !strings.HasPrefix(ids[1], "hermesd-") {
		t.Fatalf("log: %v", ids)
	}

	// A signer nobody trusts gets nowhere under reject either: the whole
	// input is refused and the log is unchanged.
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "add", "--state-dir", stateDir, "--agent", "a1", "--policy", "reject",
		writeReceiptsFile(t, dir, "stranger.ndjson", runtimeReceiptLine(t, "call-stranger-2", 1700000400, stranger)))
	if exitCode(err) != exitMismatch || len(receiptsInLog(t, stateDir, "a1")) != 2 {
		t.Fatalf("reject of an unknown signer: %v\n%s", err, stdout)
	}

	// Again, as JSON: the trusted lines are duplicates now, the rest is
	// quarantined again.
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "add", "--state-dir", stateDir, "--agent", "a1", "--trust", receiptsAddr(op), "--json", file)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Agent, Policy                                   string
		Total, Lines, Imported, Duplicates, Quarantined int
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if rep.Agent != "a1" || rep.Policy != "quarantine" || rep.Lines != 6 || rep.Duplicates != 2 || rep.Imported != 0 || rep.Quarantined != 3 || rep.Total != 2 {
		t.Fatalf("report %+v", rep)
	}

	// list: newest first, with signature status.
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "list", "--state-dir", stateDir, "--trust", receiptsAddr(op), "a1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") ||
		!strings.Contains(lines[1], "call-good") || !strings.Contains(lines[1], "trusted") ||
		!strings.Contains(lines[2], "hermesd-") || !strings.Contains(lines[2], "hermesd/snapshot/v1") {
		t.Fatalf("list:\n%s", stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "list", "--state-dir", stateDir, "--limit", "1", "a1")
	if err != nil || !strings.Contains(stdout, "(1 of 2 receipts") {
		t.Fatalf("list --limit: %v\n%s", err, stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "list", "--state-dir", stateDir, "--json", "--trust", receiptsAddr(op), "a1")
	if err != nil {
		t.Fatal(err)
	}
	var lj struct {
		Agent    string
		Total    int
		Receipts []struct {
			CallID  string
			Status  string
			Receipt json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(stdout), &lj); err != nil || lj.Total != 2 || len(lj.Receipts) != 2 ||
		lj.Receipts[0].Status != "trusted" || string(lj.Receipts[0].Receipt) != runtimeReceiptLine(t, "call-good", 1700000300, op) {
		t.Fatalf("list --json: %v\n%s", err, stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "list", "--state-dir", stateDir, "--ndjson", "a1")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"); len(got) != 2 || got[0] != runtimeReceiptLine(t, "call-good", 1700000300, op) ||
		!strings.Contains(stdout, `"model":"hermes <3>"`) {
		t.Fatalf("list --ndjson:\n%s", stdout)
	}
	if _, _, err := runReceiptsCmd(t, "", "receipts", "list", "--state-dir", stateDir, "nobody"); exitCode(err) != exitNotFound {
		t.Fatalf("list of an unknown agent: %v", err)
	}
	if _, err := os.Stat(receipts.LogPath(stateDir, "nobody")); !os.IsNotExist(err) {
		t.Fatal("list created a log")
	}

	// verify
	good := writeReceiptsFile(t, dir, "good.ndjson", runtimeReceiptLine(t, "g1", 2, op)+"\n\n"+snapshotReceiptLine(t, op, 1)+"\n")
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "verify", "--trust", receiptsAddr(op), good)
	if err != nil || !strings.Contains(stdout, "2 entries: 2 trusted, 0 unknown signer, 0 failed") {
		t.Fatalf("verify good: %v\n%s", err, stdout)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "verify", "--trust", receiptsAddr(op), file)
	if exitCode(err) != exitMismatch || !strings.Contains(stdout, "line 5 call-unsigned: unsigned:") || !strings.Contains(stdout, "line 6: malformed:") ||
		!strings.Contains(stdout, "line 4 call-stranger: unknown-signer:") {
		t.Fatalf("verify mixed: %v\n%s", err, stdout)
	}
	stranged := writeReceiptsFile(t, dir, "stranger.ndjson", runtimeReceiptLine(t, "s1", 2, stranger))
	if _, _, err := runReceiptsCmd(t, "", "receipts", "verify", "--trust", receiptsAddr(op), stranged); exitCode(err) != exitMismatch {
		t.Fatalf("unknown signer must fail: %v", err)
	}
	if _, _, err := runReceiptsCmd(t, "", "receipts", "verify", "--trust", receiptsAddr(op), "--allow-unknown", stranged); err != nil {
		t.Fatalf("--allow-unknown: %v", err)
	}
	stdout, _, err = runReceiptsCmd(t, runtimeReceiptLine(t, "stdin", 2, op), "receipts", "verify", "--json", "--trust", receiptsAddr(op), "-")
	var vj struct {
		OK       bool
		Receipts int
		Results  []struct {
			Line   int
			Status string
		}
	}
	if err != nil || json.Unmarshal([]byte(stdout), &vj) != nil || !vj.OK || vj.Receipts != 1 || vj.Results[0].Status != "trusted" {
		t.Fatalf("verify --json: %v\n%s", err, stdout)
	}
}

func TestReceiptsAddPrettyJSONFromStdin(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op := receiptKey("operator")
	var pretty bytes.Buffer
	json.Indent(&pretty, []byte(runtimeReceiptLine(t, "pretty", 5, op)), "", "  ")
	stateDir := t.TempDir()
	stdout, _, err := runReceiptsCmd(t, pretty.String(), "receipts", "add", "--state-dir", stateDir, "--agent", "a1", "--trust", receiptsAddr(op), "-")
	if err != nil || !strings.Contains(stdout, "1 line: 1 added, 0 duplicates") {
		t.Fatalf("add: %v\n%s", err, stdout)
	}
	if ids := receiptsInLog(t, stateDir, "a1"); len(ids) != 1 || ids[0] != "pretty" {
		t.Fatalf("log %v", ids)
	}
}

func TestReceiptsAddReject(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op := receiptKey("operator")
	stateDir := t.TempDir()
	in := runtimeReceiptLine(t, "ok", 2, op) + "\n" + runtimeReceiptLine(t, "unsigned", 1, nil)
	stdout, _, err := runReceiptsCmd(t, in, "receipts", "add", "--state-dir", stateDir, "--agent", "a1", "--policy", "reject", "--trust", receiptsAddr(op))
	if exitCode(err) != exitMismatch || !strings.Contains(err.Error(), "line 2") || !strings.Contains(stdout, "1 rejected") {
		t.Fatalf("reject: %v\n%s", err, stdout)
	}
	if ids := receiptsInLog(t, stateDir, "a1"); len(ids) != 0 {
		t.Fatalf("rejected import changed the log: %v", ids)
	}
}

func TestReceiptsAddLockedStateDir(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	stateDir := t.TempDir()
	sd, err := state.Open(stateDir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	_, _, err = runReceiptsCmd(t, `{"callId":"x","ts":1}`, "receipts", "add", "--state-dir", stateDir, "--agent", "a1")
	if exitCode(err) != exitLocked || !strings.Contains(err.Error(), "/v1/agents/a1/receipts") {
		t.Fatalf("err = %v", err)
	}
}

func TestReceiptsWithConfig(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op := receiptKey("operator")
	dir := t.TempDir()
	cfgPath := writeReceiptsFile(t, dir, "hermesd.yml", fmt.Sprintf(`state_dir: ./state
walrus:
  publishers: ["http://127.0.0.1:1"]
  aggregators: ["http://127.0.0.1:1"]
encryption:
  key: {file: ./snapshot.key}
receipts:
  trusted: [%q]
  import_policy: reject
agents:
  - id: a1
    brain_dir: ./brain
    token_id: 3
`, receiptsAddr(op)))
	in := runtimeReceiptLine(t, "c1", 2, op) + "\n" + runtimeReceiptLine(t, "c2", 1, nil)
	stdout, _, err := runReceiptsCmd(t, in, "receipts", "add", "-config", cfgPath, "--agent", "a1", "--json")
	var rep struct {
		Log      string
		Policy   string
		Imported int
		Rejected int
	}
	json.Unmarshal([]byte(stdout), &rep)
	// The policy comes from the configuration, the trusted operator too:
	// the unsigned second line rejects the whole input.
	if exitCode(err) != exitMismatch || rep.Policy != "reject" || rep.Imported != 0 || rep.Rejected != 1 || rep.Log != filepath.Join(dir, "state", "agents", "a1", "receipts.log") {
		t.Fatalf("report %v %s", err, stdout)
	}
	if _, _, err := runReceiptsCmd(t, runtimeReceiptLine(t, "c1", 2, op), "receipts", "add", "-config", cfgPath, "--agent", "a1", "--json"); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "list", "-config", cfgPath, "a1")
	if err != nil || !strings.Contains(stdout, "c1") || !strings.Contains(stdout, "trusted") {
		t.Fatalf("list: %v\n%s", err, stdout)
	}
	good := writeReceiptsFile(t, dir, "good.ndjson", runtimeReceiptLine(t, "g", 1, op))
	if _, _, err := runReceiptsCmd(t, "", "receipts", "verify", "-config", cfgPath, good); err != nil {
		t.Fatalf("verify with configured trust: %v", err)
	}
	// An agent the configuration does not know is a usage error.
	if _, _, err := runReceiptsCmd(t, in, "receipts", "add", "-config", cfgPath, "--agent", "typo"); exitCode(err) != exitUsage {
		t.Fatalf("unknown agent: %v", err)
	}
}

func TestReceiptsUsage(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	for _, args := range [][]string{
		{"receipts"},
		{"receipts", "frobnicate"},
		{"receipts", "add", "--state-dir", t.TempDir()},
		{"receipts", "add", "--state-dir", t.TempDir(), "--agent", "../x"},
		{"receipts", "add", "--state-dir", t.TempDir(), "--agent", "a", "--policy", "drop"},
		{"receipts", "add", "--state-dir", t.TempDir(), "--agent", "a", "--trust", "0x123"},
		{"receipts", "list"},
		{"receipts", "list", "--json", "--ndjson", "a"},
		{"receipts", "verify"},
	} {
		if _, _, err := runReceiptsCmd(t, "", args...); exitCode(err) != exitUsage {
			t.Errorf("%v: err = %v (exit %d)", args, err, exitCode(err))
		}
	}
	if _, _, err := runReceiptsCmd(t, "", "receipts", "verify", filepath.Join(t.TempDir(), "missing")); exitCode(err) != exitNotFound {
		t.Errorf("missing file: %v", err)
	}
	stdout, _, err := runReceiptsCmd(t, "", "receipts", "help")
	if err != nil || !strings.Contains(stdout, "receipts.log") {
		t.Errorf("help: %v %q", err, stdout)
	}
}

// TestReceiptsAddRoutesTokens: 'receipts add --agent auditor' (token 3)
// with receipts of tokens 0, 1, 33, 123456789 and 2^40: token 33's go to
// yield's log (the agent holding it), the others are quarantined with the
// reason, and auditor's log gets token 3's only.
func TestReceiptsAddRoutesTokens(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	op := receiptKey("operator")
	dir := t.TempDir()
	cfgPath := writeReceiptsFile(t, dir, "hermesd.yml", fmt.Sprintf(`state_dir: ./state
walrus:
  publishers: ["http://127.0.0.1:1"]
  aggregators: ["http://127.0.0.1:1"]
encryption:
  key: {file: ./snapshot.key}
receipts:
  trusted: [%q]
agents:
  - id: auditor
    brain_dir: ./brains/auditor
    token_id: 3
  - id: yield
    brain_dir: ./brains/yield
    token_id: 33
`, receiptsAddr(op)))
	var lines []string
	for i, tok := range []string{"3", "0", "1", "33", "123456789", "1099511627776", "3"} {
		f := receipts.DigestFields{CallID: fmt.Sprintf("c%d", i), TokenID: tok, Subscriber: "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234",
			OutputHash: "0x" + strings.Repeat("bb", 32), StateDeltaHash: "0x" + strings.Repeat("33", 32), TS: int64(i)}
		sig, err := receipts.Sign(f, op)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf(`{"tokenId":%s,"subscriber":%q,"callId":%q,"outputHash":%q,"stateDeltaHash":%q,"ts":%d,"signature":%q}`,
			tok, f.Subscriber, f.CallID, f.OutputHash, f.StateDeltaHash, f.TS, sig))
	}
	stdout, _, err := runReceiptsCmd(t, strings.Join(lines, "\n"), "receipts", "add", "-config", cfgPath, "--agent", "auditor")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "2 added") || !strings.Contains(stdout, "4 quarantined") ||
		!strings.Contains(stdout, "token 33 belongs to agent yield: 1 added to its log") ||
		!strings.Contains(stdout, "no configured agent holds") {
		t.Errorf("output:\n%s", stdout)
	}
	state := filepath.Join(dir, "state")
	if got := receiptsInLog(t, state, "auditor"); fmt.Sprint(got) != "[c0 c6]" && fmt.Sprint(got) != "[c6 c0]" {
		t.Errorf("auditor's log: %q", got)
	}
	if got := receiptsInLog(t, state, "yield"); fmt.Sprint(got) != "[c3]" {
		t.Errorf("yield's log: %q", got)
	}
	stdout, _, err = runReceiptsCmd(t, "", "receipts", "quarantine", "list", "-config", cfgPath, "auditor")
	if err != nil || strings.Count(stdout, "foreign-token") != 4 {
		t.Errorf("quarantine: %v\n%s", err, stdout)
	}
}
