// Command benchtool-latency measures hermesd's change-to-pointer latency
// on an in-process devnet (chain with ENS, local Walrus) and daemon, for
// scripts/bench.sh. It is benchtool's one command that links the chain:
// kept apart so benchtool's processes measure their own memory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/scripts/benchtool/brains"
	"github.com/hermesd/hermesd/scripts/benchtool/figures"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runLatency(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "benchtool-latency: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// runLatency measures change-to-pointer latency: a devnet (chain with ENS +
// local Walrus) and a daemon run in this process; a brain file is edited
// and the time until the agent's ENS pointer names a new blob is taken,
// polling the chain the way any reader would.
func runLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	dir := fs.String("dir", "", "work directory (fresh)")
	n := fs.Int("n", 10, "edits")
	quiet := fs.Duration("quiet", 200*time.Millisecond, "debounce quiet period")
	maxLag := fs.Duration("max-lag", 2*time.Second, "debounce maximum lag")
	files := fs.Int("files", 100, "markdown files in the brain (plus a 1 MiB memory.db)")
	poll := fs.Duration("poll", 5*time.Millisecond, "pointer poll interval")
	verbose := fs.Bool("v", false, "daemon logs to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	const id, name = "bench", "bench.hermes.eth"
	dn, err := devnet.Start(ctx, devnet.Options{
		Dir:    *dir,
		Agents: []devnet.Agent{{ID: id, ENSName: name}},
		Quiet:  *quiet,
		MaxLag: *maxLag,
		Logger: log,
	})
	if err != nil {
		return fmt.Errorf("devnet: %w", err)
	}
	defer dn.Close()
	ac, err := dn.Config.Agent(id)
	if err != nil {
		return err
	}
	brain := ac.BrainDir
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range *files {
		if _, err := brains.WriteMarkdown(filepath.Join(brain, "skills", fmt.Sprintf("s%03d.md", i)), 1024+rng.IntN(7*1024), rng); err != nil {
			return err
		}
	}
	var seed [32]byte
	if _, err := brains.WriteRandomFile(ctx, filepath.Join(brain, "memory.db"), 1<<20, rand.NewChaCha8(seed)); err != nil {
		return err
	}

	d, err := daemon.New(ctx, dn.Config, log, compose.Options{})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.Start(ctx)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Close(cctx)
	}()

	ec, err := ens.New(ctx, ens.Config{RPCURL: dn.Chain.URL()})
	if err != nil {
		return err
	}
	defer ec.Close()
	read := func() string {
		v, _ := ec.Read(ctx, name) // no pointer yet reads as ""
		return v
	}
	waitChange := func(prev string, limit time.Duration) (string, error) {
		deadline := time.Now().Add(limit)
		for {
			if v := read(); v != "" && v != prev {
				return v, nil
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("pointer did not move from %q within %v", prev, limit)
			}
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			time.Sleep(*poll) // polling the chain, as a reader would
		}
	}
	t := time.Now()
	cur, err := waitChange("", 2*time.Minute)
	if err != nil {
		return fmt.Errorf("first snapshot: %w", err)
	}
	first := time.Since(t)

	edit := filepath.Join(brain, "skills", "edited.md")
	var lat []float64
	for i := range *n {
		if err := os.WriteFile(edit, fmt.Appendf(nil, "# edit %d\n\nlearned something new at %d\n", i, time.Now().UnixNano()), 0o644); err != nil {
			return err
		}
		t := time.Now()
		next, err := waitChange(cur, time.Minute)
		if err != nil {
			return fmt.Errorf("edit %d: %w", i, err)
		}
		lat = append(lat, ms(time.Since(t)))
		cur = next
	}
	q := ms(*quiet)
	lo, hi := figures.MinMax(lat)
	figures.Emit(map[string]float64{
		"quiet_ms":          q,
		"median_ms":         figures.Median(lat),
		"p90_ms":            figures.Quantile(lat, 0.9),
		"min_ms":            lo,
		"max_ms":            hi,
		"over_quiet_ms":     figures.Median(lat) - q,
		"over_quiet_p90_ms": figures.Quantile(lat, 0.9) - q,
		"first_pointer_ms":  ms(first),
		"edits":             float64(*n),
		"brain_files":       float64(*files + 1),
		"poll_interval_ms":  ms(*poll),
	})
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
