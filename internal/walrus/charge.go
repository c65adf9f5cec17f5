package walrus

import (
	"strconv"
	"strings"

	"github.com/hermesd/hermesd/internal/walruscost"
)

// quiltOverhead is what a quilt may add to each patch beside its bytes
// and identifier (a blob header, tags) and to each index entry, with room
// to spare: the bound on a quilt's size must hold for Walrus's QuiltV1
// encoding and any like it (walruscost.QuiltSize).
const quiltOverhead = 256

// storeEpochs is the epochs a store with opts asks for.
func (c *Client) storeEpochs(opts []StoreOption) int {
	so := storeOptions{epochs: c.cfg.Epochs}
	for _, opt := range opts {
		opt(&so)
	}
	return so.epochs
}

// quiltEncodedBound is the largest encoded length of a quilt of parts
// over shards: the encoded length of the largest quilt blob that holds
// them (0 when none can).
func quiltEncodedBound(parts []QuiltPart, shards int) uint64 {
	sizes := make([]uint64, len(parts))
	var ident uint64
	for i, p := range parts {
		sizes[i] = uint64(max(p.Body.Size(), 0))
		ident = max(ident, uint64(len(p.Identifier)))
	}
	size, err := walruscost.QuiltSize(sizes, quiltOverhead+2*ident, shards)
	if err != nil {
		return 0
	}
	enc, err := walruscost.EncodedLength(size, shards)
	if err != nil {
		return 0
	}
	return enc
}

// checkCharge holds what a newlyCreated answer says the store cost to
// what Walrus's own formula allows: at most the epochs asked for, at most
// encoded (the encoded length of what was sent, computed), and at most
// its cost at Config.Price for those epochs. The blob itself was stored
// (its read-back decides whether it is good); only the bill is not
// believed: figures above the bound are recorded at the bound, listed in
// r.Clamped and said in a warning.
func (c *Client) checkCharge(r *StoreResult, encoded uint64, epochs int) {
	if r.AlreadyCertified {
		return
	}
	var over []string
	if epochs >= 0 && r.EpochsPaid > uint32(epochs) {
		over = append(over, "epochs paid "+strconv.FormatUint(uint64(r.EpochsPaid), 10)+" > "+strconv.Itoa(epochs)+" asked for")
		r.EpochsPaid = uint32(epochs)
	}
	paid := uint64(r.EpochsPaid)
	bound := walruscost.NewBlob(encoded, paid, c.cfg.Price.Cost(encoded, paid))
	got, more := r.Charge().Within(bound)
	r.EncodedLength, r.Cost = got.EncodedBytes, got.FROST
	if over = append(over, more...); len(over) == 0 {
		return
	}
	r.Clamped = strings.Join(over, "; ")
	c.log.Warn("walrus: a store answer reports more than Walrus's formula allows for what was sent; its figures are recorded at the formula's bound",
		"blob_id", r.BlobID, "publisher", r.Publisher, "over", r.Clamped,
		"shards", c.cfg.Shards, "storage_price", c.cfg.Price.Storage, "write_price", c.cfg.Price.Write)
}
