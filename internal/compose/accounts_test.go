package compose

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/ens"
)

// A multicall's gas is split equally among its updates, the remainder one
// unit each to the first: the shares add up to the receipt's gas used.
func TestFeeShare(t *testing.T) {
	price := big.NewInt(7)
	r := ens.UpdateResult{TxHash: common.Hash{1}, BatchSize: 3, TxGasUsed: 269_033, EffectiveGasPrice: price, ChainID: 8453}
	var gas uint64
	var share float64
	for k, want := range []uint64{89_678, 89_678, 89_677} {
		f := feeShare(r, k)
		if f == nil || f.Gas != want || f.ChainID != 8453 || f.GasPrice != price {
			t.Fatalf("update %d: %+v, want %d gas", k, f, want)
		}
		gas += f.Gas
		share += f.Share
	}
	if gas != r.TxGasUsed || share < 0.999999 || share > 1.000001 {
		t.Errorf("shares add up to %d gas, %v of the transaction", gas, share)
	}
	if feeShare(ens.UpdateResult{BatchSize: 1}, 0) != nil {
		t.Error("a share of a transaction that was not mined")
	}
}
