//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sample is one measured run of a command, one JSON line in the results file.
type sample struct {
	Key     string             `json:"key"`
	Wall    float64            `json:"wall"` // seconds
	User    float64            `json:"user"` // seconds, the command and its waited-for children
	Sys     float64            `json:"sys"`
	MaxRSS  float64            `json:"maxrssKiB"`  // largest single process (ru_maxrss, via /usr/bin/time %M)
	MaxAnon float64            `json:"maxanonKiB"` // largest RssAnon of one process, sampled every 10 ms
	Other   float64            `json:"otherCores"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Note    string             `json:"note,omitempty"`
}

func runMeasure(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	results := fs.String("results", "", "JSON-lines file to append samples to")
	key := fs.String("key", "", "name of the figure")
	n := fs.Int("n", 5, "samples")
	noise := fs.Float64("noise", 0, "re-run a sample once when other processes used more than this many cores meanwhile, keeping the quieter run (0 = never; only for commands that can run twice)")
	note := fs.String("note", "", "free text stored with the samples")
	settle := fs.Bool("settle", false, "before each sample (untimed), write back every dirty page (sync) and wait until writeback is done, so no sample pays for an earlier one's writes")
	warm := fs.Int64("warm-mem", 0, "before each sample (untimed, after -settle), touch this many `bytes` of memory and free them, so the sample's new pages come from pages the host just backed: on a VM with free page reporting (virtio-balloon) a page the guest freed seconds ago costs a host fault to use again, which made one 1 GiB restore 1 s and the next 4 s of system time")
	server := fs.Int("server", 0, "`pid` of the local Walrus server the command talks to: its CPU seconds during each sample are recorded (server_cpu_s) and not counted as other load (it stands in for the network's machines)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmd := fs.Args()
	if *results == "" || *key == "" || len(cmd) == 0 {
		return errors.New("usage: measure -results FILE -key KEY [-n N] -- COMMAND [ARGS...]")
	}
	out, err := os.OpenFile(*results, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	for i := 1; i <= *n; i++ {
		if *settle {
			settleWriteback(ctx)
		}
		if err := warmMemory(*warm); err != nil {
			return err
		}
		s, err := measureServed(ctx, cmd, *server)
		if err != nil {
			return fmt.Errorf("%s: %w", *key, err)
		}
		if *noise > 0 && s.Other > *noise {
			fmt.Fprintf(os.Stderr, "  %s #%d: %.2f other cores busy, re-running\n", *key, i, s.Other)
			if *settle {
				settleWriteback(ctx)
			}
			if err := warmMemory(*warm); err != nil {
				return err
			}
			s2, err := measureServed(ctx, cmd, *server)
			if err != nil {
				return fmt.Errorf("%s: %w", *key, err)
			}
			if s2.Other < s.Other {
				s = s2
			}
		}
		s.Key, s.Note = *key, *note
		fmt.Fprintf(os.Stderr, "  %-22s #%d  wall %8.3fs  cpu %5.2f cores  rss %6.1f MiB (anon %5.1f)  other %.2f%s\n",
			*key, i, s.Wall, (s.User+s.Sys)/s.Wall, s.MaxRSS/1024, s.MaxAnon/1024, s.Other, fmtMetrics(s.Metrics))
		b, _ := json.Marshal(s)
		if _, err := out.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func fmtMetrics(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, " %s=%.4g", k, m[k])
	}
	return b.String()
}

// settleWriteback syncs and then waits (up to 30 s) until the kernel
// reports less than 16 MiB dirty or under writeback.
func settleWriteback(ctx context.Context) {
	syscall.Sync()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		b, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			return
		}
		var kib int64
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[0] == "Dirty:" || f[0] == "Writeback:") {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				kib += v
			}
		}
		if kib < 16<<10 {
			return
		}
		time.Sleep(100 * time.Millisecond) // others' writes: let writeback catch up
		syscall.Sync()
	}
}

// warmMemory maps n bytes, writes one byte a page and unmaps them: the
// pages go back to the kernel's free lists, backed by the host, where the
// next sample's allocations find them first.
func warmMemory(n int64) error {
	if n <= 0 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("warm-mem: %w", err)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return syscall.Munmap(b)
}

// measureServed is measureOnce, with the CPU time the process server
// (0: none) used meanwhile recorded and taken out of the other load.
func measureServed(ctx context.Context, argv []string, server int) (sample, error) {
	if server <= 0 {
		return measureOnce(ctx, argv)
	}
	c0, err := procCPU(server)
	if err != nil {
		return sample{}, fmt.Errorf("server process: %w", err)
	}
	s, err := measureOnce(ctx, argv)
	if err != nil {
		return s, err
	}
	c1, err := procCPU(server)
	if err != nil {
		return sample{}, fmt.Errorf("server process: %w", err)
	}
	if s.Metrics == nil {
		s.Metrics = map[string]float64{}
	}
	s.Metrics["server_cpu_s"] = c1 - c0
	if s.Wall > 0 {
		s.Other = max(0, s.Other-(c1-c0)/s.Wall)
	}
	return s, nil
}

// procCPU is the user+system CPU seconds of process pid so far.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces), from its ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	return (ut + st) / 100, nil // USER_HZ
}

// measureOnce runs argv under /usr/bin/time, whose %M is the peak RSS of
// the largest process in the tree. (This process cannot take ru_maxrss
// from its own wait4: a child started from a Go program inherits the
// parent's RSS high-water mark at exec, ~45 MiB here.)
func measureOnce(ctx context.Context, argv []string) (sample, error) {
	tf, err := os.CreateTemp("", "benchtool-time-*")
	if err != nil {
		return sample{}, err
	}
	tf.Close()
	defer os.Remove(tf.Name())
	c := exec.CommandContext(ctx, "/usr/bin/time", append([]string{"-f", "%M", "-o", tf.Name(), "--"}, argv...)...)
	c.Stderr = os.Stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		return sample{}, err
	}
	busy0, _ := cpuBusy()
	start := time.Now()
	if err := c.Start(); err != nil {
		return sample{}, err
	}
	stopSampling := make(chan struct{})
	anonDone := make(chan float64, 1)
	go func() { anonDone <- sampleAnon(c.Process.Pid, stopSampling) }()
	metrics := map[string]float64{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var parseErr error
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "BENCH "); ok {
			var m map[string]float64
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				parseErr = fmt.Errorf("bad BENCH line %q: %w", rest, err)
				continue
			}
			for k, v := range m {
				metrics[k] = v
			}
			continue
		}
		fmt.Fprintln(os.Stderr, "    | "+line)
	}
	close(stopSampling)
	werr := c.Wait()
	wall := time.Since(start).Seconds()
	busy1, _ := cpuBusy()
	anon := <-anonDone
	if werr != nil {
		return sample{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), werr)
	}
	if parseErr != nil {
		return sample{}, parseErr
	}
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return sample{}, errors.New("no rusage")
	}
	tb, err := os.ReadFile(tf.Name())
	if err != nil {
		return sample{}, err
	}
	fields := strings.Fields(string(tb))
	if len(fields) == 0 {
		return sample{}, fmt.Errorf("no output from /usr/bin/time")
	}
	rss, err := strconv.ParseFloat(fields[len(fields)-1], 64)
	if err != nil {
		return sample{}, fmt.Errorf("/usr/bin/time output %q: %w", tb, err)
	}
	s := sample{
		Wall:    wall,
		User:    tv(ru.Utime),
		Sys:     tv(ru.Stime),
		MaxRSS:  rss,
		MaxAnon: anon,
		Metrics: metrics,
	}
	if busy1 > busy0 && wall > 0 {
		s.Other = max(0, (busy1-busy0)-(s.User+s.Sys)) / wall
	}
	return s, nil
}

// sampleAnon polls the RssAnon of pid and its descendants every 10 ms until
// stop is closed and returns the largest value of one process, in KiB. It
// separates a process's own memory from the file-backed pages of its
// binary, which ru_maxrss counts too.
func sampleAnon(pid int, stop <-chan struct{}) float64 {
	var peak float64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range descendants(pid) {
			peak = max(peak, statusKiB(p, "RssAnon:"))
		}
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}

func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", out[i], out[i]))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func statusKiB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return v
		}
	}
	return 0
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// cpuBusy returns the machine's total non-idle CPU seconds from /proc/stat.
func cpuBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("unexpected /proc/stat")
	}
	var busy float64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, err
		}
		busy += x
	}
	return busy / 100, nil // USER_HZ is 100 on Linux
}
