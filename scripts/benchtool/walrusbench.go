//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/walrus"
)

func benchClient(url string) (*walrus.Client, error) {
	return walrus.New(benchConfig(url))
}

func benchConfig(url string) walrus.Config {
	return walrus.Config{
		Publishers:  []string{url},
		Aggregators: []string{url},
		Epochs:      1,
		MaxBlobSize: 1 << 40,
	}
}

// snapClient is the client of a snapshot taken as the daemon takes it:
// configured with the spool directory, where the id check of a large
// blob read whole keeps its recovery columns (walrus.Config.ScratchDir).
func snapClient(url, spool string) (*walrus.Client, error) {
	c := benchConfig(url)
	c.ScratchDir = spool
	return walrus.New(c)
}

// nonceBody streams a file with its first bytes replaced by a per-run
// nonce, so every upload is a new blob (the server answers identical bytes
// with alreadyCertified, which would not measure storing).
type nonceBody struct {
	path  string
	size  int64
	nonce []byte
}

func (b *nonceBody) Size() int64 { return b.size }

func (b *nonceBody) Open() (io.ReadCloser, error) {
	f, err := os.Open(b.path)
	if err != nil {
		return nil, err
	}
	n := int64(len(b.nonce))
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b.nonce), io.NewSectionReader(f, n, b.size-n)), f}, nil
}

func runWalrusPut(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("walrus-put", flag.ContinueOnError)
	url := fs.String("url", "", "local Walrus server")
	file := fs.String("file", "", "content to upload")
	idFile := fs.String("idfile", "", "write the blob id here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := os.Stat(*file)
	if err != nil {
		return err
	}
	if st.Size() < 16 {
		return errors.New("file too small")
	}
	c, err := benchClient(*url)
	if err != nil {
		return err
	}
	nonce := fmt.Appendf(nil, "%016x", time.Now().UnixNano())
	t := time.Now()
	res, err := c.Store(ctx, &nonceBody{path: *file, size: st.Size(), nonce: nonce})
	if err != nil {
		return err
	}
	d := time.Since(t).Seconds()
	if res.AlreadyCertified {
		return errors.New("upload was deduplicated; the figure would not measure storing")
	}
	if *idFile != "" {
		if err := os.WriteFile(*idFile, []byte(res.BlobID), 0o644); err != nil {
			return err
		}
	}
	emit(map[string]float64{"MBps": float64(st.Size()) / 1e6 / d, "s": d, "attempts": float64(res.Attempts)})
	return nil
}

// countWriter counts and drops bytes; it has no ReadFrom, so the client's
// own copy loop is what gets measured.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func runWalrusGet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("walrus-get", flag.ContinueOnError)
	url := fs.String("url", "", "local Walrus server")
	idFile := fs.String("idfile", "", "file holding the blob id")
	want := fs.Int64("size", -1, "expected size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	id, err := os.ReadFile(*idFile)
	if err != nil {
		return err
	}
	c, err := benchClient(*url)
	if err != nil {
		return err
	}
	var w countWriter
	t := time.Now()
	if _, err := c.Read(ctx, strings.TrimSpace(string(id)), &w); err != nil {
		return err
	}
	d := time.Since(t).Seconds()
	if *want >= 0 && w.n != *want {
		return fmt.Errorf("read %d bytes, want %d", w.n, *want)
	}
	emit(map[string]float64{"MBps": float64(w.n) / 1e6 / d, "s": d})
	return nil
}

func runFreePort(ctx context.Context, args []string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

func runWaitPort(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: waitport PORT")
	}
	port, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("127.0.0.1:%d not listening after 30s: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}
