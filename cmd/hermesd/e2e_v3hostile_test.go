package main

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/walrus"
)

// TestE2EHostileV3 points alpha's ENS record at v3 head packs that a
// holder of alpha's key (buggy or hostile) or another agent wrote:
// `hermesd restore` refuses each with one clear line and exit 3
// (verification) or 6 (authentication), writes nothing beside its target,
// and alpha's brain stays as it was. (A tree that contains itself cannot
// be written at all, its id being its SHA-256; the reader's walk refuses
// one anyway: repo.TestTreeCycleAndDepth.)
func TestE2EHostileV3(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"}, devnet.Agent{ID: "beta", ENSName: "beta.hermes.eth"})
	cfg := w.dn.ConfigPath
	bw := newBrainWriter(t, w.brain("alpha"), rand.New(rand.NewPCG(14, 14)))
	bw.put(t, "system.md", []byte("You are alpha.\n"), 0o644)
	bw.put(t, "skills/reentrancy.md", bytes.Repeat([]byte("look for re-entrant calls\n"), 6000), 0o600)
	newBrainWriter(t, w.brain("beta"), rand.New(rand.NewPCG(15, 15))).put(t, "system.md", []byte("You are beta.\n"), 0o644)
	settleAgents(t, w, "alpha", "beta")
	brainBefore := hashedTree(t, w.brain("alpha"))

	master, err := cipher.ReadKeyFile(w.dn.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	keysOf := func(identity string) *repo.Keys {
		k, err := repo.NewKeys(repo.DeriveAgentKey([repo.KeySize]byte(master), identity), identity)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	alphaKeys, betaKeys := keysOf("alpha.hermes.eth"), keysOf("beta.hermes.eth")
	client := w.walrusClient(walrus.Config{Epochs: 5, MaxBlobSize: 1 << 30})
	var head bytes.Buffer
	if _, err := client.Read(t.Context(), w.pointer("alpha.hermes.eth"), &head); err != nil {
		t.Fatal(err)
	}
	// reseal opens the real head, lets mod change its index and objects,
	// and seals the index again under keys.
	reseal := func(keys *repo.Keys, mod func(ix *repo.PackIndex, c *repo.Commit, data *[]byte)) []byte {
		b := head.Bytes()
		h, err := repo.DecodeHeader(b[:repo.HeaderSize])
		if err != nil {
			t.Fatal(err)
		}
		_, ix, err := alphaKeys.OpenIndex(b[:repo.HeaderSize], b[repo.HeaderSize:h.DataOffset()])
		if err != nil {
			t.Fatal(err)
		}
		c, err := repo.DecodeCommit(ix.Commit)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Clone(b[h.DataOffset():])
		mod(ix, c, &data)
		if ix.Commit, err = c.Encode(); err != nil {
			t.Fatal(err)
		}
		prefix, _, err := keys.SealIndex(ix, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return append(prefix, data...)
	}
	lockChunk := func(ix *repo.PackIndex, c *repo.Commit) int {
		for i, e := range ix.Entries {
			if c.Lock != nil && e.Type == repo.TypeChunk && e.ID == c.Lock.Chunks[0] {
				return i
			}
		}
		t.Fatal("the head pack does not hold the lock's chunk")
		return -1
	}

	for _, tc := range []struct {
		name   string
		pack   func() []byte
		code   int
		reason string
	}{
		{"tampered object", func() []byte {
			b := bytes.Clone(head.Bytes())
			b[len(b)-40] ^= 0x01 // inside the last object: the root tree
			return b
		}, exitAuth, "does not decrypt"},
		{"wrong object id", func() []byte {
			return reseal(alphaKeys, func(ix *repo.PackIndex, c *repo.Commit, _ *[]byte) {
				// The lock's chunk, listed and referenced under another id:
				// it decrypts, but does not hash to that id.
				bogus := repo.ID{0xaa, 0xbb}
				ix.Entries[lockChunk(ix, c)].ID = bogus
				c.Lock.Chunks[0], c.Lock.SHA256 = bogus, bogus
			})
		}, exitMismatch, "does not hash to its id"},
		{"index pointing outside the pack", func() []byte {
			return reseal(alphaKeys, func(ix *repo.PackIndex, _ *repo.Commit, _ *[]byte) {
				ix.Entries[len(ix.Entries)-1].Length += 1000
			})
		}, exitMismatch, "runs past the data"},
		{"oversized length", func() []byte {
			return reseal(alphaKeys, func(ix *repo.PackIndex, _ *repo.Commit, data *[]byte) {
				e := &ix.Entries[len(ix.Entries)-1]
				grow := int64(repo.MaxChunkLen + repo.Overhead + 1 - e.Length)
				e.Type, e.Length = repo.TypeChunk, repo.MaxChunkLen+repo.Overhead+1
				*data = append(*data, make([]byte, grow)...)
			})
		}, exitMismatch, "out of range"},
		{"commit of another agent", func() []byte {
			return reseal(betaKeys, func(_ *repo.PackIndex, c *repo.Commit, _ *[]byte) {
				c.Identity, c.KeyID = "beta.hermes.eth", betaKeys.KeyID()
			})
		}, exitAuth, `snapshot of "beta.hermes.eth"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := client.Store(t.Context(), walrus.BytesBody(tc.pack()))
			if err != nil {
				t.Fatal(err)
			}
			w.setPointer(t, "alpha.hermes.eth", res.BlobID)
			target := filepath.Join(t.TempDir(), "restore")
			code, _, stderr := w.runOnce("restore", "-config", cfg, "--dir", target, "alpha")
			line := lastLine(stderr)
			t.Logf("exit %d: %s", code, line)
			if code != tc.code || !strings.Contains(line, tc.reason) {
				t.Errorf("exit %d (%s), want %d and %q", code, line, tc.code, tc.reason)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("more than one line on stderr:\n%s", stderr)
			}
			if got := listDir(t, filepath.Dir(target)); len(got) > 0 {
				t.Errorf("beside the target: %v", got)
			}
			if d := sameTree(brainBefore, hashedTree(t, w.brain("alpha"))); len(d) > 0 {
				t.Errorf("alpha's brain changed: %v", d)
			}
		})
	}
}
