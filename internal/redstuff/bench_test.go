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
	}{{1000, 17}, {1000, 1 << 20}, {1000, 10 << 20}, {1000, 64 << 20}, {10, 1 << 20}} {
		b.Run(fmt.Sprintf("shards=%d/size=%d", c.shards, c.size), func(b *testing.B) {
			blob := make([]byte, c.size)
			rand.New(rand.NewSource(1)).Read(blob)
			b.SetBytes(int64(c.size))
			for b.Loop() {
				if _, err := Compute(context.Background(), bytes.NewReader(blob), int64(len(blob)), c.shards); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
