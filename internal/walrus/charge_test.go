package walrus_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/walrus"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// maxU64 is 2^64−1 as a JSON number.
const maxU64 = json.Number("18446744073709551615")

// inflate rewrites a newlyCreated answer (a blob's, or a quilt's
// blobStoreResult) to claim 2^64−1 encoded bytes and FROST and 53 epochs.
func inflate(m map[string]any) any {
	res := m
	if q, ok := m["blobStoreResult"].(map[string]any); ok {
		res = q
	}
	nc := res["newlyCreated"].(map[string]any)
	nc["cost"] = maxU64
	nc["blobObject"].(map[string]any)["storage"].(map[string]any)["storageSize"] = maxU64
	nc["resourceOperation"] = map[string]any{"registerFromScratch": map[string]any{"encodedLength": maxU64, "epochsAhead": 53}}
	return m
}

// TestStoreChargeHeldToFormula: a publisher that says a store cost 2^64−1
// FROST for 2^64−1 encoded bytes over 53 epochs is not believed: the
// charge is the formula's for the bytes sent and the epochs asked for,
// at the configured prices, and a warning names the publisher. Honest
// answers (the local server charges by the formula) pass untouched.
func TestStoreChargeHeldToFormula(t *testing.T) {
	s := startServer(t, localwalrus.Config{})
	u, _ := hostilePublisher(t, s, inflate, nil)
	var logs syncBuffer
	c := newClient(t, s, walrus.Config{Publishers: []string{u}, Aggregators: []string{s.URL()}, Logger: logs.logger()})
	honest := newClient(t, s, walrus.Config{})

	r, err := c.Store(t.Context(), genBody{seed: 1, size: 17}, walrus.WithEpochs(5))
	if err != nil {
		t.Fatal(err)
	}
	least, err := walruscost.EncodedLength(0, testShards)
	if err != nil {
		t.Fatal(err)
	}
	want := walruscost.NewBlob(least, 5, walruscost.DefaultPrice.Cost(least, 5))
	want.Clamped = true
	if got := r.Charge(); got != want || r.Clamped == "" {
		t.Errorf("blob: charge %+v (%q), want %+v", got, r.Clamped, want)
	}
	if l := logs.String(); !strings.Contains(l, "more than Walrus's formula allows") || !strings.Contains(l, "epochs paid 53 > 5") ||
		!strings.Contains(l, "publisher=http://127.0.0.1:") {
		t.Errorf("no warning naming the publisher:\n%s", l)
	}

	parts := quiltParts(3000, 50_000, 100)
	q, err := c.StoreQuilt(t.Context(), parts, walrus.WithEpochs(3))
	if err != nil {
		t.Fatal(err)
	}
	sizes := []uint64{3000, 50_000, 100}
	qsize, err := walruscost.QuiltSize(sizes, 256+2*4, testShards)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := walruscost.Bound(qsize, 3, testShards, walruscost.DefaultPrice)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Charge(); !got.Clamped || got.EncodedBytes != bound.EncodedBytes || got.FROST != bound.FROST || got.EncodedByteEpochs != bound.EncodedByteEpochs {
		t.Errorf("quilt: charge %+v, want the bound %+v", got, bound)
	}

	// Honest answers of every shape stay as they were.
	for _, n := range []int64{0, 1, 445_556, 445_557, 3 << 20} {
		r, err := honest.Store(t.Context(), genBody{seed: uint64(n) + 100, size: n}, walrus.WithEpochs(4))
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := walruscost.EncodedLength(uint64(n), testShards)
		if r.Clamped != "" || r.EncodedLength != enc || r.Cost != walruscost.DefaultPrice.Cost(enc, 4) {
			t.Errorf("honest %d bytes: %+v", n, r)
		}
	}
	small := make([]int64, 60) // a quilt over 100 shards holds at most 66
	for i := range small {
		small[i] = int64(i * 37)
	}
	for i, sizes := range [][]int64{{1}, {3000, 0, 70_000}, append(small, 4<<20), {1 << 20, 1 << 20, 2 << 20}} {
		q, err := honest.StoreQuilt(t.Context(), quiltParts(sizes...), walrus.WithEpochs(2+i))
		if err != nil {
			t.Fatal(err)
		}
		if q.Clamped != "" || q.EncodedLength == 0 || q.Cost == 0 {
			t.Errorf("honest quilt %d: clamped %q, %+v", i, q.Clamped, q.StoreResult)
		}
	}
}
