package redstuff

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
)

func BenchmarkCompute(b *testing.B) {
	for _, c := range []struct {
		shards int
		size   int
		spill  bool // recovery columns in a scratch file (Options.ScratchDir)
	}{{1000, 17, false}, {1000, 20 << 10, false}, {1000, 1 << 20, false}, {1000, 10 << 20, false}, {1000, 64 << 20, false}, {1000, 64 << 20, true}, {10, 1 << 20, false}} {
		name := fmt.Sprintf("shards=%d/size=%d", c.shards, c.size)
		if c.spill {
			name += "/scratch-file"
		}
		b.Run(name, func(b *testing.B) {
			blob := make([]byte, c.size)
			rand.New(rand.NewSource(1)).Read(blob)
			var o Options
			if c.spill {
				o.ScratchDir = b.TempDir()
			}
			b.SetBytes(int64(c.size))
			for b.Loop() {
				if _, err := ComputeWith(context.Background(), bytes.NewReader(blob), int64(len(blob)), c.shards, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
