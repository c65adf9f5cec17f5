package walrus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hermesd/hermesd/internal/redstuff"
)

// A whole blob read is checked against its id before the caller sees a
// byte: the bytes are spooled (memory up to spoolMem, then a temporary
// file), encoded as Walrus encodes them (redstuff, over Config.Shards) and
// their blob id compared with the one asked for. Bytes of another blob
// make the read try the next aggregator; when none serves the blob, the
// read fails with ErrBlobID. A lying aggregator can deny service, never
// substitute bytes.

// spoolMem is how much of a whole-blob read is held in memory while its
// id is checked; a larger blob spills to a temporary file.
const spoolMem = 16 << 20

// sink receives a whole blob read and gives it back for its id check.
type sink interface {
	io.Writer
	io.ReaderAt
	reset() error
}

// spool is a sink in memory, spilling to a temporary file in dir (""
// the system's temporary directory): the destination's directory when
// the read was given WithFreeSpace, so that the bytes land where their
// room was checked. The file's filesystem is checked for room as it
// grows, every spaceGuardEvery bytes, so a body of unknown length stops
// at the margin rather than at ENOSPC or never.
type spool struct {
	dir   string
	mem   []byte
	f     *os.File
	n     int64
	since int64 // bytes written to f since its room was last checked
}

// newSpool is the spool of a read with opts.
func newSpool(opts []ReadOption) *spool {
	var ro readOptions
	for _, o := range opts {
		o(&ro)
	}
	return &spool{dir: ro.spaceDir}
}

func (s *spool) tempDir() string {
	if s.dir != "" {
		return s.dir
	}
	return os.TempDir()
}

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && len(s.mem)+len(p) <= spoolMem {
		s.mem = append(s.mem, p...)
		s.n += int64(len(p))
		return len(p), nil
	}
	if s.f == nil {
		if err := CheckFreeSpace(s.tempDir(), int64(len(s.mem)+len(p))); err != nil {
			return 0, err
		}
		f, err := os.CreateTemp(s.tempDir(), ".hermesd-walrus-read-*")
		if err != nil {
			return 0, err
		}
		os.Remove(f.Name()) // unlinked: gone with the process
		s.f = f
		if _, err := f.Write(s.mem); err != nil {
			return 0, err
		}
		s.mem = nil
	}
	if s.since += int64(len(p)); s.since >= spaceGuardEvery {
		s.since = 0
		if err := CheckFreeSpace(s.tempDir(), spaceGuardEvery); err != nil {
			return 0, err
		}
	}
	n, err := s.f.Write(p)
	s.n += int64(n)
	return n, err
}

func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	if s.f != nil {
		return s.f.ReadAt(p, off)
	}
	return bytes.NewReader(s.mem).ReadAt(p, off)
}

func (s *spool) reset() error {
	s.mem, s.n = s.mem[:0], 0
	if s.f != nil {
		if err := s.f.Truncate(0); err != nil {
			return err
		}
		_, err := s.f.Seek(0, io.SeekStart)
		return err
	}
	return nil
}

func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
	}
}

// writeTo copies the spooled blob to dst.
func (s *spool) writeTo(dst io.Writer) error {
	_, err := io.Copy(dst, io.NewSectionReader(s, 0, s.n))
	return err
}

// fileSink is a sink over a file (ReadToFile's).
type fileSink struct{ *os.File }

func (f fileSink) reset() error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// readChecked reads the whole blob t into s and checks its id, trying
// every aggregator in turn (starting with the first) until one serves the
// blob. A read that fails otherwise fails as a read does.
func (c *Client) readChecked(ctx context.Context, t target, s sink, opts []ReadOption) (ReadResult, error) {
	want, err := redstuff.ParseID(t.id)
	if err != nil {
		return ReadResult{}, fmt.Errorf("%w: %v", ErrInvalidBlobID, err)
	}
	var lies []string
	for i := range c.aggregators {
		if i > 0 {
			if err := s.reset(); err != nil {
				return ReadResult{}, &writeError{err}
			}
		}
		res, err := c.read(ctx, t, s, nil, append(opts[:len(opts):len(opts)], startAt(i)))
		if err != nil {
			return res, err
		}
		got, err := c.blobID(ctx, s, res.Size)
		if err == nil && got == want {
			return res, nil
		}
		what := "bytes of blob " + got.String()
		if err != nil {
			what = err.Error()
		}
		c.log.Warn("walrus: an aggregator served other bytes than the blob id names", "blob_id", t.id,
			"aggregator", res.Aggregator, "size", res.Size, "got", what)
		lies = append(lies, fmt.Sprintf("%s served %d %s", res.Aggregator, res.Size, what))
	}
	return ReadResult{}, fmt.Errorf("%w: blob %s (ids over %d shards): %s", ErrBlobID, t.id, c.cfg.Shards, strings.Join(lies, "; "))
}

// blobID is the Walrus blob id of the size bytes r holds.
func (c *Client) blobID(ctx context.Context, r io.ReaderAt, size int64) (redstuff.ID, error) {
	m, err := redstuff.ComputeWith(ctx, r, size, c.cfg.Shards, redstuff.Options{ScratchDir: c.cfg.ScratchDir})
	switch {
	case errors.Is(err, redstuff.ErrTooLarge):
		return redstuff.ID{}, fmt.Errorf("bytes, more than any blob over %d shards", c.cfg.Shards)
	case err != nil:
		return redstuff.ID{}, err
	}
	return m.ID, nil
}

// startAt makes a read start at aggregator i (and rotate from there).
func startAt(i int) ReadOption { return func(o *readOptions) { o.start = i } }
