//go:build linux

// Command blobid is the blob-id figure of scripts/bench.sh
// (BENCH_ONLY=blobid): it computes the Walrus blob ids of random blobs up
// to 64 MiB with internal/redstuff and with walrus-core's own encoder
// (@mysten/walrus-wasm, run by Node from .deps/walrus, as the
// internal/redstuff tests run it) and counts how many agree; then it
// measures what an id costs on this machine (MiB/s by wall clock and by
// CPU time, per-id time, peak RSS of a process computing the id of a
// 64 MiB file) against the upload it protects: the same bytes PUT over
// loopback to a server that discards them, measured in the same run (a
// lower bound of any upload: a Walrus publisher also encodes the blob and
// runs two Sui transactions).
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"io"
	"net/http"
	"net/http/httptest"

	"github.com/hermesd/hermesd/internal/redstuff"
)

func main() {
	n := flag.Int("n", 1000, "blobs to cross-check")
	maxSize := flag.Int64("max", 64<<20, "largest blob, bytes")
	shards := flag.Int("shards", 1000, "shard count")
	dir := flag.String("dir", "", "scratch directory (required)")
	sdk := flag.String("sdk", ".deps/walrus", "the installed npm packages (scripts/fetch-walrus-sdk.sh)")
	script := flag.String("script", "internal/redstuff/testdata/walrus.mjs", "the Node runner")
	jobs := flag.Int("jobs", 2, "Node processes at once")
	seed := flag.Uint64("seed", 1, "random seed")
	one := flag.Int64("one", -1, "compute the id of a file of this size (from -dir) and print the peak RSS (child mode)")
	flag.Parse()
	if *dir == "" {
		fail("-dir is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fail("%v", err)
	}
	if *one >= 0 {
		childOne(*dir, *one, *shards)
		return
	}
	agree(*n, *maxSize, *shards, *dir, *sdk, *script, *jobs, *seed)
	cost(*dir, *shards)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "blobid: "+format+"\n", args...)
	os.Exit(1)
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 42))
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
}

// sizes are the edges of the symbol sizes, 1, 10 and 64 MiB, then
// log-uniform random sizes up to max.
func sizes(n int, max int64, shards int, seed uint64) []int64 {
	f := (shards - 1) / 3
	ps := int64(shards-2*f) * int64(shards-f)
	out := []int64{0, 1, 2, 2 * ps, 2*ps + 1, 64 * ps, 64*ps + 1, 1 << 20, 10 << 20, max}
	r := rand.New(rand.NewPCG(seed, 7))
	for len(out) < n {
		out = append(out, int64(math.Exp2(r.Float64()*math.Log2(float64(max)+1)))-1)
	}
	for i := range out {
		out[i] = min(out[i], max)
	}
	return out[:n]
}

type result struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

func agree(n int, max int64, shards int, dir, sdk, script string, jobs int, seed uint64) {
	src, err := os.ReadFile(script)
	if err != nil {
		fail("%v", err)
	}
	runner := filepath.Join(sdk, ".blobid-walrus.mjs")
	if err := os.WriteFile(runner, src, 0o644); err != nil {
		fail("%v (run scripts/fetch-walrus-sdk.sh)", err)
	}
	defer os.Remove(runner)
	all := sizes(n, max, shards, seed)
	const batch = 8
	type outcome struct {
		size     int64
		ok       bool
		goTime   time.Duration
		wasmTime time.Duration
	}
	outcomes := make([]outcome, len(all))
	var mu, goMu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, jobs)
	start := time.Now()
	for b0 := 0; b0 < len(all); b0 += batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			idx := make([]int, 0, batch)
			var tasks []map[string]any
			for i := b0; i < min(b0+batch, len(all)); i++ {
				data := make([]byte, all[i])
				fill(data, seed+uint64(i))
				path := filepath.Join(dir, "blob-"+strconv.Itoa(i))
				if err := os.WriteFile(path, data, 0o644); err != nil {
					fail("%v", err)
				}
				idx = append(idx, i)
				tasks = append(tasks, map[string]any{"op": "id", "shards": shards, "file": path})
			}
			in, _ := json.Marshal(tasks)
			cmd := exec.Command("node", filepath.Base(runner))
			cmd.Dir = sdk
			cmd.Stdin = bytes.NewReader(in)
			cmd.Stderr = os.Stderr
			t0 := time.Now()
			out, err := cmd.Output()
			if err != nil {
				fail("node: %v", err)
			}
			wasm := time.Since(t0)
			var res []result
			if err := json.Unmarshal(out, &res); err != nil || len(res) != len(tasks) {
				fail("node: bad output (%v)", err)
			}
			var wasmBytes int64
			for _, i := range idx {
				wasmBytes += all[i]
			}
			for k, i := range idx {
				path := filepath.Join(dir, "blob-"+strconv.Itoa(i))
				f, err := os.Open(path)
				if err != nil {
					fail("%v", err)
				}
				goMu.Lock() // one id at a time: its CPU time is this process's
				c0 := cpu()
				m, err := redstuff.Compute(context.Background(), f, all[i], shards)
				d := cpu() - c0
				goMu.Unlock()
				f.Close()
				os.Remove(path)
				if err != nil {
					fail("%d bytes: %v", all[i], err)
				}
				ok := res[k].Error == "" && res[k].ID == m.ID.String()
				if !ok {
					fmt.Printf("DIFFER %d bytes: Go %s, walrus-core %s %s\n", all[i], m.ID, res[k].ID, res[k].Error)
				}
				mu.Lock()
				// The batch's WASM time, shared by size (a fixed part per
				// blob dominates small ones; this is for a rough figure).
				outcomes[i] = outcome{size: all[i], ok: ok, goTime: d, wasmTime: time.Duration(float64(wasm) / float64(len(idx)))}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var agreeN, big, at64 int
	var goT, wasmT time.Duration
	for _, o := range outcomes {
		if o.ok {
			agreeN++
		}
		if o.size > 1<<20 {
			big++
		}
		if o.size == max {
			at64++
		}
		goT += o.goTime
		wasmT += o.wasmTime
	}
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	fmt.Printf("blob ids at %d shards: %d of %d agree with walrus-core (WASM) — sizes %d B to %d B, median %d B, %d over 1 MiB, %d at %d B; seed %d; %s\n",
		shards, agreeN, len(all), sorted[0], sorted[len(sorted)-1], sorted[len(sorted)/2], big, at64, max, seed, time.Since(start).Round(time.Second))
	fmt.Printf("  time: Go %s of CPU in all (%.0f ms a blob), walrus-core WASM about %s of wall clock (%.0f ms a blob)\n",
		goT.Round(time.Second), float64(goT.Milliseconds())/float64(len(all)), wasmT.Round(time.Second), float64(wasmT.Milliseconds())/float64(len(all)))
	if agreeN != len(all) {
		os.Exit(1)
	}
}

