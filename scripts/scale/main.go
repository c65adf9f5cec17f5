// Command scale measures hermesd with many agents in one process:
// start-up time, idle RSS, idle CPU and log lines per minute while idle,
// and the daemon's VmRSS sampled every 100 ms (its peak until every
// agent is published, and over the idle window after). With -brain, each
// agent's brain starts as a copy of that directory (e.g. the bench's
// "many" dataset: -agents 1 -brain .bench/data/many).
// It starts a devnet (real chain with the agents' ENS names, local
// Walrus) in this process and the real `hermesd run` binary
// as a child, so the figures are the daemon's alone.
//
//	go run ./scripts/scale -agents 1000 -idle 60s
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run() error {
	agents := flag.Int("agents", 1000, "number of agents")
	idle := flag.Duration("idle", time.Minute, "how long to measure the idle daemon")
	bin := flag.String("hermesd", "", "hermesd binary (default: go build ./cmd/hermesd)")
	keep := flag.Bool("keep", false, "keep the scratch directory")
	brain := flag.String("brain", "", "copy this directory into every agent's brain (default: two small files)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "hermesd-scale-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	if *bin == "" {
		*bin = filepath.Join(dir, "hermesd")
		out, err := exec.Command("go", "build", "-o", *bin, "./cmd/hermesd").CombinedOutput()
		if err != nil {
			return fmt.Errorf("build: %v: %s", err, out)
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	var specs []devnet.Agent
	for i := range *agents {
		id := fmt.Sprintf("a%04d", i)
		specs = append(specs, devnet.Agent{ID: id, ENSName: id + ".hermes.eth"})
	}
	t0 := time.Now()
	dn, err := devnet.Start(ctx, devnet.Options{
		Dir: dir, Agents: specs, HTTPListen: fmt.Sprintf("127.0.0.1:%d", port),
		Quiet: 200 * time.Millisecond, MaxLag: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	defer dn.Close()
	fmt.Printf("devnet with %d registered names up in %v\n", *agents, time.Since(t0).Round(time.Millisecond))
	for _, a := range dn.Config.Agents {
		if *brain != "" {
			if err := os.CopyFS(a.BrainDir, os.DirFS(*brain)); err != nil {
				return fmt.Errorf("copy %s: %w", *brain, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Join(a.BrainDir, "skills"), 0o755); err != nil {
			return err
		}
		os.WriteFile(filepath.Join(a.BrainDir, "system.md"), []byte("You are "+a.ID+".\n"), 0o644)
		os.WriteFile(filepath.Join(a.BrainDir, "skills", "s.md"), []byte("skill of "+a.ID+"\n"), 0o644)
	}

	cmd := exec.CommandContext(ctx, *bin, "run", "-config", dn.ConfigPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	var lines atomic.Int64
	var errLines atomic.Int64
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines.Add(1)
			if strings.Contains(sc.Text(), "level=ERROR") {
				errLines.Add(1)
			}
		}
	}()
	defer cmd.Process.Kill()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// VmRSS every 100 ms; peak is the largest since the last take, with
	// its anonymous and file-backed parts (the binary's pages count in
	// VmRSS: how many are mapped depends on how the page cache holds the
	// binary, e.g. in large folios right after it was written).
	var peak atomic.Int64
	var peakMu sync.Mutex
	var peakAnon, peakFile int64
	sampled := make(chan struct{})
	defer func() { <-sampled }()
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if st, err := procStatus(cmd.Process.Pid); err == nil && st["VmRSS"] > peak.Load() {
				peakMu.Lock()
				peak.Store(st["VmRSS"])
				peakAnon, peakFile = st["RssAnon"], st["RssFile"]
				peakMu.Unlock()
			}
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	var ready, settled time.Duration
	for ctx.Err() == nil {
		st, err := status(base)
		if err == nil {
			if ready == 0 && st.Ready {
				ready = time.Since(started)
			}
			if st.settled() {
				settled = time.Since(started)
				break
			}
		}
		time.Sleep(200 * time.Millisecond) // polling the daemon's status
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	peakMu.Lock()
	fmt.Printf("start-up: ready (every agent restored or fresh and watched) after %v; every agent snapshotted and published after %v; VmRSS peak until then %d MiB (anonymous %d, files %d; sampled every 100 ms)\n",
		ready.Round(time.Millisecond), settled.Round(time.Millisecond), peak.Swap(0)>>20, peakAnon>>20, peakFile>>20)
	peakMu.Unlock()

	// Idle: let the last writes settle, then measure.
	time.Sleep(5 * time.Second) // settling before the measured window
	pid := cmd.Process.Pid
	cpu0, err := cpuTime(pid)
	if err != nil {
		return err
	}
	lines0 := lines.Load()
	w0 := time.Now()
	time.Sleep(*idle) // the measured idle window itself
	cpu1, err := cpuTime(pid)
	if err != nil {
		return err
	}
	window := time.Since(w0)
	rss, hwm, err := memory(pid)
	if err != nil {
		return err
	}
	st, _ := procStatus(pid) // anonymous (heap, stacks) and file pages (the binary's)
	anon, file := st["RssAnon"], st["RssFile"]
	idleLines := lines.Load() - lines0
	peakMu.Lock()
	fmt.Printf("idle over %v: CPU %.2f%% of a core, RSS %d MiB (anonymous %d, the binary's and other files' pages %d; sampled peak after the start-up %d MiB (anonymous %d, files %d), VmHWM %d MiB), %d log lines (%.1f per minute), %d error lines in total\n",
		window.Round(time.Second), 100*(cpu1-cpu0).Seconds()/window.Seconds(), rss>>20, anon>>20, file>>20, peak.Load()>>20, peakAnon>>20, peakFile>>20, hwm>>20,
		idleLines, float64(idleLines)/window.Minutes(), errLines.Load())
	peakMu.Unlock()

	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	fmt.Printf("SIGTERM: exit %d\n", code)
	return nil
}

type statusReport struct {
	Ready  bool `json:"ready"`
	Agents []struct {
		Last *struct {
			BlobID string `json:"blobId"`
		} `json:"last"`
		Published string `json:"published"`
		Pending   any    `json:"pending"`
	} `json:"agents"`
}

func (s statusReport) settled() bool {
	if !s.Ready || len(s.Agents) == 0 {
		return false
	}
	for _, a := range s.Agents {
		if a.Last == nil || a.Pending != nil || a.Published != a.Last.BlobID {
			return false
		}
	}
	return true
}

func status(base string) (statusReport, error) {
	var s statusReport
	resp, err := http.Get(base + "/v1/status")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&s)
	return s, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cpuTime is the process's user + system time from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ
	return time.Duration(ut+st) * time.Second / hz, nil
}

// procStatus returns the kB fields of the process's /proc status, in bytes.
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if v, kb := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && kb {
			n, _ := strconv.ParseInt(v, 10, 64)
			out[k] = n << 10
		}
	}
	return out, nil
}

// memory returns VmRSS and VmHWM in bytes.
func memory(pid int) (rss, hwm int64, err error) {
	st, err := procStatus(pid)
	return st["VmRSS"], st["VmHWM"], err
}
