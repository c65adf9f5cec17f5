package cipher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/tink-crypto/tink-go/v2/streamingaead/subtle"
)

const testIdentity = "alice.agents.eth"

var testKey = Key{
	0x6b, 0x1f, 0x3a, 0x90, 0x22, 0x4e, 0x77, 0x01, 0xc5, 0x8d, 0x13, 0xe2, 0x5a, 0x36, 0xf0, 0x9b,
	0x44, 0x0c, 0xd7, 0x81, 0x2f, 0xaa, 0x60, 0x19, 0xbe, 0x73, 0x05, 0xec, 0x38, 0x92, 0x4d, 0xf6,
}

// plaintext returns n deterministic pseudo-random bytes.
func plaintext(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// libraryBoundaries computes the plaintext capacity of the first and of later
// segments from the library's own parameters, independently of the package's
// constants.
func libraryBoundaries(t testing.TB) (first, later int) {
	a, err := subtle.NewAESGCMHKDF(testKey[:], "SHA256", 32, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	later = 1<<20 - subtle.AESGCMHKDFTagSizeInBytes
	first = later - a.HeaderLength()
	return first, later
}

// encryptV2 encrypts pt, writing it in chunks whose sizes cycle through
// writeSizes.
func encryptV2(t testing.TB, key Key, identity string, pt []byte, writeSizes ...int) []byte {
	t.Helper()
	if len(writeSizes) == 0 {
		writeSizes = []int{len(pt) + 1}
	}
	var buf bytes.Buffer
	w, err := Encrypt(&buf, key, identity)
	if err != nil {
		t.Fatal(err)
	}
	for i, rest := 0, pt; len(rest) > 0; i++ {
		n := min(writeSizes[i%len(writeSizes)], len(rest))
		if m, err := w.Write(rest[:n]); err != nil || m != n {
			t.Fatalf("Write = %d, %v; want %d", m, err, n)
		}
		rest = rest[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decryptAll decrypts src and returns whatever plaintext it got before the
// first error.
func decryptAll(src io.Reader, key Key, identity string) ([]byte, error) {
	r, err := Decrypt(src, key, identity)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// onlyReader hides every method but Read, so the reader cannot re-read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestSegmentBoundaries(t *testing.T) {
	first, later := libraryBoundaries(t)
	if first != v2FirstPlaintext || later != v2Plaintext {
		t.Fatalf("boundaries: library %d/%d, package %d/%d", first, later, v2FirstPlaintext, v2Plaintext)
	}
	if first != 1048520 || later != 1048560 {
		t.Fatalf("boundaries changed: %d/%d", first, later)
	}
}

func TestV2RoundTrip(t *testing.T) {
	first, later := libraryBoundaries(t)
	sizes := []int{0, 1, 1000,
		first - 1, first, first + 1,
		first + later - 1, first + later, first + later + 1,
		10 << 20}
	writeSizes := [][]int{{1 << 30}, {1, 4096, 7}, {65536}, {1<<20 + 3, 17}, {first}, {later, 1}}
	pt := plaintext(10 << 20)
	for i, size := range sizes {
		ws := writeSizes[i%len(writeSizes)]
		t.Run(fmt.Sprintf("%d/writes%v", size, ws), func(t *testing.T) {
			blob := encryptV2(t, testKey, testIdentity, pt[:size], ws...)
			segments := 1
			if size > first {
				segments = 1 + (size-first+later-1)/later
			}
			if want := 8 + 40 + size + 16*segments; len(blob) != want {
				t.Fatalf("blob is %d bytes, want %d (%d segments)", len(blob), want, segments)
			}
			if !bytes.HasPrefix(blob, []byte("HRMS\x02\x00\x00\x00\x28")) {
				t.Fatalf("blob starts % x", blob[:9])
			}
			got, err := decryptAll(bytes.NewReader(blob), testKey, testIdentity)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, pt[:size]) {
				t.Fatalf("round trip of %d bytes returned %d different bytes", size, len(got))
			}
		})
	}
}

// TestV2ReaderContract runs iotest.TestReader (odd read sizes, errors after
// EOF, ...) over a three-segment blob read through a plain io.Reader.
func TestV2ReaderContract(t *testing.T) {
	pt := plaintext(v2FirstPlaintext + v2Plaintext + 5000)
	blob := encryptV2(t, testKey, testIdentity, pt, 333)
	r, err := Decrypt(onlyReader{iotest.HalfReader(bytes.NewReader(blob))}, testKey, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if err := iotest.TestReader(r, pt); err != nil {
		t.Fatal(err)
	}
}

// TestV2TinkInterop decrypts the bytes after the prefix with Tink's reader
// directly, as another Tink implementation with the same key and parameters
// would.
func TestV2TinkInterop(t *testing.T) {
	pt := plaintext(v2FirstPlaintext + 10)
	blob := encryptV2(t, testKey, testIdentity, pt)
	a, err := subtle.NewAESGCMHKDF(testKey[:], "SHA256", 32, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.NewDecryptingReader(bytes.NewReader(blob[8:]), []byte("hermesd/v2:"+testIdentity))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Tink reader: %d bytes, %v", len(got), err)
	}
}

// checkFailure decrypts blob and checks that it fails with want, that no
// plaintext of a failing segment was returned (what came before the error is
// a true prefix ending at a segment boundary), and that the error is sticky.
func checkFailure(t *testing.T, src io.Reader, pt []byte, want error, wantSegment int64) {
	t.Helper()
	r, err := Decrypt(src, testKey, testIdentity)
	var got []byte
	if err == nil {
		got, err = io.ReadAll(r)
		if err != nil {
			if n, again := r.Read(make([]byte, 10)); n != 0 || again != err {
				t.Errorf("error not sticky: second Read = %d, %v; first %v", n, again, err)
			}
		}
	}
	if !errors.Is(err, want) {
		t.Fatalf("error = %v; want %v", err, want)
	}
	if !bytes.Equal(got, pt[:len(got)]) {
		t.Fatalf("returned %d bytes that are not the plaintext prefix", len(got))
	}
	var ae *AuthError
	if errors.As(err, &ae) {
		if !errors.Is(err, ErrAuth) {
			t.Errorf("AuthError does not match ErrAuth")
		}
		if wantSegment >= 0 && ae.Segment != wantSegment {
			t.Errorf("failing segment %d, want %d (%v)", ae.Segment, wantSegment, err)
		}
		boundary := int64(0)
		if ae.Segment > 0 {
			boundary = plaintextEnd(ae.Segment - 1)
		}
		if int64(len(got)) != boundary {
			t.Errorf("%d plaintext bytes before the error in segment %d, want %d", len(got), ae.Segment, boundary)
		}
	} else if len(got) != 0 {
		t.Errorf("%d plaintext bytes before non-authentication error %v", len(got), err)
	}
}

// sources gives a blob both as a re-readable bytes.Reader and as a plain
// stream.
var sources = []struct {
	name string
	open func([]byte) io.Reader
}{
	{"seekable", func(b []byte) io.Reader { return bytes.NewReader(b) }},
	{"stream", func(b []byte) io.Reader { return onlyReader{bytes.NewReader(b)} }},
}

func TestV2Truncation(t *testing.T) {
	// Three segments, the last one short.
	pt := plaintext(v2FirstPlaintext + v2Plaintext + 1000)
	blob := encryptV2(t, testKey, testIdentity, pt, 4096)
	const s0, s1 = 8 + 1<<20, 8 + 2<<20 // blob offsets where segments 1 and 2 start
	type cut struct {
		at               int
		seekable, stream error
		segment          int64
	}
	same := func(at int, err error, seg int64) cut { return cut{at, err, err, seg} }
	cuts := []cut{
		same(0, ErrTruncated, -1), same(3, ErrTruncated, -1), same(4, ErrTruncated, -1), same(7, ErrTruncated, -1),
		same(8, ErrTruncated, -1), same(9, ErrTruncated, -1), same(20, ErrTruncated, -1), same(47, ErrTruncated, -1),
		same(48, ErrTruncated, 0), same(49, ErrTruncated, 0), same(63, ErrTruncated, 0),
		same(64, ErrAuthFirstSegment, 0), same(5000, ErrAuthFirstSegment, 0), same(s0-16, ErrAuthFirstSegment, 0), same(s0-1, ErrAuthFirstSegment, 0),
		{s0, ErrTruncated, ErrAuthFirstSegment, 0},
		same(s0+1, ErrTruncated, 1), same(s0+15, ErrTruncated, 1),
		same(s0+16, ErrCorrupted, 1), same(s0+1000, ErrCorrupted, 1), same(s1-1, ErrCorrupted, 1),
		same(s1, ErrTruncated, 1),
		same(s1+1, ErrTruncated, 2), same(s1+15, ErrTruncated, 2),
		same(s1+16, ErrCorrupted, 2), same(len(blob)-16, ErrCorrupted, 2), same(len(blob)-1, ErrCorrupted, 2),
	}
	for _, c := range cuts {
		for i, src := range sources {
			want := c.seekable
			if i == 1 {
				want = c.stream
			}
			t.Run(fmt.Sprintf("%d/%s", c.at, src.name), func(t *testing.T) {
				checkFailure(t, src.open(blob[:c.at]), pt, want, c.segment)
			})
		}
	}
}

func TestV2TrailingData(t *testing.T) {
	ptFull := plaintext(v2FirstPlaintext + v2Plaintext) // last segment full
	full := encryptV2(t, testKey, testIdentity, ptFull)
	ptShort := plaintext(v2FirstPlaintext + v2Plaintext + 1000) // last segment short
	short := encryptV2(t, testKey, testIdentity, ptShort)
	ptSmall := plaintext(1000) // one segment
	small := encryptV2(t, testKey, testIdentity, ptSmall)
	segment := bytes.Repeat([]byte{0xa5}, 1<<20)
	tests := []struct {
		name             string
		blob, pt, extra  []byte
		seekable, stream error
		segment          int64
	}{
		{"full+1", full, ptFull, []byte{0}, ErrTrailingData, ErrTrailingData, 1},
		{"full+17", full, ptFull, segment[:17], ErrTrailingData, ErrCorrupted, 1},
		{"full+segment", full, ptFull, segment, ErrTrailingData, ErrCorrupted, 1},
		{"short+1", short, ptShort, []byte{0}, ErrCorrupted, ErrCorrupted, 2},
		{"short+17", short, ptShort, segment[:17], ErrCorrupted, ErrCorrupted, 2},
		{"short+segment", short, ptShort, segment, ErrCorrupted, ErrCorrupted, 2},
		{"small+1", small, ptSmall, []byte{0}, ErrAuthFirstSegment, ErrAuthFirstSegment, 0},
		{"small+17", small, ptSmall, segment[:17], ErrAuthFirstSegment, ErrAuthFirstSegment, 0},
		{"small+segment", small, ptSmall, segment, ErrAuthFirstSegment, ErrAuthFirstSegment, 0},
	}
	for _, tt := range tests {
		blob := append(bytes.Clone(tt.blob), tt.extra...)
		for i, src := range sources {
			want := tt.seekable
			if i == 1 {
				want = tt.stream
			}
			t.Run(tt.name+"/"+src.name, func(t *testing.T) {
				checkFailure(t, src.open(blob), tt.pt, want, tt.segment)
			})
		}
	}
}

func TestV2BitFlips(t *testing.T) {
	pt := plaintext(v2FirstPlaintext + v2Plaintext + 1000)
	blob := encryptV2(t, testKey, testIdentity, pt, 65536)
	const s0, s1 = 8 + 1<<20, 8 + 2<<20
	type flip struct {
		at      int
		want    error
		segment int64
	}
	flips := []flip{
		{0, ErrUnknownFormat, -1}, {3, ErrUnknownFormat, -1},
		{4, ErrUnsupportedVersion, -1}, {5, ErrUnsupportedVersion, -1}, {7, ErrUnsupportedVersion, -1},
		{8, ErrCorrupted, -1}, // Tink's header length byte
	}
	for _, at := range []int{9, 20, 40, 41, 47, 48, 49, 1000, s0 / 2, s0 - 17, s0 - 16, s0 - 1} {
		flips = append(flips, flip{at, ErrAuthFirstSegment, 0}) // salt, nonce prefix, segment 0 and its tag
	}
	for _, at := range []int{s0, s0 + 1, s0 + 1<<19, s1 - 16, s1 - 1} {
		flips = append(flips, flip{at, ErrCorrupted, 1})
	}
	for _, at := range []int{s1, s1 + 500, len(blob) - 16, len(blob) - 1} {
		flips = append(flips, flip{at, ErrCorrupted, 2})
	}
	for _, f := range flips {
		for bit := range 8 {
			if bit != 0 && bit != 7 {
				continue
			}
			bad := bytes.Clone(blob)
			bad[f.at] ^= 1 << bit
			for _, src := range sources {
				t.Run(fmt.Sprintf("%d.%d/%s", f.at, bit, src.name), func(t *testing.T) {
					checkFailure(t, src.open(bad), pt, f.want, f.segment)
				})
			}
		}
	}
}

func TestV2WrongKeyOrIdentity(t *testing.T) {
	for _, size := range []int{0, 1000, v2FirstPlaintext + 1} {
		pt := plaintext(size)
		blob := encryptV2(t, testKey, testIdentity, pt)
		otherKey := testKey
		otherKey[31] ^= 1
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			if _, err := Decrypt(bytes.NewReader(blob), otherKey, testIdentity); !errors.Is(err, ErrAuthFirstSegment) || !errors.Is(err, ErrAuth) {
				t.Errorf("wrong key: %v", err)
			}
			if _, err := Decrypt(bytes.NewReader(blob), testKey, "bob.agents.eth"); !errors.Is(err, ErrAuthFirstSegment) {
				t.Errorf("wrong identity: %v", err)
			}
			if _, err := Decrypt(bytes.NewReader(blob), testKey, ""); err == nil {
				t.Errorf("empty identity accepted")
			}
		})
	}
}

func TestV2ErrorMessages(t *testing.T) {
	pt := plaintext(v2FirstPlaintext + v2Plaintext + 1000)
	blob := encryptV2(t, testKey, testIdentity, pt)
	otherKey := testKey
	otherKey[0] ^= 1
	_, errKey := Decrypt(bytes.NewReader(blob), otherKey, testIdentity)
	bad := bytes.Clone(blob)
	bad[8+1<<20+100] ^= 1
	_, errMid := decryptAll(bytes.NewReader(bad), testKey, testIdentity)
	_, errCut := decryptAll(onlyReader{bytes.NewReader(blob[:8+2<<20])}, testKey, testIdentity)
	_, errPlain := Decrypt(bytes.NewReader([]byte(`{"agent": "alice"}`)), testKey, testIdentity)
	tests := []struct {
		err  error
		want string
	}{
		{errKey, "cipher: first segment does not authenticate: wrong key, wrong agent identity, or a corrupted blob (indistinguishable by design)"},
		{errMid, "cipher: blob corrupted or tampered with: segment 1 (blob offset 1048584) does not authenticate"},
		{errCut, "cipher: blob truncated: it ends exactly at a segment boundary (blob offset 2097160) and its last segment 1 does not authenticate as the final one; most likely the rest of the blob is missing (or that segment is corrupted)"},
		{errPlain, "cipher: not a hermesd encrypted blob: first bytes 7b 22 61 67 65 6e 74 22 (looks like JSON text); refusing to treat it as plaintext"},
	}
	for _, tt := range tests {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("error\n got %v\nwant %s", tt.err, tt.want)
		}
	}
}

func TestDetect(t *testing.T) {
	tar := make([]byte, 512)
	copy(tar, "brain/notes.md")
	copy(tar[257:], "ustar\x0000")
	tests := []struct {
		in     []byte
		format Format
		err    error
		hint   string
	}{
		{[]byte("HRMS\x02\x00\x00\x00"), FormatV2, nil, ""},
		{[]byte{1, 0, 0, 0}, FormatV1, nil, ""},
		{[]byte{1, 0, 0, 0, 9, 9, 9, 9}, FormatV1, nil, ""},
		{nil, FormatUnknown, ErrTruncated, "empty"},
		{[]byte("HRM"), FormatUnknown, ErrTruncated, ""},
		{[]byte("HRMS\x02"), FormatUnknown, ErrTruncated, ""},
		{[]byte{1, 0}, FormatUnknown, ErrTruncated, ""},
		{[]byte("HRMS\x03\x00\x00\x00"), FormatUnknown, ErrUnsupportedVersion, "version 3"},
		{[]byte("HRMS\x02\x00\x01\x00"), FormatUnknown, ErrUnsupportedVersion, "reserved"},
		{[]byte{2, 0, 0, 0, 5, 5, 5, 5}, FormatUnknown, ErrUnknownFormat, "unknown version 2"},
		{[]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0}, FormatUnknown, ErrUnknownFormat, "gzip"},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, FormatUnknown, ErrUnknownFormat, "zstd"},
		{[]byte("  [1,2]"), FormatUnknown, ErrUnknownFormat, "JSON"},
		{[]byte("hello world"), FormatUnknown, ErrUnknownFormat, "text"},
		{tar, FormatUnknown, ErrUnknownFormat, "unencrypted tar"},
		{append([]byte{0x28, 0x99}, make([]byte, 60)...), FormatUnknown, ErrUnknownFormat, "raw Tink"},
		{[]byte{0x00, 0xff, 0x10, 0x80}, FormatUnknown, ErrUnknownFormat, "unrecognised"},
	}
	for _, tt := range tests {
		f, err := Detect(tt.in)
		if f != tt.format || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("Detect(% x) = %v, %v; want %v, %v", tt.in[:min(len(tt.in), 8)], f, err, tt.format, tt.err)
			continue
		}
		if err != nil && !bytes.Contains([]byte(err.Error()), []byte(tt.hint)) {
			t.Errorf("Detect(% x) error %q lacks %q", tt.in[:min(len(tt.in), 8)], err, tt.hint)
		}
	}
	// Decrypt reads enough to recognise a plaintext tar.
	if _, err := Decrypt(bytes.NewReader(tar), testKey, testIdentity); !errors.Is(err, ErrUnknownFormat) || !bytes.Contains([]byte(err.Error()), []byte("tar")) {
		t.Errorf("Decrypt(tar) = %v", err)
	}
}

