package fleettest

import (
	"bytes"
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/devchain"
	"github.com/hermesd/hermesd/internal/ens"
)

// textChanged is PublicResolver's TextChanged(bytes32 indexed node,
// string indexed indexedKey, string key): it does not carry the value,
// which is read from the transaction's calldata (setText, or setText
// calls inside a multicall).
var (
	textChanged = crypto.Keccak256Hash([]byte("TextChanged(bytes32,string,string)"))
	textKeyHash = crypto.Keccak256Hash([]byte(ens.TextKey))
)

// recordHistory reads every write of the agents' records on a chain, in
// chain order: names maps each agent's namehash to its id. sent says who
// sent each transaction (the proxies' log).
func recordHistory(ctx context.Context, ch *devchain.Chain, chain string, names map[common.Hash]string, sent map[string]sentTx) ([]RecordWrite, error) {
	cl := ch.Client()
	logs, err := cl.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: big.NewInt(0),
		Addresses: []common.Address{ch.ResolverAddress()},
		Topics:    [][]common.Hash{{textChanged}, nil, {textKeyHash}},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: TextChanged logs: %w", chain, err)
	}
	rabi := ch.Artifacts().Resolver.ABI
	values := map[common.Hash]map[common.Hash]string{} // tx → namehash → value
	var out []RecordWrite
	for _, l := range logs {
		agent, ok := names[l.Topics[1]]
		if !ok {
			continue
		}
		vs, ok := values[l.TxHash]
		if !ok {
			tx, _, err := cl.TransactionByHash(ctx, l.TxHash)
			if err != nil {
				return nil, fmt.Errorf("%s: transaction %s: %w", chain, l.TxHash, err)
			}
			vs = map[common.Hash]string{}
			calls := [][]byte{tx.Data()}
			if m, ok := rabi.Methods["multicall"]; ok && bytes.HasPrefix(tx.Data(), m.ID) {
				args, err := m.Inputs.Unpack(tx.Data()[4:])
				if err != nil || len(args) != 1 {
					return nil, fmt.Errorf("%s: multicall %s: %v", chain, l.TxHash, err)
				}
				calls, _ = args[0].([][]byte)
			}
			set := rabi.Methods["setText"]
			for _, c := range calls {
				if !bytes.HasPrefix(c, set.ID) {
					continue
				}
				args, err := set.Inputs.Unpack(c[4:])
				if err != nil || len(args) != 3 {
					return nil, fmt.Errorf("%s: setText in %s: %v", chain, l.TxHash, err)
				}
				node, _ := args[0].([32]byte)
				key, _ := args[1].(string)
				if key == ens.TextKey {
					vs[common.Hash(node)], _ = args[2].(string)
				}
			}
			values[l.TxHash] = vs
		}
		v, ok := vs[l.Topics[1]]
		if !ok {
			return nil, fmt.Errorf("%s: transaction %s changed %s's record without a setText it carries", chain, l.TxHash, agent)
		}
		s := sent[l.TxHash.Hex()]
		out = append(out, RecordWrite{Agent: agent, Value: v, Chain: chain, Block: l.BlockNumber, Index: l.Index, TxHash: l.TxHash.Hex(), Node: s.node, Sent: s.at})
	}
	return out, nil
}
