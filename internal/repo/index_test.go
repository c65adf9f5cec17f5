package repo

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

// The object index keeps one location per object (the first), finds
// objects whose ids share their first bytes or differ only in type, and
// adds a snapshot's packs to an index that keeps its packs.
func TestIndexLocations(t *testing.T) {
	id := func(i int) ID { return sha256.Sum256(fmt.Appendf(nil, "object %d", i)) }
	// Two ids that share the 8 bytes the index sorts by.
	twin := id(1)
	twin[31] ^= 1
	pack := func(name string, ents ...IndexEntry) *indexPack {
		var off int64
		for i := range ents {
			ents[i].Offset, ents[i].Length = off, 100
			off += 100
		}
		return &indexPack{ref: PackRef{BlobID: name, IndexLength: 10}, entries: ents}
	}
	a := pack("a", IndexEntry{Type: TypeChunk, ID: id(1)}, IndexEntry{Type: TypeTree, ID: id(1)}, IndexEntry{Type: TypeChunk, ID: id(2)})
	b := pack("b", IndexEntry{Type: TypeChunk, ID: id(2)}, IndexEntry{Type: TypeChunk, ID: twin}, IndexEntry{Type: TypeChunk, ID: id(3)})
	c := pack("c", IndexEntry{Type: TypeChunk, ID: id(3)}, IndexEntry{Type: TypeChunk, ID: id(4)})

	ix := NewIndex()
	ix.replace("a", []*indexPack{a, b})
	check := func(step string, want map[Handle]string) {
		t.Helper()
		if ix.Len() != len(want) {
			t.Errorf("%s: %d objects, want %d", step, ix.Len(), len(want))
		}
		for h, loc := range want {
			blob, off, n, ok := ix.Lookup(h)
			if got := fmt.Sprintf("%s+%d/%d", blob, off, n); !ok || got != loc {
				t.Errorf("%s: %v %s at %q (%v), want %q", step, h.Type, h.ID.Short(), got, ok, loc)
			}
		}
		if _, _, _, ok := ix.Lookup(Handle{TypeChunk, id(99)}); ok {
			t.Errorf("%s: an object of no pack was found", step)
		}
	}
	base := int64(HeaderSize + 10)
	at := func(p string, i int) string { return fmt.Sprintf("%s+%d/100", p, base+int64(i)*100) }
	want := map[Handle]string{
		{TypeChunk, id(1)}: at("a", 0),
		{TypeTree, id(1)}:  at("a", 1),
		{TypeChunk, id(2)}: at("a", 2), // the first location
		{TypeChunk, twin}:  at("b", 1),
		{TypeChunk, id(3)}: at("b", 2),
	}
	check("two packs", want)

	// A snapshot that keeps a and b adds c: id(3) stays in b.
	ix.replace("c", []*indexPack{c, a, b})
	want[Handle{TypeChunk, id(4)}] = at("c", 1)
	check("kept packs plus one", want)

	// One that drops a rebuilds: c comes first now.
	ix.replace("c", []*indexPack{c, b})
	check("a dropped", map[Handle]string{
		{TypeChunk, id(3)}: at("c", 0),
		{TypeChunk, id(4)}: at("c", 1),
		{TypeChunk, id(2)}: at("b", 0),
		{TypeChunk, twin}:  at("b", 1),
	})
}
