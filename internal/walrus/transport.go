package walrus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// newTransport returns the default transport: the standard one with more
// idle connections per host, since a daemon talks to few hosts.
func newTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// watchdogTransport bounds each attempt without bounding a transfer that
// makes progress: while body bytes move (either way) a stall longer than
// idle aborts the attempt; between the end of the request and the response
// headers the server gets up to wait (a publisher works in that window).
// http.Client.Timeout cannot do this: it caps the whole exchange, which
// would cut off large downloads.
type watchdogTransport struct {
	base http.RoundTripper
	wait time.Duration
	idle time.Duration
}

func (t *watchdogTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	wd := newWatchdog(cancel)
	r := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		wd.arm(t.idle)
		wrap := func(rc io.ReadCloser) io.ReadCloser {
			b := &watchedBody{rc: rc, wd: wd, ctx: ctx, onEOF: func() { wd.arm(t.wait) }}
			if f, ok := rc.(syscall.Conn); ok && canCountFile {
				return &watchedFile{b, f}
			}
			return b
		}
		r.Body = wrap(req.Body)
		if req.GetBody != nil {
			// The transport may replay the body on a fresh connection; the
			// replay must feed the watchdog too.
			r.GetBody = func() (io.ReadCloser, error) {
				b, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				return wrap(b), nil
			}
		}
	} else {
		wd.arm(t.wait)
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		wd.stop()
		if context.Cause(ctx) == ErrAttemptTimeout && req.Context().Err() == nil {
			// Which limit fired: the request body stalled (it is sent
			// with sendfile or read by the transport, so no Read of ours
			// reports it), or the server did not answer once it was sent.
			if lim := wd.current(); lim == t.wait {
				err = fmt.Errorf("%w: no answer within %s: %v", ErrAttemptTimeout, lim, err)
			} else {
				err = fmt.Errorf("%w: the upload stalled for %s: %v", ErrAttemptTimeout, lim, err)
			}
		}
		cancel(nil)
		return nil, err
	}
	wd.arm(t.idle)
	resp.Body = &watchedBody{rc: resp.Body, wd: wd, ctx: ctx, onClose: func() {
		wd.stop()
		cancel(nil)
	}}
	return resp, nil
}

// watchdog cancels an attempt when no progress was reported for the armed
// limit. Progress is an atomic store, so the hot read path takes no lock.
type watchdog struct {
	base   time.Time // monotonic reference for last
	last   atomic.Int64
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	timer   *time.Timer
	limit   time.Duration
	stopped bool
	// probe, while set, tells fire whether a transfer that reports no
	// progress itself (sendfile) moved since the last probe.
	probe func() bool
}

// current returns the limit armed last.
func (w *watchdog) current() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limit
}

// setProbe sets (or with nil clears) the watchdog's probe.
func (w *watchdog) setProbe(p func() bool) {
	w.mu.Lock()
	w.probe = p
	w.mu.Unlock()
}

func newWatchdog(cancel context.CancelCauseFunc) *watchdog {
	return &watchdog{base: time.Now(), cancel: cancel}
}

func (w *watchdog) progress() { w.last.Store(int64(time.Since(w.base))) }

func (w *watchdog) arm(limit time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.limit = limit
	w.progress()
	if limit <= 0 {
		if w.timer != nil {
			w.timer.Stop()
		}
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(limit, w.fire)
	} else {
		w.timer.Reset(limit)
	}
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.limit <= 0 {
		return
	}
	idle := time.Since(w.base) - time.Duration(w.last.Load())
	if idle >= w.limit && w.probe != nil && w.probe() {
		w.progress()
		idle = 0
	}
	if idle < w.limit {
		w.timer.Reset(w.limit - idle)
		return
	}
	w.stopped = true
	w.cancel(ErrAttemptTimeout)
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// watchedBody reports progress on every read and turns the watchdog's
// cancellation into ErrAttemptTimeout (not context.Canceled, which callers
// would take for an interrupt).
type watchedBody struct {
	rc      io.ReadCloser
	wd      *watchdog
	ctx     context.Context
	onEOF   func()
	onClose func()
	once    sync.Once
	eofSeen bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.wd.progress()
	}
	if err == io.EOF && !b.eofSeen {
		b.eofSeen = true
		if b.onEOF != nil {
			b.onEOF()
		}
	}
	if err != nil && err != io.EOF && context.Cause(b.ctx) == ErrAttemptTimeout {
		err = fmt.Errorf("%w: stalled for %s: %v", ErrAttemptTimeout, b.wd.limit, err)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() {
		if b.onClose != nil {
			b.onClose()
		}
	})
	return err
}

// watchedFile is a watched body that is a file: it stays a syscall.Conn,
// so that the transport can send it with sendfile(2). No Read reports
// that transfer's progress: while it runs, the watchdog probes the file's
// offset, which each sendfile call advances, before it gives up.
type watchedFile struct {
	*watchedBody
	f syscall.Conn
}

func (b *watchedFile) SyscallConn() (syscall.RawConn, error) {
	return aroundFile(b.f, func(fd uintptr, send func() bool) bool {
		last, _ := fileOffset(fd)
		b.wd.setProbe(func() bool {
			off, err := fileOffset(fd)
			moved := err == nil && off != last
			last = off
			return moved
		})
		defer b.wd.setProbe(nil)
		return send()
	})
}

// isDialError reports whether err means the endpoint could not be reached
// at all (connection refused, no route, DNS), so failing over to the next
// endpoint at once is safe: nothing was sent.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
