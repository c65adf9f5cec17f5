//go:build linux

package watch

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// makeRoots creates n small brains: a file at the top and one in a
// subdirectory, so each needs two watches.
func makeRoots(b testing.TB, n int) []string {
	base := b.TempDir()
	roots := make([]string, n)
	for i := range roots {
		roots[i] = filepath.Join(base, fmt.Sprintf("brain%04d", i))
		for _, p := range []string{"system.md", "skills/a.md"} {
			f := filepath.Join(roots[i], p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(p), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return roots
}

// BenchmarkWatch1000 is the start-up of 1,000 subscriptions on one hub
// (ns/op covers all 1,000).
func BenchmarkWatch1000(b *testing.B) {
	roots := makeRoots(b, 1000)
	b.ResetTimer()
	for range b.N {
		h, err := NewHub(HubOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range roots {
			if _, err := h.Watch(r, Options{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := h.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkLookup1000 is the routing of one event among 1,000 roots.
func BenchmarkLookup1000(b *testing.B) {
	roots := makeRoots(b, 1000)
	h, err := NewHub(HubOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	canon := make([]string, len(roots))
	for i, r := range roots {
		w, err := h.Watch(r, Options{})
		if err != nil {
			b.Fatal(err)
		}
		canon[i] = w.root
	}
	for _, tc := range []struct{ name, path string }{
		{"hit", filepath.Join(canon[537], "skills", "a.md")},
		{"miss", filepath.Join(filepath.Dir(canon[537]), "elsewhere", "x", "y.md")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				h.routeMu.RLock()
				h.lookup(tc.path, func(*Watcher) { n++ })
				h.routeMu.RUnlock()
			}
			if tc.name == "hit" && n == 0 {
				b.Fatal("no root matched")
			}
		})
	}
}

// BenchmarkIdle measures what idle subscriptions cost: each op is one
// second of idling, reported as CPU time per second. Run with
// -benchtime=60x for a minute. RSS and goroutines are measured once the
// subscriptions are set up, as deltas from before.
//
//	hub-1000:    1,000 roots on one shared hub
//	polled-1000: the same with no inotify instance: every root polled
//	             every 30 s (jittered)
//	private-50:  50 roots with a private hub each (watch.New, as before)
func BenchmarkIdle(b *testing.B) {
	for _, tc := range []struct {
		name    string
		n       int
		private bool
		polled  bool
	}{
		{"hub-1000", 1000, false, false},
		{"polled-1000", 1000, false, true},
		{"private-50", 50, true, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			roots := makeRoots(b, tc.n)
			logs := &sink{}
			log := slog.New(logs)
			rss0, g0 := settle()
			var closers []func() error
			start := time.Now()
			if tc.private {
				for _, r := range roots {
					w, err := New(r, Options{Logger: log})
					if err != nil {
						b.Fatal(err)
					}
					closers = append(closers, w.Close)
				}
			} else {
				o := HubOptions{Logger: log}
				if tc.polled {
					o.newFS = func() (*fsnotify.Watcher, error) { return nil, syscall.EMFILE }
				}
				h, err := NewHub(o)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range roots {
					if _, err := h.Watch(r, Options{Logger: log}); err != nil {
						b.Fatal(err)
					}
				}
				closers = append(closers, h.Close)
			}
			setup := time.Since(start)
			rss1, g1 := settle()

			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				time.Sleep(time.Second) // the measurement itself: idle time
			}
			b.StopTimer()
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(setup.Microseconds())/1e3, "setup-ms")
			b.ReportMetric(float64(rss1-rss0)/(1<<20), "rss-MiB")
			b.ReportMetric(float64(g1-g0), "goroutines")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1e3, "cpu-ms/s")
			b.ReportMetric(float64(len(logs.lines(slog.LevelInfo, ""))), "log-lines")
			b.ReportMetric(float64(len(logs.lines(slog.LevelDebug, ""))), "debug-lines")
			for _, c := range closers {
				if err := c(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// settle collects garbage and returns the resident set size and the
// goroutine count.
func settle() (rss int64, goroutines int) {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				rss = kb << 10
			}
		}
	}
	return rss, runtime.NumGoroutine()
}

// cpuTime is the process's user plus system time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Skip(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
