package devchain

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/state"
	"github.com/ethereum/go-ethereum/core/tracing"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/core/vm"
	"github.com/ethereum/go-ethereum/core/vm/runtime"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
)

// RegistryAddress is the canonical ENS registry address (mainnet, Sepolia,
// Holesky), where the chain's registry lives.
var RegistryAddress = common.HexToAddress("0x00000000000C2E074eC69A0dFb2997BA6C7d2e1e")

// ResolverAddress is where the genesis PublicResolver lives: the first
// contract a fixed, keyless deployer would create. Nobody can send from that
// deployer, so the address can never collide with a later deployment.
var ResolverAddress = crypto.CreateAddress(genesisDeployer, 0)

var genesisDeployer = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// rootOwnerSlot is ENSRegistry's storage slot of records[0x0].owner:
// keccak256(bytes32(0) ‖ uint256(0)) (records is the first state variable).
var rootOwnerSlot = common.HexToHash("0xad3228b676f7d3cd4284a5443f17f1962b36e491b30a40b2405849e597ba5fb5")

// DefaultChainID is the chain id when Config.ChainID is zero (geth --dev's).
const DefaultChainID = 1337

// DefaultBalance is what every genesis-funded account gets: 1,000,000 ETH.
var DefaultBalance = new(big.Int).Mul(big.NewInt(1_000_000), big.NewInt(params.Ether))

// ChainConfig returns the fork configuration: every fork up to and including
// Osaka and the BPO1/BPO2 blob schedules active from genesis, like mainnet
// today, and nothing later. go-ethereum's dev config also switches on Bogota
// (EIP-8037 state gas, EIP-8038 state-access repricing), which more than
// triples the gas of a first setText; that is not what mainnet charges.
func ChainConfig(chainID uint64) *params.ChainConfig {
	cfg := *params.AllDevChainProtocolChanges
	cfg.ChainID = new(big.Int).SetUint64(chainID)
	zero := uint64(0)
	cfg.OsakaTime = &zero
	cfg.BPO1Time = &zero
	cfg.BPO2Time = &zero
	cfg.BPO3Time, cfg.BPO4Time, cfg.BPO5Time = nil, nil, nil
	cfg.AmsterdamTime = nil
	cfg.BogotaTime = nil
	cfg.UBTTime = nil
	mainnet := params.MainnetChainConfig.BlobScheduleConfig
	cfg.BlobScheduleConfig = &params.BlobScheduleConfig{
		Cancun: mainnet.Cancun,
		Prague: mainnet.Prague,
		BPO1:   mainnet.BPO1,
		BPO2:   mainnet.BPO2,
	}
	return &cfg
}

// randomExtra returns a random genesis extraData. It makes every chain a
// distinct network (its own genesis hash), so per-chain state kept by
// clients, such as nonce counters, never carries over from an earlier
// chain. A persistent chain reads its extraData back from its genesis
// header (see inspect).
func randomExtra() ([]byte, error) {
	extra := make([]byte, 32)
	if _, err := rand.Read(extra); err != nil {
		return nil, fmt.Errorf("devchain: genesis extra data: %w", err)
	}
	return extra, nil
}

// genesisContract is a contract's state right after its constructor ran.
type genesisContract struct {
	code    []byte
	storage map[common.Hash]common.Hash
}

var (
	resolverOnce sync.Once
	resolverGen  genesisContract
	resolverErr  error
)

// resolverGenesis runs PublicResolver's constructor with the canonical
// registry as argument, once per process.
func resolverGenesis(a *Artifacts) (genesisContract, error) {
	resolverOnce.Do(func() {
		args, err := a.Resolver.ABI.Pack("", RegistryAddress)
		if err != nil {
			resolverErr = fmt.Errorf("devchain: pack resolver constructor: %w", err)
			return
		}
		input := append(append([]byte{}, a.Resolver.Bytecode...), args...)
		resolverGen, resolverErr = construct(input)
	})
	return resolverGen, resolverErr
}

// construct runs creation code in a throwaway EVM under the chain's rules and
// returns the runtime code and every storage slot the constructor wrote. It
// suits constructors that only write their own storage (PublicResolver's
// stores the registry address); one that calls other contracts would see
// an empty state.
func construct(input []byte) (genesisContract, error) {
	statedb, err := state.New(types.EmptyRootHash, state.NewDatabaseForTesting())
	if err != nil {
		return genesisContract{}, fmt.Errorf("devchain: throwaway state: %w", err)
	}
	var (
		self    = crypto.CreateAddress(genesisDeployer, 0)
		written = make(map[common.Hash]bool)
	)
	hooks := &tracing.Hooks{
		OnOpcode: func(pc uint64, op byte, gas, cost uint64, scope tracing.OpContext, rData []byte, depth int, err error) {
			if vm.OpCode(op) != vm.SSTORE || scope.Address() != self {
				return
			}
			st := scope.StackData()
			if len(st) > 0 {
				written[common.Hash(st[len(st)-1].Bytes32())] = true
			}
		},
	}
	random := common.Hash{}
	code, addr, _, err := runtime.Create(input, &runtime.Config{
		ChainConfig: ChainConfig(DefaultChainID),
		Origin:      genesisDeployer,
		BlockNumber: new(big.Int),
		Random:      &random,
		BaseFee:     new(big.Int),
		GasLimit:    30_000_000,
		State:       statedb,
		EVMConfig:   vm.Config{Tracer: hooks},
	})
	if err != nil {
		return genesisContract{}, fmt.Errorf("devchain: run constructor: %w", err)
	}
	if addr != self {
		return genesisContract{}, fmt.Errorf("devchain: constructor ran at %s, want %s", addr, self)
	}
	storage := make(map[common.Hash]common.Hash, len(written))
	for slot := range written {
		if v := statedb.GetState(addr, slot); v != (common.Hash{}) {
			storage[slot] = v
		}
	}
	return genesisContract{code: code, storage: storage}, nil
}

// genesis assembles the genesis block: system contracts, funded accounts,
// the ENS registry (root owned by rootOwner) and the PublicResolver.
func genesis(chainID uint64, a *Artifacts, rootOwner common.Address, funded []common.Address, balance *big.Int, extra []byte) (*core.Genesis, error) {
	res, err := resolverGenesis(a)
	if err != nil {
		return nil, err
	}
	alloc := core.SystemContractAllocs()
	for _, addr := range funded {
		alloc[addr] = types.Account{Balance: new(big.Int).Set(balance)}
	}
	alloc[RegistryAddress] = types.Account{
		Nonce: 1,
		Code:  a.Registry.DeployedBytecode,
		Storage: map[common.Hash]common.Hash{
			rootOwnerSlot: common.BytesToHash(rootOwner.Bytes()),
		},
		Balance: new(big.Int),
	}
	alloc[ResolverAddress] = types.Account{
		Nonce:   1,
		Code:    res.code,
		Storage: res.storage,
		Balance: new(big.Int),
	}
	return &core.Genesis{
		Config:     ChainConfig(chainID),
		ExtraData:  extra,
		GasLimit:   60_000_000, // mainnet's block gas limit
		BaseFee:    big.NewInt(params.InitialBaseFee),
		Difficulty: new(big.Int),
		Alloc:      alloc,
	}, nil
}
