// Package redstuff computes Walrus blob ids locally, bit for bit as
// Walrus does (walrus-core: encoding/blob_encoding.rs, metadata.rs,
// merkle.rs, lib.rs), and lays out and reads QuiltV1 quilts
// (encoding/quilt_encoding.rs) with their patch ids. Walrus's ids are
// commitments to a blob's RS2 ("RedStuff") encoding, so whoever can
// compute them needs no aggregator's word for what bytes an id names.
//
// The blob id (Compute, Sum): with n shards, f = ⌊(n−1)/3⌋, the blob is
// a matrix of p = n−2f rows by s = n−f columns of z-byte symbols
// (walruscost.SymbolSize: z even, the blob zero-padded), row-major. Each
// row is extended to n symbols by the secondary Reed–Solomon code (s
// source, n−s recovery symbols), then each of the n columns to n symbols
// by the primary code (p source, n−p recovery): an n×n matrix. Primary
// sliver i is row i, secondary sliver i column n−1−i; each sliver's hash
// is the Merkle root over its n symbols; sliver pair i's metadata is
// primary hash ‖ secondary hash; the blob id is
//
//	Blake2b-256(0x01 (RS2) ‖ u64le size ‖ Merkle root over the n pairs)
//
// with Walrus's Merkle tree: Blake2b-256, leaf H(0x00 ‖ data), inner node
// H(0x01 ‖ left ‖ right), a level of odd length completed by 32 zero
// bytes.
//
// Reed–Solomon: Walrus uses reed-solomon-simd (Leopard-style, GF(2^16)
// with the LCH additive FFT), which picks a "high" or "low" rate per
// code; the two rates are different codes (rs.go). gf16.go computes the
// field and the transform with 384 KiB of tables; a general-purpose
// library's multiplication tables (klauspost/reedsolomon's take 74 MiB
// once a process first encodes) would exceed the daemon's memory budget
// by themselves. The tests compare the high rate with klauspost's
// encoder, the recovery symbols of both rates with walrus-core's
// slivers, and blob ids with walrus-core's (its WASM build,
// @mysten/walrus-wasm) on random blobs; golden vectors pin both.
//
// Cost: at 1000 shards every id takes n² = 10⁶ symbol hashes and about
// twice as many inner nodes, whatever the blob's size (most of the time
// for blobs under a few MiB), plus the Reed–Solomon work, about 4.5
// times the blob's bytes. The hashes are about four fifths of the CPU
// time (Blake2b compressions: two inner nodes per leaf), the
// Reed–Solomon transforms most of the rest. All-zero symbols (a small
// blob's padding, and the rows and columns it leaves zero; a quilt's
// unused columns) and complete subtrees of them hash to known nodes,
// which are looked up: a small blob's id costs about a third of a dense
// one's. Compute streams: it reads the rows in order, keeps the
// secondary recovery columns (about half the blob), then reads the
// matrix again in blocks of columns, which workers (every core) encode
// and hash, folding each row's tree as the blocks finish in order. Peak
// memory is about half the blob plus a few MiB per core, or the few MiB
// alone when Options.ScratchDir takes the recovery columns.
//
// Quilts (LayoutQuilt, Quilt.Write, ReadQuilt, Quilt.OpenPatch): see
// quilt.go for the layout. Identifiers sort by their bytes (walrus-core's
// order; @mysten/walrus's encodeQuilt sorts JavaScript strings by UTF-16
// code units, which differs only for identifiers mixing characters above
// U+FFFF with ones in U+E000–U+FFFF). A patch id is the quilt's blob id
// and the patch's columns; it cannot be checked against the patch's
// bytes without the whole quilt (all its columns are in the id).
package redstuff
