package redstuff

import (
	"sync"
	"weak"

	"golang.org/x/crypto/blake2b"
)

// Walrus's Merkle trees (walrus-core merkle.rs): Blake2b-256, a leaf is
// H(0x00 ‖ data), an inner node H(0x01 ‖ left ‖ right); a level with an
// odd number of nodes is completed with the empty node (32 zero bytes);
// the root of one leaf is that leaf, of none the empty node.

// Node is a Merkle node or a digest.
type Node = [32]byte

const (
	leafPrefix  = 0x00
	innerPrefix = 0x01
)

// leafHash hashes a leaf; buf must have room for 1+len(data) bytes.
func leafHash(buf, data []byte) Node {
	buf = append(buf[:0], leafPrefix)
	buf = append(buf, data...)
	return blake2b.Sum256(buf)
}

func innerHash(l, r *Node) Node {
	var b [65]byte
	b[0] = innerPrefix
	copy(b[1:33], l[:])
	copy(b[33:], r[:])
	return blake2b.Sum256(b[:])
}

// leafTable holds the leaf of every two-byte symbol. A blob of up to
// p·s·2 bytes (445,556 at 1000 shards: a second snapshot's pack, a head,
// a quilt of small patches) has two-byte symbols, so its n² leaves take
// at most 65,536 values: looked up, they cost no hashing, a third of such
// a blob's id (the rest is the trees' inner nodes). The table (2 MiB,
// ~10 ms to build) is shared by the ids computed until the next garbage
// collection after the last of them: one table at most, and none in an
// idle process.
type leafTable [1 << 16]Node

var leafTables struct {
	mu   sync.Mutex
	last weak.Pointer[leafTable]
}

// smallLeaves returns the table, building it if the collector took it;
// the caller's reference keeps it while its id is computed.
func smallLeaves() *leafTable {
	leafTables.mu.Lock()
	defer leafTables.mu.Unlock()
	if t := leafTables.last.Value(); t != nil {
		return t
	}
	t := newLeafTable()
	leafTables.last = weak.Make(t)
	return t
}

func newLeafTable() *leafTable {
	t := new(leafTable)
	var buf [3]byte
	for v := range t {
		t[v] = leafHash(buf[:0], []byte{byte(v), byte(v >> 8)})
	}
	return t
}

// leaf is the leaf of the two-byte symbol sym.
func (t *leafTable) leaf(sym []byte) Node { return t[uint16(sym[0])|uint16(sym[1])<<8] }

// zeroRoots are the roots of complete subtrees of 2^k leaves that are
// all the hash of the all-zero symbol: a blob's padding, and the columns
// and rows it makes zero, are most of a small blob's or a quilt's
// matrix, and hashing the same bytes again gives the same node, so such
// subtrees are looked up instead of hashed.
type zeroRoots [17]Node

func newZeroRoots(symbol int) *zeroRoots {
	var z zeroRoots
	z[0] = leafHash(nil, make([]byte, symbol))
	for k := 1; k < len(z); k++ {
		z[k] = innerHash(&z[k-1], &z[k-1])
	}
	return &z
}

// inner is innerHash of two children at level, from the table when both
// are zero subtrees.
func (z *zeroRoots) inner(level uint8, l, r *Node) Node {
	if z != nil && int(level)+1 < len(z) && *l == z[level] && *r == z[level] {
		return z[level+1]
	}
	return innerHash(l, r)
}

// frontier builds a Merkle tree from its leaves (or from aligned complete
// subtrees) in order, holding one node per level.
type frontier struct {
	level []uint8
	node  []Node
	zero  *zeroRoots // nil: no shortcut
}

// push adds the root of a complete subtree of 2^level leaves; the leaves
// so far must be a multiple of 2^level.
func (f *frontier) push(level uint8, n Node) {
	for k := len(f.level) - 1; k >= 0 && f.level[k] == level; k-- {
		n = f.zero.inner(level, &f.node[k], &n)
		level++
		f.level, f.node = f.level[:k], f.node[:k]
	}
	f.level, f.node = append(f.level, level), append(f.node, n)
}

// root completes the tree as Walrus does: a lone node at the end of a
// level is paired with the empty node.
func (f *frontier) root() Node {
	if len(f.node) == 0 {
		return Node{}
	}
	var empty Node
	for len(f.node) > 1 {
		k := len(f.node) - 1
		n, l := f.node[k], f.level[k]
		f.level, f.node = f.level[:k], f.node[:k]
		f.push(l+1, innerHash(&n, &empty))
	}
	return f.node[0]
}

func (f *frontier) reset() { f.level, f.node = f.level[:0], f.node[:0] }

// merkleRoot is the root over leaves (hashed already); it overwrites them.
func merkleRoot(nodes []Node) Node { return zeroMerkleRoot(nil, nodes) }

// zeroMerkleRoot is merkleRoot with zero subtrees looked up in z.
func zeroMerkleRoot(z *zeroRoots, nodes []Node) Node {
	if len(nodes) == 0 {
		return Node{}
	}
	var empty Node
	for level := uint8(0); len(nodes) > 1; level++ {
		half := (len(nodes) + 1) / 2
		for i := range half {
			if 2*i+1 < len(nodes) {
				nodes[i] = z.inner(level, &nodes[2*i], &nodes[2*i+1])
			} else {
				nodes[i] = innerHash(&nodes[2*i], &empty)
			}
		}
		nodes = nodes[:half]
	}
	return nodes[0]
}
