package snapshot

// ApprovePTB is the BCS of the seal_approve transaction a key request of s
// carries for the inner identity id (for the SDK interop test).
func (s *Sealing) ApprovePTB(id []byte) ([]byte, error) {
	p, err := s.approve().BuildPTB(s.Client.Config().PackageID, [][]byte{id})
	if err != nil {
		return nil, err
	}
	return p.MarshalBCS(), nil
}
