package ens

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Gas figures of the 0.3.1 PublicResolver under mainnet (Osaka) rules,
// measured independently before this code was written (43-character
// values).
// Under go-ethereum's dev default (Bogota state gas) a first write costs
// 366,279, so matching these shows the chain runs mainnet's rules.
var notesGas = map[string]uint64{
	"1 write, first":          101_919,
	"1 write, update":         47_819,
	"10 separate, first":      1_019_190,
	"10 separate, update":     478_190,
	"multicall of 10, first":  810_033,
	"multicall of 10, update": 269_033,
}

func fleet(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d.fleet.eth", prefix, i)
	}
	return names
}

// TestGasUnderOsakaRules prints what one pointer update costs and checks it
// against the figures measured before (notesGas). Calldata gas depends on
// how many zero bytes the namehashes contain, so names other than those
// measured may differ by a few dozen gas per name; more than 0.1% means
// other fee rules.
func TestGasUnderOsakaRules(t *testing.T) {
	sep, multi := fleet("s", 10), fleet("m", 10)
	e := newEnv(t, append(append([]string{"agent.eth"}, sep...), multi...)...)
	ctx := t.Context()
	got := make(map[string]uint64)
	write := func(name, value, expected string) uint64 {
		t.Helper()
		res, err := e.client.Write(ctx, name, value, expected)
		if err != nil {
			t.Fatal(err)
		}
		return res.GasUsed
	}
	got["1 write, first"] = write("agent.eth", blobID(1), "")
	got["1 write, update"] = write("agent.eth", blobID(2), blobID(1))
	for i, n := range sep {
		got["10 separate, first"] += write(n, blobID(i), "")
	}
	for i, n := range sep {
		got["10 separate, update"] += write(n, blobID(100+i), blobID(i))
	}
	many := func(values func(i int) (string, string)) uint64 {
		t.Helper()
		ups := make([]Update, len(multi))
		for i, n := range multi {
			v, exp := values(i)
			ups[i] = Update{Name: n, Value: v, Expected: exp}
		}
		res, err := e.client.WriteMany(ctx, ups)
		if err != nil {
			t.Fatal(err)
		}
		return res.GasUsed
	}
	got["multicall of 10, first"] = many(func(i int) (string, string) { return blobID(i), "" })
	got["multicall of 10, update"] = many(func(i int) (string, string) { return blobID(100 + i), blobID(i) })

	for _, k := range []string{"1 write, first", "1 write, update", "10 separate, first", "10 separate, update", "multicall of 10, first", "multicall of 10, update"} {
		want := notesGas[k]
		diff := float64(got[k])/float64(want) - 1
		t.Logf("%-24s %9d gas (notes %9d, %+.3f%%)", k, got[k], want, 100*diff)
		if diff > 0.001 || diff < -0.001 {
			t.Errorf("%s: %d gas, notes say %d: not mainnet (Osaka) rules?", k, got[k], want)
		}
	}
}

// BenchmarkPointerGas reports the gas of a pointer update (the daemon's
// steady state) as gas/op: one setText, and one 10-name multicall.
func BenchmarkPointerGas(b *testing.B) {
	names := fleet("b", 10)
	e := newEnv(b, append([]string{"agent.eth"}, names...)...)
	ctx := context.Background()
	b.Run("setText-update", func(b *testing.B) {
		prev, err := e.client.Read(ctx, "agent.eth")
		if errors.Is(err, ErrNoPointer) { // the first write is not an update
			prev = blobID(-1)
			if _, err := e.client.Write(ctx, "agent.eth", prev, ""); err != nil {
				b.Fatal(err)
			}
		}
		var gas uint64
		for i := 0; b.Loop(); i++ {
			v := blobID(1000 + i)
			res, err := e.client.Write(ctx, "agent.eth", v, prev)
			if err != nil {
				b.Fatal(err)
			}
			prev = v
			gas += res.GasUsed
		}
		b.ReportMetric(float64(gas)/float64(b.N), "gas/op")
	})
	b.Run("multicall10-update", func(b *testing.B) {
		prev := make([]string, len(names))
		for j, n := range names {
			prev[j], _ = e.client.Read(ctx, n)
			if prev[j] == "" {
				prev[j] = blobID(-2 - j)
				if _, err := e.client.Write(ctx, n, prev[j], ""); err != nil {
					b.Fatal(err)
				}
			}
		}
		var gas uint64
		for i := 0; b.Loop(); i++ {
			ups := make([]Update, len(names))
			for j, n := range names {
				ups[j] = Update{Name: n, Value: blobID(10000 + 100*i + j), Expected: prev[j]}
			}
			res, err := e.client.WriteMany(ctx, ups)
			if err != nil {
				b.Fatal(err)
			}
			for j := range ups {
				prev[j] = ups[j].Value
			}
			gas += res.GasUsed
		}
		b.ReportMetric(float64(gas)/float64(b.N), "gas/op")
	})
}
