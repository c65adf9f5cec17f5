// Package brains writes the files of benchtool's generated brains:
// seeded random bytes (a memory.db) and markdown-like notes.
package brains

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// WriteRandomFile writes size bytes of ChaCha8 output (fast, seeded).
func WriteRandomFile(ctx context.Context, path string, size int64, src *rand.ChaCha8) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4<<20)
	var n int64
	for n < size {
		if ctx.Err() != nil {
			f.Close()
			return n, ctx.Err()
		}
		chunk := buf[:min(int64(len(buf)), size-n)]
		src.Read(chunk) // never fails
		w, err := f.Write(chunk)
		n += int64(w)
		if err != nil {
			f.Close()
			return n, err
		}
	}
	return n, errors.Join(f.Chmod(0o644), f.Close())
}

var vocab = strings.Fields(`agent audit balance bridge bytecode call contract
	delegate deploy emit epoch exploit fallback flash fork gas governance guard
	hash invariant keeper ledger liquidity loan lock memory mint nonce oracle
	owner pause permit pool price proxy reentrancy reward role router sandwich
	selector signature skill slippage snapshot stake storage swap timelock
	token transfer upgrade vault verify withdraw yield the a of to and in is
	for on with that this when before after check every state value must not
	never always first then only each call returns reverts balance amount
	sender receiver user attacker victim pattern finding severity high medium
	low note example step trace input output function modifier event error
	require assert external internal public private view pure payable`)

// WriteMarkdown writes a markdown-like text file of exactly size bytes:
// headings, paragraphs and lists of words from a small vocabulary, so it
// compresses roughly like real notes do.
func WriteMarkdown(path string, size int, rng *rand.Rand) (int64, error) {
	var b strings.Builder
	b.Grow(size + 64)
	word := func() string { return vocab[rng.IntN(len(vocab))] }
	fmt.Fprintf(&b, "# %s %s %d\n\n", word(), word(), rng.IntN(10000))
	for b.Len() < size {
		switch rng.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "## %s %s\n\n", word(), word())
		case 1:
			for j := 2 + rng.IntN(4); j > 0; j-- {
				fmt.Fprintf(&b, "- %s %s %s %s\n", word(), word(), word(), word())
			}
			b.WriteByte('\n')
		default:
			for j := 20 + rng.IntN(60); j > 0; j-- {
				b.WriteString(word())
				if j%12 == 0 {
					b.WriteString(".\n")
				} else {
					b.WriteByte(' ')
				}
			}
			b.WriteString("\n\n")
		}
	}
	s := b.String()[:size-1] + "\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return 0, err
	}
	return int64(size), os.Chmod(path, 0o644) // independent of the umask
}
