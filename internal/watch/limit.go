package watch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// limitKind says which resource kept a directory from being watched.
type limitKind int

const (
	limitWatches   limitKind = iota // ENOSPC: fs.inotify.max_user_watches
	limitBudget                     // HubOptions.MaxWatches
	limitInstances                  // no inotify instance: max_user_instances, open files
	numLimits
)

// limitError means a directory could not be watched for lack of a kernel
// or configured resource. The directory is polled instead; the error is not
// the caller's.
type limitError struct {
	kind limitKind
	err  error
}

func (e *limitError) Error() string { return e.err.Error() }
func (e *limitError) Unwrap() error { return e.err }

func isLimit(err error) bool {
	var le *limitError
	return errors.As(err, &le)
}

// The sysctls behind the limits, under /proc/sys/.
const (
	sysctlWatches   = "fs/inotify/max_user_watches"
	sysctlInstances = "fs/inotify/max_user_instances"
	sysctlQueue     = "fs/inotify/max_queued_events"
)

// readSysctl reads a numeric sysctl, -1 when it cannot be read (not Linux,
// no /proc).
func readSysctl(name string) int64 {
	f, err := os.Open("/proc/sys/" + name)
	if err != nil {
		return -1
	}
	defer f.Close()
	buf := make([]byte, 32) // a sysctl integer is at most 20 digits
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return -1
	}
	v, ok := parseSysctl(buf[:n])
	if !ok {
		return -1
	}
	return v
}

// parseSysctl parses the contents of a numeric /proc/sys file: decimal
// digits and a trailing newline.
func parseSysctl(b []byte) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "" || len(s) > 19 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// suggest is the value the limit message proposes: double, with a floor
// at what busy desktops and IDEs commonly set.
func suggest(cur, floor int64) int64 {
	if cur <= 0 {
		return floor
	}
	return max(2*cur, floor)
}

// noteLimit logs, once per kind for the life of the hub, why directories
// are polled rather than watched and how to fix it.
func (h *Hub) noteLimit(err error) {
	var le *limitError
	if !errors.As(err, &le) || !h.limitLogged[le.kind].CompareAndSwap(false, true) {
		return
	}
	every := "every " + h.opts.PollInterval.String()
	switch le.kind {
	case limitWatches:
		cur := readSysctl(sysctlWatches)
		h.log.Warn("inotify watch limit reached; directories that cannot be watched are rescanned "+every+" instead",
			"sysctl", "fs.inotify.max_user_watches", "value", sysctlValue(cur),
			"watches_held", h.Stats().Watches,
			"fix", fmt.Sprintf("sudo sysctl -w fs.inotify.max_user_watches=%d (persist it in /etc/sysctl.d/)", suggest(cur, 524288)),
			"error", le.err)
	case limitBudget:
		h.log.Warn("watch budget of this process used up; directories beyond it are rescanned "+every+" instead",
			"max_watches", h.opts.MaxWatches, "fix", "raise the watch budget")
	case limitInstances:
		args := []any{"error", le.err}
		if errors.Is(le.err, syscall.EMFILE) {
			cur := readSysctl(sysctlInstances)
			args = append(args, "sysctl", "fs.inotify.max_user_instances", "value", sysctlValue(cur),
				"fix", fmt.Sprintf("sudo sysctl -w fs.inotify.max_user_instances=%d (persist it in /etc/sysctl.d/)", suggest(cur, 512)))
			if n, ok := openFileLimit(); ok {
				args = append(args, "open_files_limit", n) // EMFILE also means this one is reached
			}
		} else if errors.Is(le.err, syscall.ENFILE) {
			args = append(args, "sysctl", "fs.file-max", "value", sysctlValue(readSysctl("fs/file-max")))
		}
		h.log.Warn("cannot create an inotify instance; every brain directory is rescanned "+every+" instead of watched", args...)
	}
}

func sysctlValue(v int64) any {
	if v < 0 {
		return "unknown"
	}
	return v
}