func TestProbeIdentity(t *testing.T) {
	small := encryptV2(t, testKey, "bob.eth", plaintext(100))
	big := encryptV2(t, testKey, "bob.eth", plaintext(v2FirstPlaintext+5))
	boundary := encryptV2(t, testKey, "bob.eth", plaintext(v2FirstPlaintext))
	for name, blob := range map[string][]byte{"small": small, "big": big, "boundary": boundary} {
		t.Run(name, func(t *testing.T) {
			counter := &countingReader{r: bytes.NewReader(blob)}
			id, err := ProbeIdentity(counter, testKey, []string{"alice.eth", "bob.eth", "carol.eth"})
			if err != nil || id != "bob.eth" {
				t.Fatalf("ProbeIdentity = %q, %v", id, err)
			}
			if counter.n > 8+1<<20+1 {
				t.Errorf("read %d bytes, more than header + one segment + 1", counter.n)
			}
			_, err = ProbeIdentity(bytes.NewReader(blob), testKey, []string{"alice.eth", "carol.eth"})
			if !errors.Is(err, ErrAuthFirstSegment) {
				t.Errorf("no match: %v", err)
			}
			other := testKey
			other[5] ^= 0x40
			if _, err := ProbeIdentity(bytes.NewReader(blob), other, []string{"bob.eth"}); !errors.Is(err, ErrAuthFirstSegment) {
				t.Errorf("wrong key: %v", err)
			}
		})
	}
	// Probing a truncated-at-boundary blob (treated as final) must still work
	// for the segment itself only when it is genuinely final: cut "big" at
	// the boundary and the first segment no longer authenticates as final.
	if _, err := ProbeIdentity(bytes.NewReader(big[:8+1<<20]), testKey, []string{"bob.eth"}); !errors.Is(err, ErrAuthFirstSegment) {
		t.Errorf("cut big: %v", err)
	}
	if _, err := ProbeIdentity(bytes.NewReader(small[:50]), testKey, []string{"bob.eth"}); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v", err)
	}
	v1, err := SealV1(testKey, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ProbeIdentity(bytes.NewReader(v1), testKey, []string{"bob.eth"}); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("v1: %v", err)
	}
	if _, err := ProbeIdentity(bytes.NewReader([]byte("plain text")), testKey, []string{"bob.eth"}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("plaintext: %v", err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// closeRecorder is a writer that fails after limit bytes and records Close.
type closeRecorder struct {
	bytes.Buffer
	limit  int
	closed bool
}

var errDisk = errors.New("disk full")

func (w *closeRecorder) Write(p []byte) (int, error) {
	if w.limit >= 0 && w.Len()+len(p) > w.limit {
		return 0, errDisk
	}
	return w.Buffer.Write(p)
}

func (w *closeRecorder) Close() error { w.closed = true; return nil }

func TestV2WriterContract(t *testing.T) {
	dst := &closeRecorder{limit: -1}
	w, err := Encrypt(dst, testKey, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if dst.closed {
		t.Error("Close closed dst")
	}
	if err := w.Close(); err == nil {
		t.Error("second Close succeeded")
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded")
	}

	// A failing destination: the error is sticky.
	dst = &closeRecorder{limit: 100}
	w, err = Encrypt(dst, testKey, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Write(make([]byte, 3<<20))
	if !errors.Is(err, errDisk) {
		t.Fatalf("Write = %v", err)
	}
	if _, again := w.Write([]byte("x")); again != err {
		t.Errorf("Write after failure = %v, want the sticky %v", again, err)
	}
	if again := w.Close(); again != err {
		t.Errorf("Close after failure = %v, want the sticky %v", again, err)
	}

	if _, err := Encrypt(io.Discard, testKey, ""); err == nil {
		t.Error("empty identity accepted")
	}
	if _, err := Encrypt(io.Discard, testKey, "bad\xff"); err == nil {
		t.Error("invalid UTF-8 identity accepted")
	}
}

// TestV2WriteAllocs checks that small writes do not allocate: Tink copies them
// into its segment buffer and reuses its ciphertext buffer.
func TestV2WriteAllocs(t *testing.T) {
	w, err := Encrypt(io.Discard, testKey, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4096)
	w.Write(make([]byte, 3<<20)) // let the buffers reach their steady state
	if allocs := testing.AllocsPerRun(2000, func() { w.Write(p) }); allocs != 0 {
		t.Errorf("%v allocations per 4 KiB Write", allocs)
	}
	r, err := Decrypt(bytes.NewReader(encryptV2(t, testKey, testIdentity, plaintext(8<<20))), testKey, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	io.CopyN(io.Discard, r, 2<<20)
	if allocs := testing.AllocsPerRun(1000, func() { r.Read(p) }); allocs != 0 {
		t.Errorf("%v allocations per 4 KiB Read", allocs)
	}
}
