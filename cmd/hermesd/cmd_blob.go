package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/hermesd/hermesd/internal/atomicfile"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/diskspace"
	"github.com/hermesd/hermesd/internal/walrus"
)

const blobHelp = `Subcommands:
  put FILE       store FILE as one blob on the configured publishers
  get ID -o FILE read blob ID from the configured aggregators into FILE

Endpoints come from the configuration's walrus section (-config), or from
--publisher and --aggregator flags (repeatable), which need no config file.
Run 'hermesd blob put -h' or 'hermesd blob get -h' for their flags.`

func runBlob(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "blob", tail: "[flags]", help: blobHelp, verbs: []command{
		{name: "put", run: runBlobPut},
		{name: "get", run: runBlobGet},
	}}.run(ctx, env, args)
}

// endpointFlags are the flags that say where Walrus is.
type endpointFlags struct {
	config      string
	publishers  urlListFlag
	aggregators urlListFlag
}

func (e *endpointFlags) register(fs *flag.FlagSet, publishers bool) {
	fs.StringVar(&e.config, "config", "", "configuration `FILE` (default $HERMESD_CONFIG, else "+config.DefaultPath+")")
	if publishers {
		fs.Var(&e.publishers, "publisher", "publisher base `URL` (repeatable; replaces the configured ones)")
	}
	fs.Var(&e.aggregators, "aggregator", "aggregator base `URL` (repeatable; replaces the configured ones)")
}

// clientConfig builds the client configuration the way every other
// command does (compose.WalrusConfig, so walrus.max_download_size and the
// retry settings apply): from the config file's walrus section, or from
// the defaults when endpoints are given as flags without -config; then the
// flags' endpoints on top. Publisher credentials are read only for stores.
func (e *endpointFlags) clientConfig(store bool) (walrus.Config, error) {
	c := config.Default()
	if e.config != "" || len(e.publishers)+len(e.aggregators) == 0 {
		var err error
		if c, err = config.Load(config.ResolvePath(e.config)); err != nil {
			return walrus.Config{}, withCode(exitUsage, err)
		}
	}
	wc, err := compose.WalrusConfig(c, store, nil)
	if err != nil {
		return wc, withCode(exitUsage, err)
	}
	if len(e.publishers) > 0 {
		wc.Publishers = e.publishers
	}
	if len(e.aggregators) > 0 {
		wc.Aggregators = e.aggregators
	}
	switch {
	case store && len(wc.Publishers) == 0:
		return wc, usageErrorf("no publisher configured: set walrus.publishers or pass --publisher URL")
	case !store && len(wc.Aggregators) == 0:
		return wc, usageErrorf("no aggregator configured: set walrus.aggregators or pass --aggregator URL")
	}
	return wc, nil
}

const blobPutHelp = `Store FILE as one blob and print its id. The file is streamed, never held in
memory, and checked against walrus.max_blob_size before anything is sent.
With --verify the blob is read back from an aggregator and compared.`

