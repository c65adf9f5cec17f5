package devchain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/ethdb"
	"github.com/ethereum/go-ethereum/node"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// ErrDamaged is matched (errors.Is) by the error of a Start whose data
// directory holds a chain that cannot resume at its last durable head.
var ErrDamaged = errors.New("devchain: chain data is damaged")

// ErrOtherChain is matched by the error of a Start whose data directory
// holds a chain made with another configuration.
var ErrOtherChain = errors.New("devchain: data directory holds another chain")

// DamagedError says why a data directory is refused and what to do.
type DamagedError struct {
	Dir    string
	Reason string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("devchain: chain at %s is damaged (%s): delete %s to start over", e.Dir, e.Reason, e.Dir)
}

func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// Files in a data directory.
const (
	// instanceName is the go-ethereum node's name: its files are in
	// DataDir/instanceName (chaindata, LOCK, nodekey).
	instanceName = "hermesd-devchain"
	// damagedFile records a refusal that go-ethereum's own repair would
	// otherwise hide on the next start (it rewrites the head markers).
	damagedFile = "DAMAGED"
	// maxDamagedFile bounds what is read back from damagedFile.
	maxDamagedFile = 4 << 10
)

// durability makes every sealed block of a persistent chain durable before
// any response can show it. Three parts:
//   - The hash state scheme without pruning (an archive node) commits each
//     block's state trie to the key-value store while the block is sealed;
//     go-ethereum's default path scheme keeps recent state in memory layers
//     written out only on a clean close (Start sets this up).
//   - go-ethereum applies its pebble batches without sync: a write waits in
//     pebble's WAL buffer inside the process, and a kill -9 loses it.
//     SyncKeyValue (ethdb.KeyValueSyncer; pebble applies an empty LogData
//     record with Sync) fsyncs the WAL and so every write before it. Pebble
//     recovers a prefix of its WAL and go-ethereum writes a block's body,
//     receipts and state before its head marker, so a durable head implies
//     a durable block and state. One fsync per block: well under a
//     millisecond on an SSD.
//   - go-ethereum makes a block visible as soon as its head marker is
//     written, before any sync, so a sync after sealing alone would leave a
//     window in which a receipt is served for a block not on disk. Every
//     RPC request therefore runs under a shared lock, and sealing holds it
//     exclusively from the block's first write until the sync returns.
//     Requests are read whole before and answered after the lock (see
//     front), so a slow client never holds sealing up.
type durability struct {
	sync func() error // fsync of the chain database's WAL

	mu  sync.RWMutex
	err error // sticky: a failed sync stops the chain
}

// view runs fn with nothing undurable visible.
func (d *durability) view(fn func()) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.err != nil {
		return d.err
	}
	fn()
	return nil
}

// seal runs commit, which seals a block and reports whether the head
// moved, and syncs the database before any request can see the block.
func (d *durability) seal(commit func() bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	if !commit() {
		return nil
	}
	if err := d.sync(); err != nil {
		d.err = fmt.Errorf("devchain: sync chain database: %w", err)
	}
	return d.err
}

// diskHead is what a data directory holds before go-ethereum opens it.
type diskHead struct {
	fresh  bool   // no genesis yet: a first run (perhaps killed before)
	extra  []byte // the genesis extraData, when not fresh
	hash   common.Hash
	number uint64
}

// checkDamagedMarker refuses a directory an earlier start found damaged.
func checkDamagedMarker(dir string) error {
	f, err := os.Open(filepath.Join(dir, damagedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devchain: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDamagedFile))
	if err != nil {
		return fmt.Errorf("devchain: read %s: %w", damagedFile, err)
	}
	reason, _, _ := bytes.Cut(b, []byte("\n"))
	return &DamagedError{Dir: dir, Reason: string(bytes.TrimSpace(reason))}
}

// markDamaged refuses dir from now on, then returns the refusal.
func markDamaged(dir, reason string) error {
	derr := &DamagedError{Dir: dir, Reason: reason}
	if err := atomicfile.WriteFile(filepath.Join(dir, damagedFile), []byte(reason+"\n"), 0o600); err != nil {
		return fmt.Errorf("%w (and writing %s failed: %v)", derr, damagedFile, err)
	}
	return derr
}

// inspect opens the chain database before go-ethereum does and checks that
// the chain can resume where it stopped. go-ethereum itself would "repair"
// a head without state by rewinding the chain, or wait for a state sync
// that never comes; both are refused here instead, loudly.
func inspect(stack *node.Node, dir string, opts node.DatabaseOptions, gen func(extra []byte) (*core.Genesis, error)) (diskHead, error) {
	if _, err := os.Stat(stack.ResolvePath("chaindata")); errors.Is(err, fs.ErrNotExist) {
		return diskHead{fresh: true}, nil
	}
	db, err := stack.OpenDatabaseWithOptions("chaindata", opts)
	if err != nil {
		return diskHead{}, fmt.Errorf("devchain: open chain at %s: %w (if it is damaged, delete %s to start over)", dir, err, dir)
	}
	head, herr := inspectDB(db, dir, gen)
	if err := db.Close(); err != nil && herr == nil {
		herr = fmt.Errorf("devchain: close database: %w", err)
	}
	return head, herr
}

func inspectDB(db ethdb.Database, dir string, gen func(extra []byte) (*core.Genesis, error)) (diskHead, error) {
	damaged := func(format string, args ...any) (diskHead, error) {
		return diskHead{}, &DamagedError{Dir: dir, Reason: fmt.Sprintf(format, args...)}
	}
	genesisHash := rawdb.ReadCanonicalHash(db, 0)
	if genesisHash == (common.Hash{}) {
		// Killed before go-ethereum committed the genesis (it commits the
		// genesis block, its state and the head markers in one batch,
		// after the state): nothing anybody saw, start afresh.
		return diskHead{fresh: true}, nil
	}
	if rawdb.ReadStateScheme(db) == rawdb.PathScheme {
		return damaged("written by an older hermesd with go-ethereum's path state scheme, which loses recent blocks on a crash")
	}
	genesisHeader := rawdb.ReadHeader(db, genesisHash, 0)
	if genesisHeader == nil {
		return damaged("genesis header %s is missing", genesisHash)
	}
	g, err := gen(genesisHeader.Extra)
	if err != nil {
		return diskHead{}, err
	}
	if want := g.ToBlock().Hash(); want != genesisHash {
		return diskHead{}, fmt.Errorf("%w: %s has genesis %s, this configuration (chain id, dev key, funded accounts) makes %s: start with the configuration it was made with, or delete %s to start over", ErrOtherChain, dir, genesisHash, want, dir)
	}
	hash := rawdb.ReadHeadBlockHash(db)
	if hash == (common.Hash{}) {
		return damaged("no head block marker")
	}
	number, ok := rawdb.ReadHeaderNumber(db, hash)
	if !ok {
		return damaged("head block %s has no number", hash)
	}
	header := rawdb.ReadHeader(db, hash, number)
	switch {
	case header == nil:
		return damaged("head block %d header is missing", number)
	case rawdb.ReadCanonicalHash(db, number) != hash:
		return damaged("head block %d is not canonical", number)
	case !rawdb.HasBody(db, hash, number):
		return damaged("head block %d body is missing", number)
	case number > 0 && !rawdb.HasReceipts(db, hash, number):
		return damaged("head block %d receipts are missing", number)
	case !rawdb.HasLegacyTrieNode(db, header.Root):
		// The root is the last node a trie commit writes.
		return damaged("state of head block %d is missing", number)
	}
	return diskHead{extra: genesisHeader.Extra, hash: hash, number: number}, nil
}
