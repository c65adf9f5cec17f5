package localwalrus

import (
	"bytes"
	"sync"
)

// forgeries are the ids whose reads Forge answers with other bytes.
type forgeries struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (f *forgeries) get(id string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.m[id]
	return b, ok
}

// Forge makes the aggregator answer every read of id — a blob id, read
// whole or in ranges, or a quilt patch id — with content instead of the
// bytes id names, as a hostile aggregator may: say, an agent's older
// snapshot under its newer one's id. Everything else about the answer is
// as for the true bytes: the status, Content-Range over content's length,
// the ETag naming id (a patch's quilt, as the daemon sends it). A nil
// content ends the forgery. The store is not touched.
func (s *Server) Forge(id string, content []byte) {
	s.forged.mu.Lock()
	defer s.forged.mu.Unlock()
	if content == nil {
		delete(s.forged.m, id)
		return
	}
	if s.forged.m == nil {
		s.forged.m = map[string][]byte{}
	}
	s.forged.m[id] = bytes.Clone(content)
}
