package seal_test

import (
	"net/http/httptest"
	"testing"

	"github.com/hermesd/hermesd/internal/seal"
	"github.com/hermesd/hermesd/internal/sealserver"
)

// testNet is n local key servers (httptest, 127.0.0.1) and a configuration
// for them, with weights and a policy.
type testNet struct {
	cfg     seal.Config
	masters []*seal.MasterKey
	servers []*sealserver.Server
	https   []*httptest.Server
	user    *seal.SuiKey
	pkg     seal.Address
}

var testPkg = seal.MustParseAddress("0xc0ffee")

func newTestNet(t testing.TB, weights []int, threshold int, policy func(i int, user seal.Address) sealserver.Policy) *testNet {
	t.Helper()
	user, err := seal.GenerateSuiKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNet{user: user, pkg: testPkg}
	tn.cfg = seal.Config{PackageID: testPkg, Threshold: threshold}
	for i, w := range weights {
		mk, err := seal.GenerateMasterKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		p := sealserver.Open()
		if policy != nil {
			p = policy(i, user.Address())
		}
		id := seal.Address{0: 0x5e, 31: byte(i + 1)}
		srv, err := sealserver.New(sealserver.Config{ObjectID: id, MasterKey: mk, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		ks := srv.KeyServer(hs.URL)
		ks.Weight = w
		tn.cfg.Servers = append(tn.cfg.Servers, ks)
		tn.masters = append(tn.masters, mk)
		tn.servers = append(tn.servers, srv)
		tn.https = append(tn.https, hs)
	}
	return tn
}

func (tn *testNet) session(t testing.TB) *seal.SessionKey {
	t.Helper()
	sk, err := seal.NewSessionKey(tn.user, tn.pkg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

// usks derives every server's user secret key for an object directly from
// the master keys.
func (tn *testNet) usks(o *seal.EncryptedObject) map[seal.Address]*seal.UserSecretKey {
	out := map[seal.Address]*seal.UserSecretKey{}
	for i, mk := range tn.masters {
		out[tn.cfg.Servers[i].ObjectID] = mk.Extract(o.FullID())
	}
	return out
}

func (tn *testNet) pks() map[seal.Address]seal.PublicKey {
	out := map[seal.Address]seal.PublicKey{}
	for _, s := range tn.cfg.Servers {
		out[s.ObjectID] = s.PublicKey
	}
	return out
}

var approve = seal.Approve{Module: "allowlist"}
