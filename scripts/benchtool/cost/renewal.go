package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
)

// renewal is what keeping an unchanged brain restorable costs at some
// epochs: format v3 writes the live objects of a pack again (a repack)
// expiry_margin epochs before the pack's end, so shorter epochs mean more
// repacks, each paid for epochs epochs.
type renewal struct {
	Epochs, Margin int
	Epoch          time.Duration // the short epoch it ran with
	Ran            int           // epochs
	F              *figures
}

// runRenewal measures renewal for each of epochs: one agent whose brain
// never changes, on a devnet whose Walrus epochs last epoch, for enough
// epochs to see three repacks; per month at mainnet's two-week epochs.
func runRenewal(ctx context.Context, o *options, w *writer, tmpl string, log *slog.Logger) ([]renewal, error) {
	var out []renewal
	files, bytes, err := otherFiles(tmpl)
	if err != nil {
		return nil, err
	}
	for _, e := range o.renewalEpochs {
		m := configured()
		m.Key, m.Label, m.Epochs = fmt.Sprintf("r%d", e), fmt.Sprintf("an unchanged brain, epochs %d", e), e
		if e < m.ExpiryMargin+2 {
			return nil, fmt.Errorf("renewal: epochs %d leaves no room for expiry_margin %d", e, m.ExpiryMargin)
		}
		// A repack is due (epochs - margin - 1) epochs after a pack was
		// stored (snapshot.RepackPolicy: the epoch it was stored in may
		// have begun just before); three of them, and one epoch more.
		period := e - m.ExpiryMargin - 1
		n := 3*period + 1
		dir := filepath.Join(o.dir, "renewal", m.Key)
		dn, err := devnet.Start(ctx, devnet.Options{Dir: filepath.Join(dir, "devnet"),
			Agents: []devnet.Agent{{ID: m.agentID(0), ENSName: m.agentID(0) + ".hermes.eth"}}, EpochDuration: o.renewalEpoch, Shards: o.shards, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("renewal devnet: %w", err)
		}
		// One minute of a two-week epoch.
		sc := scale{tick: o.renewalEpoch / (14 * 24 * 60)}
		fmt.Fprintf(os.Stderr, "cost: renewal of an unchanged brain at epochs %d: %d epochs of %v\n", e, n, o.renewalEpoch)
		mr := &modeRun{mode: m, scale: sc, agents: 1, ticks: n * 14 * 24 * 60, idle: true,
			dir: filepath.Join(dir, "run"), dn: dn, w: w, tmpl: tmpl, log: log}
		mr.other.files, mr.other.bytes = files, bytes
		res, err := mr.run(ctx)
		dn.Close()
		if err != nil {
			return nil, fmt.Errorf("renewal at epochs %d: %w", e, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		out = append(out, renewal{Epochs: e, Margin: m.ExpiryMargin, Epoch: o.renewalEpoch, Ran: n, F: measure(res)})
	}
	return out, nil
}

func reportRenewal(out io.Writer, rs []renewal, p prices) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(out, "\nrenewal of an unchanged brain per agent-month (repacks before expiry; each run: one agent, %v epochs, per month at two-week epochs)\n", rs[0].Epoch)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epochs\trepacks\tWalrus blobs\tquilt patches\tencoded GB-months\tWAL\tUSD\tSui transactions\tpointer transactions\tENS gas\tgas USD\tstays restorable unattended\t")
	for _, r := range rs {
		f := r.F
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t$%s\t%s\t%s\t%s\t$%s\t%d-%d weeks\t\n", r.Epochs, num(f.Snapshots), num(f.Blobs), num(f.Patches),
			num(f.gbMonths()), num(f.wal()), num(f.walrusUSD(p)), num(f.SuiTx), num(f.PointerTx), num(f.Gas), num(f.gasUSD(p)),
			2*r.Margin, 2*r.Epochs)
	}
	tw.Flush()
	fmt.Fprintln(out, "  a repack stores the brain's live objects again for epochs epochs, expiry_margin (1) epochs before the old pack's end; after the daemon stops, the brain stays restorable until its oldest pack ends")
}