func runBlobPut(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "blob put", "blob put FILE [--epochs N] [--permanent] [--verify] [--json] [-config FILE | --publisher URL ...]", blobPutHelp)
	var ep endpointFlags
	ep.register(fs, true)
	epochs := fs.Int("epochs", 0, "store for `N` epochs ahead (default walrus.epochs)")
	permanent := fs.Bool("permanent", false, "store a permanent (non-deletable) blob (default walrus.permanent)")
	verify := fs.Bool("verify", false, "read the blob back from an aggregator and compare its SHA-256")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("blob put: want exactly one FILE, got %d arguments", len(pos))
	}
	path := pos[0]
	wc, err := ep.clientConfig(true)
	if err != nil {
		return err
	}
	if *verify && len(wc.Aggregators) == 0 {
		return usageErrorf("blob put --verify: no aggregator configured: set walrus.aggregators or pass --aggregator URL")
	}
	var opts []walrus.StoreOption
	flagSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { flagSet[f.Name] = true })
	if flagSet["epochs"] {
		opts = append(opts, walrus.WithEpochs(*epochs))
	}
	if flagSet["permanent"] {
		opts = append(opts, walrus.WithPermanent(*permanent))
	}

	body, err := walrus.FileBody(path)
	if err != nil {
		return fmt.Errorf("blob put: %w", err)
	}
	sum, err := blobFileSHA256(path)
	if err != nil {
		return fmt.Errorf("blob put: %w", err)
	}
	meter := startProgressMeter(env.stderr, "upload", body.Size())
	defer meter.stop()
	wc.Logger = slog.New(slog.NewTextHandler(meter.logWriter(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := walrus.New(wc)
	if err != nil {
		return withCode(exitUsage, err)
	}
	res, err := c.Store(ctx, meteredBody{body, meter}, opts...)
	if err != nil {
		return blobError("blob put", err)
	}
	var vr *walrus.ReadResult
	if *verify {
		meter.restart("verify")
		r, err := c.Verify(ctx, res.BlobID, sum, res.Size, walrus.WithNotFoundRetries(5))
		if err != nil {
			return blobError("blob put: verify", err)
		}
		vr = &r
	}
	meter.stop()

	if *asJSON {
		out := struct {
			BlobID           string `json:"blobId"`
			Size             int64  `json:"size"`
			EndEpoch         uint32 `json:"endEpoch"`
			AlreadyCertified bool   `json:"alreadyCertified"`
			SHA256           string `json:"sha256"`
			ObjectID         string `json:"objectId,omitempty"`
			Publisher        string `json:"publisher"`
			Attempts         int    `json:"attempts"`
			DurationMs       int64  `json:"durationMs"`
			Verified         bool   `json:"verified"`
		}{res.BlobID, res.Size, res.EndEpoch, res.AlreadyCertified, hex.EncodeToString(sum[:]), res.ObjectID,
			res.Publisher, res.Attempts, res.Duration.Milliseconds(), vr != nil}
		return json.NewEncoder(env.stdout).Encode(out)
	}
	status := "newly created"
	if res.AlreadyCertified {
		status = "already certified"
	}
	w := env.stdout
	fmt.Fprintf(w, "blob id:    %s\n", res.BlobID)
	fmt.Fprintf(w, "size:       %s (%d bytes)\n", walrus.FormatSize(res.Size), res.Size)
	fmt.Fprintf(w, "sha256:     %x\n", sum)
	fmt.Fprintf(w, "end epoch:  %d (expires when it begins)\n", res.EndEpoch)
	fmt.Fprintf(w, "status:     %s\n", status)
	if res.ObjectID != "" {
		fmt.Fprintf(w, "object:     %s\n", res.ObjectID)
	}
	fmt.Fprintf(w, "publisher:  %s (%s, %s)\n", res.Publisher, attemptsText(res.Attempts), res.Duration.Round(time.Millisecond))
	if vr != nil {
		fmt.Fprintf(w, "verified:   read back from %s\n", vr.Aggregator)
	}
	return nil
}

const blobGetHelp = `Read blob ID (or quilt patch ID, whole) into FILE. The blob streams to a temporary file beside FILE,
which replaces FILE only once every byte arrived (and, with --sha256, matched).
An existing FILE is kept unless --force is given. The blob may be at most
walrus.max_download_size (--max-size; default 16GiB): an aggregator
announcing or sending more is cut off at once (exit 3). Free space beside
FILE is checked before the first byte is written and again whenever half
of the room left above the margin is used, so a body of unknown length
stops at the margin rather than filling the disk.`

func runBlobGet(ctx context.Context, env *cmdEnv, args []string) error {
	flags := newFlagSet(env, "blob get", "blob get ID -o FILE [--force] [--sha256 HEX] [--json] [-config FILE | --aggregator URL ...]", blobGetHelp)
	var ep endpointFlags
	ep.register(flags, false)
	out := flags.String("o", "", "write the blob to `FILE` (required)")
	force := flags.Bool("force", false, "replace FILE if it exists")
	wantHex := flags.String("sha256", "", "expected SHA-256 of the blob (`HEX`); a mismatch exits 3 and leaves FILE alone")
	maxSize := flags.String("max-size", "", "refuse a blob larger than `SIZE` (e.g. 64MiB; default walrus.max_download_size)")
	asJSON := flags.Bool("json", false, "print the result as one JSON object")
	pos, err := parseInterspersed(flags, args)
	if err != nil {
		return err
	}
	var id string
	switch {
	case len(pos) > 1:
		return usageErrorf("blob get: unexpected argument %q", pos[1])
	case len(pos) == 1:
		id = pos[0]
	}
	switch {
	case id == "":
		return usageErrorf("blob get: a blob ID is required")
	case *out == "":
		return usageErrorf("blob get: -o FILE is required")
	}
	if err := walrus.ValidateRef(id); err != nil {
		return withCode(exitUsage, err)
	}
	var want []byte
	if *wantHex != "" {
		b, err := hex.DecodeString(*wantHex)
		if err != nil || len(b) != sha256.Size {
			return usageErrorf("blob get: --sha256 wants 64 hex digits")
		}
		want = b
	}
	if _, err := os.Lstat(*out); err == nil && !*force {
		return fmt.Errorf("blob get: %s exists; refusing to overwrite it without --force: %w", *out, fs.ErrExist)
	}
	wc, err := ep.clientConfig(false)
	if err != nil {
		return err
	}
	if *maxSize != "" {
		n, err := config.ParseByteSize(*maxSize)
		if err != nil || n <= 0 {
			return usageErrorf("blob get: --max-size wants a positive size such as 64MiB")
		}
		wc.MaxReadSize = int64(n)
	}

	meter := startProgressMeter(env.stderr, "download", -1)
	defer meter.stop()
	wc.Logger = slog.New(slog.NewTextHandler(meter.logWriter(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := walrus.New(wc)
	if err != nil {
		return withCode(exitUsage, err)
	}
	f, err := atomicfile.Create(*out, 0o600)
	if err != nil {
		return fmt.Errorf("blob get: %w", err)
	}
	defer f.Abort()
	h := sha256.New()
	// A body of unknown length stops at the free-space margin, not at a
	// full disk (the client's own check looks only every 64 MiB).
	disk := &diskspace.Guard{W: f.File, Dir: filepath.Dir(*out)}
	res, err := c.Read(ctx, id, io.MultiWriter(disk, h, meter), walrus.WithFreeSpace(filepath.Dir(*out)))
	if err != nil {
		return blobError("blob get", err)
	}
	sum := h.Sum(nil)
	if want != nil && !bytes.Equal(sum, want) {
		return withCode(exitMismatch, fmt.Errorf("blob get: %w: blob %s has sha256 %x, expected %x; %s left unchanged", walrus.ErrMismatch, id, sum, want, *out))
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("blob get: %w", err)
	}
	meter.stop()

	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(struct {
			BlobID     string `json:"blobId"`
			Size       int64  `json:"size"`
			SHA256     string `json:"sha256"`
			Path       string `json:"path"`
			Aggregator string `json:"aggregator"`
			Attempts   int    `json:"attempts"`
			Resumes    int    `json:"resumes"`
			DurationMs int64  `json:"durationMs"`
		}{res.BlobID, res.Size, hex.EncodeToString(sum), *out, res.Aggregator, res.Attempts, res.Resumes, res.Duration.Milliseconds()})
	}
	fmt.Fprintf(env.stdout, "%s: %s (%d bytes), sha256 %x, from %s (%s, %s)\n", *out, walrus.FormatSize(res.Size), res.Size, sum,
		res.Aggregator, attemptsText(res.Attempts), res.Duration.Round(time.Millisecond))
	return nil
}

// blobError maps the walrus package's errors to exit codes: a mistake in
// the configuration or the arguments is 2; the rest classify maps (an
// answer over its bound or of the wrong bytes 3, no such blob 4, an
// interruption 130, anything else 1).
func blobError(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if errors.Is(err, walrus.ErrConfig) || errors.Is(err, walrus.ErrInvalidBlobID) {
		return withCode(exitUsage, err)
	}
	return err
}

func blobFileSHA256(path string) ([32]byte, error) {
	var sum [32]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, fmt.Errorf("hash %s: %w", path, err)
	}
	h.Sum(sum[:0])
	return sum, nil
}

func attemptsText(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// urlListFlag collects a repeatable URL flag.
type urlListFlag []string

func (u *urlListFlag) String() string { return strings.Join(*u, ",") }

func (u *urlListFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty URL")
	}
	*u = append(*u, v)
	return nil
}

// meteredBody reports upload progress; each attempt starts from zero.
type meteredBody struct {
	walrus.Body
	m *progressMeter
}

func (b meteredBody) Open() (io.ReadCloser, error) {
	rc, err := b.Body.Open()
	if err != nil {
		return nil, err
	}
	b.m.n.Store(0)
	return meteredReader{rc, b.m}, nil
}

type meteredReader struct {
	io.ReadCloser
	m *progressMeter
}

func (r meteredReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.m.n.Add(int64(n))
	return n, err
}

// progressMeter draws "label 3.2 MiB / 10.0 MiB  12.3 MiB/s" in place on a
// terminal, at most ten times a second, and nothing elsewhere. As an
// io.Writer it counts bytes; log lines go through logWriter, which clears
// the progress line first.
type progressMeter struct {
	out     io.Writer
	enabled bool
	n       atomic.Int64

	mu    sync.Mutex
	label string
	total int64
	start time.Time
	drawn bool
	quit  chan struct{}
	done  chan struct{}
}

func startProgressMeter(stderr io.Writer, label string, total int64) *progressMeter {
	m := &progressMeter{out: stderr, label: label, total: total, start: time.Now()}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		m.enabled = true
		m.run()
	}
	return m
}

func (m *progressMeter) run() {
	m.quit, m.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.quit:
				return
			case <-t.C:
				m.draw()
			}
		}
	}()
}

