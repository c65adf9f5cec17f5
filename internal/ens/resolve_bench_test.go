package ens

import (
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// BenchmarkResolve measures one resolution of an agent-snapshot record per
// layout, over HTTP JSON-RPC to the local chain and HTTP to a local
// gateway (so it shows the calls and round trips each layout makes, not
// a public network's latency).
func BenchmarkResolve(b *testing.B) {
	w := newCCIPWorld(b)
	ctx := b.Context()
	if _, err := w.client.Write(ctx, "agent.eth", blobID(1), ""); err != nil {
		b.Fatal(err)
	}
	if err := w.chain.SetText(ctx, nil, w.wildcard, "agent.wild.eth", TextKey, blobID(2)); err != nil {
		b.Fatal(err)
	}
	w.records.Set("agent.offchain.eth", TextKey, blobID(3))
	w.records.Set("agent.offchain-post.eth", TextKey, blobID(3))
	walk, ur := w.reader(b, common.Address{}, nil), w.reader(b, w.ur, nil)
	for _, bc := range []struct {
		name string
		c    *Client
		ens  string
	}{
		{"onchain/registry", walk, "agent.eth"},
		{"onchain/universal", ur, "agent.eth"},
		{"wildcard/registry", walk, "agent.wild.eth"},
		{"wildcard/universal", ur, "agent.wild.eth"},
		{"ccip-get/registry", walk, "agent.offchain.eth"},
		{"ccip-post/registry", walk, "agent.offchain-post.eth"},
		{"ccip-get/universal", ur, "agent.offchain.eth"},
		{"ccip-post/universal", ur, "agent.offchain-post.eth"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := bc.c.Read(ctx, bc.ens); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := bc.c.Read(ctx, bc.ens); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
