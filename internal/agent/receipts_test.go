package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// TestRestoreImportsOwnTokenOnly: a restored brain whose receipts.ndjson
// holds other tokens' receipts (a snapshot taken before hermesd routed
// them) imports its own token's; the others are quarantined, the reason
// naming the agent that holds the token, never folded into this agent's
// next snapshot.
func TestRestoreImportsOwnTokenOnly(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i, tok := range []string{"3", "33", "0", "3"} {
		f := receipts.DigestFields{CallID: fmt.Sprintf("c%d", i), TokenID: tok, Subscriber: "0x9F2dC1b0E5bA3c47d1F08e6A2B4c5D7e8F901234",
			OutputHash: "0x" + strings.Repeat("bb", 32), StateDeltaHash: "0x" + strings.Repeat("33", 32), TS: int64(1700000000 + i)}
		sig, err := receipts.Sign(f, key)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf(`{"tokenId":%s,"subscriber":%q,"callId":%q,"outputHash":%q,"stateDeltaHash":%q,"ts":%d,"signature":%q}`,
			tok, f.Subscriber, f.CallID, f.OutputHash, f.StateDeltaHash, f.TS, sig))
	}
	r := newRig(t)
	r.chain.set(r.name, ref("blobX"))
	r.pipe.restore = func(ctx context.Context, blobID, target string) (snapshot.Restored, error) {
		res, err := restoreInto(target, blobID)
		if err == nil {
			err = os.WriteFile(filepath.Join(target, snapshot.ReceiptsFile), []byte(strings.Join(lines, "\n")), 0o644)
		}
		return res, err
	}
	sd, err := state.Open(r.state, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	rl, err := receipts.OpenLog(filepath.Join(t.TempDir(), "receipts.log"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	route := &receipts.Route{Agent: "alpha", Token: "3", Forward: func(token string) (*receipts.Log, string) {
		if token == "33" {
			return nil, "yield" // named, not handed over by a restore
		}
		return nil, ""
	}}
	a, err := New(Config{ID: "alpha", BrainDir: r.brain, ENSName: r.name, Quiet: time.Millisecond, MaxLag: time.Second,
		Trusted: []common.Address{crypto.PubkeyToAddress(key.PublicKey)}, ReceiptRoute: route},
		Deps{State: sd, Pipeline: r.pipe, Pointer: r.chain, Owners: r.chain, Receipts: rl})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rl.Len() != 2 || !rl.Has("c0") || !rl.Has("c3") {
		t.Fatalf("the log holds %d receipts", rl.Len())
	}
	var reasons []string
	if err := rl.IterateQuarantine(func(rec receipts.QuarantineRecord) bool {
		reasons = append(reasons, rec.Reason)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 2 || !strings.Contains(strings.Join(reasons, "|"), "which agent yield holds") {
		t.Fatalf("quarantine: %q", reasons)
	}
}
