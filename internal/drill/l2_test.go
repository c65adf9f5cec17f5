package drill

import (
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/state"
)

// The drill of an agent whose record lives on the devnet's L2: the
// snapshot is published on the L2, waited for until L1 resolution (the
// OffchainResolver and its gateway) shows it, and the cold path reads it
// through L1 like a fresh machine — with the gateway lagging at first.
func TestDrillL2(t *testing.T) {
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir:    t.TempDir(),
		Shards: 100,
		Agents: []devnet.Agent{{ID: "scout", ENSName: "scout.l2.hermes.eth", OnL2: true}},
		L2:     &devnet.L2Options{Lag: 1, VisibilityTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	w := &world{t: t, dn: dn}
	seedBrain(t, w.brain("scout"))

	// The gateway catches up once the drill has found its write on the
	// L2 not visible from L1 (the agent's state records the read).
	go func() {
		dir := state.AgentPath(dn.Config.StateDir, "scout")
		for t.Context().Err() == nil {
			if st, err := state.LoadAgent(dir); err == nil && st.Pending != nil && st.Pending.Written != nil && st.Pending.Written.Reads > 0 {
				dn.L2.Records.SetLag(0)
				return
			}
			time.Sleep(5 * time.Millisecond) // polling a condition
		}
	}()
	o := w.opts("scout")
	o.Destructive = true // the drill that publishes
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("%v\n%+v", err, rep)
	}
	if !rep.Passed() || rep.TxHash == "" {
		t.Fatalf("report %+v", rep)
	}
	var publish, read string
	for _, s := range rep.Stages {
		switch s.Name {
		case "publish":
			publish = s.Detail
		case "ens-read":
			read = s.Detail
		}
	}
	if !strings.Contains(publish, "ens.records l2 (chain 1338)") || !strings.Contains(publish, "visible from L1 after") {
		t.Errorf("publish stage: %q", publish)
	}
	if !strings.Contains(read, rep.BlobID) {
		t.Errorf("ens-read stage: %q", read)
	}
	if got := w.pointer("scout.l2.hermes.eth"); got != rep.BlobID {
		t.Errorf("through L1: %s, drill restored %s", got, rep.BlobID)
	}
	st, err := state.LoadAgent(state.AgentPath(dn.Config.StateDir, "scout"))
	if err != nil || st.Pending != nil || st.Published != rep.BlobID {
		t.Fatalf("state %+v, %v", st, err)
	}
	// The read-only drill reads the same record through L1.
	ro, err := Run(t.Context(), w.opts("scout"))
	if err != nil || ro.BlobID != rep.BlobID {
		t.Fatalf("read-only drill of the L2 record: %v\n%+v", err, ro)
	}
}
