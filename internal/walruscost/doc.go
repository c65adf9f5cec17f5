// Package walruscost is what Walrus charges for a blob, in one place: the
// length of a blob once RS2-encoded over n shards (what storage is paid
// for), the storage units that length takes, the price of a store in FROST
// (1 WAL = 10^9 FROST), and how one store's charge is shared by the
// patches of a quilt.
//
// Encoded length (walrus::redstuff::encoded_blob_length, the Move contract
// and the Rust and TypeScript SDKs compute the same): with n shards,
// f = ⌊(n−1)/3⌋ faulty shards tolerated, p = n−2f primary and s = n−f
// secondary source symbols; a blob of b bytes is cut into p·s symbols of
// z = ⌈max(b,1)/(p·s)⌉ bytes, rounded up to an even number for RS2; every
// shard stores a primary and a secondary sliver, (p+s)·z bytes together,
// and the blob's metadata, n·2·32 bytes of sliver hashes plus the 32-byte
// blob id. So
//
//	encoded = n·(p+s)·z + n·(64·n + 32)
//
// which at n = 1000 is 1,001,000·z + 64,032,000 bytes: 66,034,000 for any blob
// of up to 445,556 bytes. A symbol must fit in 16 bits, which bounds a
// blob at p·s·65,534 bytes (13.6 GiB at 1000 shards).
//
// Price (walrus::system, PriceComputation in the SDK): a storage unit is
// 1 MiB of encoded length, rounded up; registering a blob from scratch
// costs units·(storage price·epochs + write price). The publisher's store
// answer reports the cost it paid ("cost", FROST); this package is what
// the local server charges and how hermesd prices what it did not store
// (the naive comparison of `hermesd cost`).
//
// Sui transactions: a newly created blob takes two (one registers it,
// reserving its storage in the same programmable transaction, one
// certifies it) and creates one Blob object; a blob that was already
// certified takes none. A quilt is one blob, so its two transactions are
// shared by all its patches.
package walruscost
