package repo

import "encoding/json"

// MarshalJSON writes an empty file's chunk list as [] rather than null:
// the format says "chunks": [chunk ids] (docs/format-v3.md §7), and
// independent readers iterate it. (An empty receipts.ndjson, the daemon's
// first snapshot of an agent without receipts, is such a file.)
func (r FileRef) MarshalJSON() ([]byte, error) {
	type plain FileRef
	p := plain(r)
	if p.Chunks == nil {
		p.Chunks = []ID{}
	}
	return json.Marshal(p)
}
