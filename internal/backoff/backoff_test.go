package backoff

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestWaitIsCappedExponential(t *testing.T) {
	b := &Backoff{Min: time.Second, Max: 10 * time.Second, Jitter: func(d time.Duration) time.Duration { return d }}
	for n, want := range map[int]time.Duration{0: 0, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		4: 8 * time.Second, 5: 10 * time.Second, 60: 10 * time.Second, 1 << 20: 10 * time.Second} {
		if got := b.Wait(n); got != want {
			t.Errorf("Wait(%d) = %v, want %v", n, got, want)
		}
	}
	// The random part is the upper half.
	lo := &Backoff{Min: time.Second, Max: time.Minute, Jitter: func(time.Duration) time.Duration { return 0 }}
	if got := lo.Wait(3); got != 2*time.Second {
		t.Errorf("Wait(3) without jitter = %v", got)
	}
	var z Backoff
	if w := z.Wait(100); w < DefaultMax/2 || w > DefaultMax {
		t.Errorf("zero value Wait(100) = %v", w)
	}
}

func TestLogsAreRateLimitedAndRecoveryIsSaidOnce(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	b := &Backoff{
		Min: time.Second, Max: time.Minute, LogEvery: 30 * time.Second,
		Log: slog.New(slog.NewTextHandler(&buf, nil)),
		Now: func() time.Time { return now },
	}
	boom := errors.New("boom")
	for i := 0; i < 5; i++ { // 5 failures within 20 s: one line
		b.Failed("sync failed", boom, "agent", "a")
		now = now.Add(5 * time.Second)
	}
	if n := strings.Count(buf.String(), "sync failed"); n != 1 {
		t.Fatalf("%d error lines in 20 s:\n%s", n, buf.String())
	}
	now = now.Add(30 * time.Second)
	b.Failed("sync failed", boom)
	if n := strings.Count(buf.String(), "sync failed"); n != 2 || !strings.Contains(buf.String(), "consecutive_errors=6") {
		t.Fatalf("after the period:\n%s", buf.String())
	}
	if got := b.Succeeded("sync recovered"); got != 6 || !strings.Contains(buf.String(), "previous_errors=6") {
		t.Fatalf("recovery %d:\n%s", got, buf.String())
	}
	buf.Reset()
	if got := b.Succeeded("sync recovered"); got != 0 || buf.Len() != 0 {
		t.Fatalf("a second success logged %q", buf.String())
	}
	// After recovery the next failure is logged at once again.
	b.Failed("sync failed", boom)
	if !strings.Contains(buf.String(), "consecutive_errors=1") {
		t.Fatalf("first failure after recovery not logged: %q", buf.String())
	}
}
