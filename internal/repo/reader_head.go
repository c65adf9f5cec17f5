package repo

// HeadSize returns the size of the head pack: the blob the agent's pointer
// names (its end epoch is the store's to tell, not the commit's).
func (r *Reader) HeadSize() int64 { return r.head.ref.Size }
