package ens

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/nodetest"
)

// TestPeersResolutionTests reproduces, on the local chain, every case of
// ENS's cross-library suite ensdomains/resolution-tests that applies to a
// text record, and resolves each with hermesd (registry walk and Universal
// Resolver) and with viem (pinned; it always goes through the Universal
// Resolver). They must agree. The suite's cases run against mainnet names;
// here each name is rebuilt with the same layout:
//
//	forward-text-onchain   integration-tests.eth, avatar, on its own PublicResolver
//	universal-resolver     ur.integration-tests.eth, description: a resolver that
//	                       answers "✅️ Universal Resolver" only through the UR
//	forward-wildcard       moo331.nft-owner.eth under an on-chain extended resolver
//	                       (the suite asks addr; here a text record)
//	forward-text-offchain  test.offchaindemo.eth, description, through ENS's
//	                       OffchainResolver and its gateway (GET; and a POST twin)
//
// plus the negative cases of ENSIP-10 and an offchain record the gateway
// does not have.
func TestPeersResolutionTests(t *testing.T) {
	w := newCCIPWorld(t)
	ctx := t.Context()
	dev := w.chain.DevAddress()
	const (
		avatar    = "https://raw.githubusercontent.com/ensdomains/resolution-tests/refs/heads/main/assets/avatar.svg"
		urOK      = "✅️ Universal Resolver"
		urWrong   = "❌️ Universal Resolver"
		offchain  = "asdflkjasdflkjasdf"
		wildValue = "moo331's snapshot"
	)
	if err := w.chain.RegisterWithResolver(ctx, "integration-tests.eth", dev, w.chain.ResolverAddress()); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.SetText(ctx, nil, w.chain.ResolverAddress(), "integration-tests.eth", "avatar", avatar); err != nil {
		t.Fatal(err)
	}
	check, err := w.chain.DeployURCheckResolver(ctx, w.ur)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(ctx, "ur.integration-tests.eth", dev, check); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(ctx, "nft-owner.eth", dev, w.wildcard); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.SetText(ctx, nil, w.wildcard, "moo331.nft-owner.eth", "description", wildValue); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(ctx, "offchaindemo.eth", dev, w.offGet); err != nil {
		t.Fatal(err)
	}
	if err := w.chain.RegisterWithResolver(ctx, "offchaindemo-post.eth", dev, w.offPost); err != nil {
		t.Fatal(err)
	}
	w.records.Set("test.offchaindemo.eth", "description", offchain)
	w.records.Set("test.offchaindemo-post.eth", "description", offchain)

	none := "<none>"
	cases := []struct {
		id, name, key string
		want          string // through the Universal Resolver (hermesd and viem)
		walk          string // hermesd walking the registry, when it differs
	}{
		{id: "forward-text-onchain", name: "integration-tests.eth", key: "avatar", want: avatar},
		{id: "universal-resolver", name: "ur.integration-tests.eth", key: "description", want: urOK, walk: urWrong},
		{id: "forward-wildcard", name: "moo331.nft-owner.eth", key: "description", want: wildValue},
		{id: "forward-text-offchain", name: "test.offchaindemo.eth", key: "description", want: offchain},
		{id: "forward-text-offchain (POST gateway)", name: "test.offchaindemo-post.eth", key: "description", want: offchain},
		{id: "wildcard under a resolver that is not extended", name: "child.plain.eth", key: "description", want: none},
		{id: "offchain record the gateway lacks", name: "missing.offchaindemo.eth", key: "description", want: none},
		{id: "on-chain record unset", name: "integration-tests.eth", key: "url", want: none},
	}
	walker, universal := w.reader(t, common.Address{}, nil), w.reader(t, w.ur, nil)
	hermesd := func(c *Client, name, key string) string {
		res, err := c.res.Text(ctx, name, key)
		switch {
		case errors.Is(err, ErrNoPointer), errors.Is(err, ErrNameNotFound):
			return none
		case err != nil:
			return "error: " + err.Error()
		case res.Value == "":
			return none
		}
		return res.Value
	}
	var tasks []map[string]string
	for _, c := range cases {
		tasks = append(tasks, map[string]string{"name": c.name, "key": c.key})
	}
	peer := runViem(t, map[string]any{"rpc": w.chain.URL(), "universalResolver": w.ur.Hex(), "cases": tasks})
	agreed := 0
	for i, c := range cases {
		wantWalk := c.want
		if c.walk != "" {
			wantWalk = c.walk
		}
		gotWalk, gotUR := hermesd(walker, c.name, c.key), hermesd(universal, c.name, c.key)
		gotViem := none
		switch {
		case peer[i].Error != "":
			gotViem = "error: " + peer[i].Error
		case peer[i].Value != nil && *peer[i].Value != "":
			gotViem = *peer[i].Value
		}
		if gotUR != c.want || gotViem != c.want || gotWalk != wantWalk {
			t.Errorf("%s (%s %s): hermesd via UR %q, viem %q (want %q); hermesd walking the registry %q (want %q)",
				c.id, c.name, c.key, gotUR, gotViem, c.want, gotWalk, wantWalk)
			continue
		}
		agreed++
		t.Logf("%-48s %-28s %q: hermesd (UR) = viem = %q", c.id, c.name, c.key, gotUR)
	}
	t.Logf("hermesd and viem agree on %d of %d cases", agreed, len(cases))
}

type viemResult struct {
	Value *string `json:"value"`
	Error string  `json:"error"`
}

// runViem runs testdata/viem.mjs with the pinned viem (installed by
// scripts/fetch-ens-tools.sh, which needCCIPArtifacts runs when missing).
func runViem(t *testing.T, task map[string]any) []viemResult {
	t.Helper()
	tools, err := devchain.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "viem", "package.json")); err != nil {
		t.Fatalf("viem is not installed in %s (scripts/fetch-ens-tools.sh): %v", tools, err)
	}
	var res []viemResult
	nodetest.RunModule(t, tools, filepath.Join("testdata", "viem.mjs"), "the peer tests' viem", task, &res)
	return res
}
