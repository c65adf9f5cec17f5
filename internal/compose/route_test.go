package compose

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/config"
)

// RouteOf maps the resolver L1 resolution reaches a name through onto an
// ens.records entry by its l1_resolver (docs/design.md §7.4).
func TestRouteOf(t *testing.T) {
	off, pub := common.HexToAddress("0x00000000000000000000000000000000000000b2"), common.HexToAddress("0x00000000000000000000000000000000000000a1")
	full := &config.Config{ENS: config.ENS{Records: []config.RecordsTarget{{ID: "l2", L1Resolver: off.Hex()}}}}
	partial := &config.Config{ENS: config.ENS{Records: []config.RecordsTarget{{ID: "l2", L1Resolver: off.Hex()}, {ID: "base"}}}}
	for _, tc := range []struct {
		name       string
		cfg        *config.Config
		resolver   common.Address
		configured string
		target     string
		known      bool
	}{
		{"an entry's l1_resolver", full, off, "", "l2", true},
		{"an entry's l1_resolver, configured there", full, off, "l2", "l2", true},
		{"another resolver, configured on L1", full, pub, "", "", true},
		{"another resolver, configured off L1: the router asks how it answers", full, pub, "l2", "", false},
		{"another resolver, an entry without l1_resolver", partial, pub, "", "", false},
		{"an entry's l1_resolver beside one without", partial, off, "base", "l2", true},
		{"no entries", &config.Config{}, pub, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if target, known := RouteOf(tc.cfg, tc.resolver, tc.configured); target != tc.target || known != tc.known {
				t.Fatalf("RouteOf = %q, %v; want %q, %v", target, known, tc.target, tc.known)
			}
		})
	}
}
