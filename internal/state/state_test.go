package state

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLockExcludesSecondOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(p)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error does not name the holder: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(p)
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	d2.Close()
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode = %v, %v", st.Mode(), err)
	}
}

func TestAgentStateRoundTrip(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir, err := d.AgentDir("auditor")
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadAgent(dir)
	if err != nil || s.Last != nil || s.Pending != nil {
		t.Fatalf("fresh state = %+v, %v", s, err)
	}
	now := time.Unix(1700000000, 0).UTC()
	s.Last = &Snapshot{BlobID: "b", BundleHash: "0x1", Size: 3, EndEpoch: 9, CreatedAt: now}
	s.Pending = &Pointer{Value: "b", Expected: "a", Since: now}
	if err := SaveAgent(dir, s); err != nil {
		t.Fatal(err)
	}
	back, err := LoadAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *back.Last != *s.Last || *back.Pending != *s.Pending {
		t.Fatalf("round trip: %+v", back)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAgent(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt state accepted: %v", err)
	}
}
