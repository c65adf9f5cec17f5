package sqlite

import (
	"bytes"
	"encoding/binary"
)

// The WAL index (the -shm file) and the WAL, as far as a freeze reads them
// (https://sqlite.org/walformat.html). Both come from the brain, so both
// are untrusted: everything is checked, and what the index claims is
// checked against the WAL itself before it is believed.

// The WAL-index header: two copies of a 48-byte header (a writer updates
// the second, then the first, so a reader that finds them equal and the
// checksum right has a consistent one), then the checkpoint information,
// whose first field is nBackfill. All in the host's byte order.
const (
	indexHeaderSize = 48
	nBackfillOffset = 2 * indexHeaderSize
	indexReadSize   = nBackfillOffset + 4
	indexVersion    = 3007000
)

// walIndex is what a freeze needs of the WAL-index header.
type walIndex struct {
	mxFrame    uint32    // the last frame of the last commit
	pageSize   int       // bytes of a page
	frameCksum [2]uint32 // checksum of frame mxFrame
	salt       [8]byte   // the WAL header's salts, as stored there
}

// parseIndex decodes the two header copies at the start of b (at least
// 2×48 bytes of the -shm file). ok is false while a writer is updating the
// header, before any connection has initialized it, or when it is not a
// WAL index.
func parseIndex(b []byte) (walIndex, bool) {
	if len(b) < 2*indexHeaderSize {
		return walIndex{}, false
	}
	h := b[:indexHeaderSize]
	if !bytes.Equal(h, b[indexHeaderSize:2*indexHeaderSize]) {
		return walIndex{}, false
	}
	ne := binary.NativeEndian
	if ne.Uint32(h[0:]) != indexVersion || h[12] == 0 { // iVersion, isInit
		return walIndex{}, false
	}
	var s1, s2 uint32
	for i := 0; i < 40; i += 8 {
		s1 += ne.Uint32(h[i:]) + s2
		s2 += ne.Uint32(h[i+4:]) + s1
	}
	if s1 != ne.Uint32(h[40:]) || s2 != ne.Uint32(h[44:]) {
		return walIndex{}, false
	}
	sz := ne.Uint16(h[14:])
	ix := walIndex{
		mxFrame:    ne.Uint32(h[16:]),
		pageSize:   int(sz&0xfe00) + int(sz&1)<<16,
		frameCksum: [2]uint32{ne.Uint32(h[24:]), ne.Uint32(h[28:])},
	}
	copy(ix.salt[:], h[32:40])
	if !validPageSize(ix.pageSize) {
		return walIndex{}, false
	}
	return ix, true
}

// nBackfill is the number of WAL frames already copied into the database.
func nBackfill(b []byte) uint32 {
	return binary.NativeEndian.Uint32(b[nBackfillOffset:])
}

// The WAL: a 32-byte header, then frames of a 24-byte header and a page.
// Big-endian.
const (
	walHeaderSize   = 32
	frameHeaderSize = 24
	walVersion      = 3007000
)

// walPrefix returns how many bytes of a WAL hold its frames up to and
// including the frame the index names as its last commit, after checking
// that hdr (the WAL's header) and frame (that frame's header) agree with
// the index: same salts and page size, a commit frame with the index's
// checksum. ok is false when they do not (not this WAL, or not yet).
func walPrefix(ix walIndex, hdr, frame []byte) (int64, bool) {
	if len(hdr) < walHeaderSize || len(frame) < frameHeaderSize || ix.mxFrame == 0 {
		return 0, false
	}
	be := binary.BigEndian
	if magic := be.Uint32(hdr); magic != 0x377f0682 && magic != 0x377f0683 {
		return 0, false
	}
	if be.Uint32(hdr[4:]) != walVersion || int(be.Uint32(hdr[8:])) != ix.pageSize || !bytes.Equal(hdr[16:24], ix.salt[:]) {
		return 0, false
	}
	if be.Uint32(frame[4:]) == 0 || // not a commit frame
		!bytes.Equal(frame[8:16], ix.salt[:]) ||
		be.Uint32(frame[16:]) != ix.frameCksum[0] || be.Uint32(frame[20:]) != ix.frameCksum[1] {
		return 0, false
	}
	return frameOffset(ix, ix.mxFrame+1), true
}

// frameOffset is where frame n (1-based) starts.
func frameOffset(ix walIndex, n uint32) int64 {
	return walHeaderSize + int64(n-1)*int64(frameHeaderSize+ix.pageSize)
}

func validPageSize(n int) bool {
	return n >= 512 && n <= 65536 && n&(n-1) == 0
}
