//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	gocipher "crypto/cipher"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/cipher"
)

// runCipher measures a v2 round trip of -size bytes: a generated stream
// through cipher.Encrypt into a file, then the file through cipher.Decrypt
// into io.Discard. Peak RSS is reported per phase from VmHWM (reset in
// between through /proc/self/clear_refs); `measure` records the process's.
func runCipher(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cipher", flag.ContinueOnError)
	size := fs.Int64("size", 1<<30, "plaintext bytes")
	file := fs.String("file", "", "ciphertext file (removed afterwards)")
	prof := profileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProf, err := prof()
	if err != nil {
		return err
	}
	defer stopProf()
	if *file == "" {
		return errors.New("-file is required")
	}
	key, err := cipher.GenerateKey()
	if err != nil {
		return err
	}
	const identity = "bench.hermes.eth"
	// One 1 MiB block of ChaCha8 output written over and over: GCM does not
	// care what the bytes are, and generating them does not pollute the
	// encryption figure.
	block := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{'v', '2'}).Read(block)

	f, err := os.Create(*file)
	if err != nil {
		return err
	}
	defer os.Remove(*file)
	t := time.Now()
	w, err := cipher.Encrypt(f, key, identity)
	if err != nil {
		return err
	}
	for n := int64(0); n < *size; {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		chunk := block[:min(int64(len(block)), *size-n)]
		if _, err := w.Write(chunk); err != nil {
			return fmt.Errorf("encrypt: %w", err)
		}
		n += int64(len(chunk))
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("encrypt: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	enc := time.Since(t).Seconds()
	encHWM := vmHWM()
	resetHWM()

	f, err = os.Open(*file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	t = time.Now()
	r, err := cipher.Decrypt(f, key, identity)
	if err != nil {
		return fmt.Errorf("decrypt: %w", err)
	}
	var got int64
	for {
		n, err := r.Read(block)
		got += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("decrypt: %w", err)
		}
	}
	dec := time.Since(t).Seconds()
	if got != *size {
		return fmt.Errorf("decrypted %d bytes, want %d", got, *size)
	}
	decHWM := vmHWM()
	gcm, err := goGCMSpeed(block, min(*size, 256<<20))
	if err != nil {
		return err
	}
	emit(map[string]float64{
		"enc_MBps":       float64(*size) / 1e6 / enc,
		"dec_MBps":       float64(*size) / 1e6 / dec,
		"enc_s":          enc,
		"dec_s":          dec,
		"overhead_pct":   100 * float64(st.Size()-*size) / float64(max(*size, 1)),
		"enc_hwm_MiB":    encHWM,
		"dec_hwm_MiB":    decHWM,
		"gogcm_MBps":     gcm,
		"plaintext_MiB":  float64(*size) / (1 << 20),
		"ciphertext_MiB": float64(st.Size()) / (1 << 20),
	})
	return nil
}

// goGCMSpeed is the primitive under v2: Go's AES-256-GCM sealing 1 MiB
// blocks in place in memory (n bytes in all), in MB/s.
func goGCMSpeed(block []byte, n int64) (float64, error) {
	key := make([]byte, 32)
	b, err := aes.NewCipher(key)
	if err != nil {
		return 0, err
	}
	g, err := gocipher.NewGCM(b)
	if err != nil {
		return 0, err
	}
	nonce := make([]byte, g.NonceSize())
	buf := make([]byte, len(block), len(block)+g.Overhead())
	t := time.Now()
	for done := int64(0); done < n; done += int64(len(block)) {
		copy(buf, block)
		nonce[0]++
		g.Seal(buf[:0], nonce, buf, nil)
	}
	return float64(n) / 1e6 / time.Since(t).Seconds(), nil
}

// vmHWM is this process's peak RSS in MiB since start or the last reset.
func vmHWM() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// resetHWM resets VmHWM to the current RSS (Linux: "5" > clear_refs).
func resetHWM() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// runOpenSSLSpeed reports `openssl speed -evp aes-256-gcm` at one block
// size, the AES-GCM baseline for the v2 throughput.
func runOpenSSLSpeed(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("osslspeed", flag.ContinueOnError)
	bytesFlag := fs.Int("bytes", 1<<20, "block size")
	secs := fs.Int("seconds", 2, "seconds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "openssl", "speed", "-mr", "-evp", "aes-256-gcm",
		"-bytes", strconv.Itoa(*bytesFlag), "-seconds", strconv.Itoa(*secs)).Output()
	if err != nil {
		return fmt.Errorf("openssl speed: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// +F:<n>:<alg>:<bytes per second>
		if f := strings.Split(sc.Text(), ":"); len(f) >= 4 && f[0] == "+F" {
			rate, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				return err
			}
			emit(map[string]float64{"MBps": rate / 1e6})
			return nil
		}
	}
	return fmt.Errorf("no +F line in openssl speed output:\n%s", out)
}
