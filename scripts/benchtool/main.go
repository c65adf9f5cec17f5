//go:build linux

// Command benchtool is the developer-only helper behind scripts/bench.sh
// (`make bench`). It is not part of the hermesd binary.
//
// It generates the "big" and "many" datasets (gen.go) deterministically,
// runs hermesd's real pipeline stages as separate
// processes (so each process's peak RSS is that stage's alone), measures
// commands (wall time, CPU, peak RSS from wait4's rusage — the counter
// /usr/bin/time -v prints — and CPU used by other processes meanwhile), and
// prints the summary table with ratios against baselines measured in the
// same run.
//
// Subcommands that do work in process print their internal figures as one
// line "BENCH {json}" on stdout; `measure` collects them. The devnet
// latency figure is benchtool-latency's (scripts/benchtool/latency): the
// chain and the daemon would add ~30 MiB of binary pages to the RSS of
// every process measured here.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/hermesd/hermesd/internal/gcpace"
	"github.com/hermesd/hermesd/scripts/benchtool/figures"
)

type command struct {
	name string
	help string
	run  func(ctx context.Context, args []string) error
}

var commands = []command{
	{"gen", "generate a dataset (big or many) deterministically", runGen},
	{"warm", "read every file under the given directories (page cache warm-up)", runWarm},
	{"measure", "run a command N times and record wall/CPU/peak RSS to a results file", runMeasure},
	{"gosha", "SHA-256 every file under DIR in sequence with Go's crypto/sha256 (baseline)", runGoSHA},
	{"hashinc", "incremental re-hash after one edit (hash.Cache.Update) and stat-walk time", runHashInc},
	{"cipher", "v2 encrypt N bytes to a file, then decrypt it to io.Discard", runCipher},
	{"walrus-put", "upload a file as a blob with the walrus client", runWalrusPut},
	{"walrus-get", "download a blob with the walrus client to io.Discard", runWalrusGet},
	{"snap", "hash a brain directory and take a snapshot (snapshot.Snapshotter.Take)", runSnap},
	{"restore", "restore a snapshot into a fresh directory (snapshot.Restorer.Restore)", runRestore},
	{"v3snap", "hash a brain and take a v3 snapshot (repo.Builder) to Walrus; -second: incremental ones", runV3Snap},
	{"v3restore", "restore a v3 snapshot (repo.Open + Restore) through Walrus range reads", runV3Restore},
	{"v3sqlite", "v3 snapshot cost of one 4 KiB change inside a ~200 MiB SQLite database", runV3SQLite},
	{"freeport", "print a free TCP port on 127.0.0.1", runFreePort},
	{"waitport", "wait until 127.0.0.1:PORT accepts connections", runWaitPort},
	{"osslspeed", "openssl speed -evp aes-256-gcm as MB/s (baseline for v2)", runOpenSSLSpeed},
	{"report", "print the summary table from a results file", runReport},
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtool <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.help)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The pipelines measured here run under the daemon's pacing of the
	// collector (hermesd run), so their memory is the daemon's.
	defer gcpace.Start(gcpace.Daemon).Stop()
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(ctx, os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "benchtool %s: %v\n", c.name, err)
				stop()
				os.Exit(1)
			}
			return
		}
	}
	usage()
	os.Exit(2)
}

// The shared helpers, under the names the commands use.
var (
	emit     = figures.Emit
	median   = figures.Median
	quantile = figures.Quantile
	minmax   = figures.MinMax
)

// profileFlag adds -cpuprofile to fs; the returned start function begins
// profiling when the flag was given and returns the function that ends it.
func profileFlag(fs *flag.FlagSet) (start func() (stop func() error, err error)) {
	path := fs.String("cpuprofile", "", "write a CPU profile of the measured work to `FILE`")
	return func() (func() error, error) {
		if *path == "" {
			return func() error { return nil }, nil
		}
		f, err := os.Create(*path)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
	}
}