func (m *progressMeter) draw() {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.n.Load()
	line := m.label + " " + walrus.FormatSize(n)
	if m.total >= 0 {
		line += " / " + walrus.FormatSize(m.total)
	}
	if secs := time.Since(m.start).Seconds(); secs > 0 {
		line += "  " + walrus.FormatSize(int64(float64(n)/secs)) + "/s"
	}
	fmt.Fprint(m.out, "\r\033[K"+line)
	m.drawn = true
}

// restart begins a new phase (e.g. verify after upload).
func (m *progressMeter) restart(label string) {
	m.mu.Lock()
	m.label, m.start = label, time.Now()
	m.mu.Unlock()
	m.n.Store(0)
}

// stop ends the display and clears its line; safe to call twice.
func (m *progressMeter) stop() {
	if !m.enabled {
		return
	}
	m.mu.Lock()
	quit := m.quit
	m.quit = nil
	m.mu.Unlock()
	if quit == nil {
		return
	}
	close(quit)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drawn {
		fmt.Fprint(m.out, "\r\033[K")
		m.drawn = false
	}
}

// logWriter writes log lines to the meter's output without mangling the
// progress line.
func (m *progressMeter) logWriter() io.Writer { return meterLog{m} }

type meterLog struct{ m *progressMeter }

func (l meterLog) Write(p []byte) (int, error) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.drawn {
		fmt.Fprint(l.m.out, "\r\033[K")
		l.m.drawn = false
	}
	return l.m.out.Write(p)
}

// Write counts downloaded bytes (the meter is one of Read's writers).
func (m *progressMeter) Write(p []byte) (int, error) {
	m.n.Add(int64(len(p)))
	return len(p), nil
}
