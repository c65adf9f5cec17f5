package snapshot_test

import (
	"testing"

	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// TestAgentKeyFor: an own key wins over the master key; without one the
// key is derived from the master key and the identity (so two agents of
// one master key have different keys); without either there is none.
func TestAgentKeyFor(t *testing.T) {
	master, _ := cipher.GenerateKey()
	own := repo.NewAgentKey([repo.KeySize]byte{9})
	derived := repo.DeriveAgentKey([repo.KeySize]byte(master), "alpha.hermes.eth")
	for _, tc := range []struct {
		desc   string
		master cipher.Key
		own    *repo.AgentKey
		want   string // key id, "" = none
	}{
		{"own over master", master, &own, own.ID()},
		{"own alone", cipher.Key{}, &own, own.ID()},
		{"derived", master, nil, derived.ID()},
		{"none", cipher.Key{}, nil, ""},
	} {
		got := snapshot.AgentKeyFor(tc.master, tc.own, "alpha.hermes.eth")
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: key %s, want none", tc.desc, got.ID())
		case tc.want != "" && (got == nil || got.ID() != tc.want):
			t.Errorf("%s: key %v, want id %s", tc.desc, got, tc.want)
		}
	}
	if k := snapshot.AgentKeyFor(master, nil, "beta.hermes.eth"); k.ID() == derived.ID() {
		t.Error("two identities, one derived key")
	}
}