// cpu is this process's CPU time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cost measures an id against the upload it protects.
func cost(dir string, shards int) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	fmt.Printf("cost of a blob id at %d shards (median of 3; CPU = user+system time of the id alone; upload = the bytes PUT over loopback to a discarding server):\n", shards)
	for _, size := range []int64{17, 1 << 20, 10 << 20, 64 << 20} {
		data := make([]byte, size)
		fill(data, uint64(size))
		var walls, cpus, ups []time.Duration
		for range 3 {
			t0, c0 := time.Now(), cpu()
			if _, err := redstuff.Sum(data, shards); err != nil {
				fail("%v", err)
			}
			walls, cpus = append(walls, time.Since(t0)), append(cpus, cpu()-c0)
			t0 = time.Now()
			resp, err := http.Post(sink.URL, "application/octet-stream", bytes.NewReader(data))
			if err != nil {
				fail("upload: %v", err)
			}
			resp.Body.Close()
			ups = append(ups, time.Since(t0))
		}
		wall, c, up := median(walls), median(cpus), median(ups)
		mib := float64(size) / (1 << 20)
		fmt.Printf("  %9d B: id %7.0f ms wall, %7.0f ms CPU (%6.1f MiB/s wall, %6.1f MiB/s per core)   upload %6.0f ms (%7.1f MiB/s)   id/upload %.1f\n",
			size, ms(wall), ms(c), mib/wall.Seconds(), mib/c.Seconds(), ms(up), mib/up.Seconds(), wall.Seconds()/up.Seconds())
	}
	// Peak RSS of a process computing the id of a 64 MiB file.
	path := filepath.Join(dir, "one")
	data := make([]byte, 64<<20)
	fill(data, 64)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fail("%v", err)
	}
	data = nil
	self, _ := os.Executable()
	cmd := exec.Command(self, "-dir", dir, "-one", strconv.Itoa(64<<20), "-shards", strconv.Itoa(shards))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fail("child: %v", err)
	}
	os.Remove(path)
	var id, took string
	var hwm int64
	fmt.Sscan(string(out), &id, &took, &hwm)
	fmt.Printf("  a process computing the id of a 64 MiB file (read from it): %s in %s, peak RSS %d MiB (%.2f× the blob; klauspost/reedsolomon's GF(2^16) tables take 74 MiB of it, once per process)\n",
		id, took, hwm>>10, float64(hwm<<10)/float64(64<<20))
}

func childOne(dir string, size int64, shards int) {
	f, err := os.Open(filepath.Join(dir, "one"))
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	t0 := time.Now()
	m, err := redstuff.Compute(context.Background(), f, size, shards)
	if err != nil {
		fail("%v", err)
	}
	// VmHWM, the peak RSS of this image (a child's rusage also counts
	// its parent's pages from before the exec).
	status, _ := os.ReadFile("/proc/self/status")
	var hwm int64
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			hwm, _ = strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
		}
	}
	fmt.Printf("%s %s %d", m.ID, time.Since(t0).Round(time.Millisecond), hwm)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
