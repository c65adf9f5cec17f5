// Package devchain runs a local Ethereum chain inside the process, with the
// real ENS contracts deployed, for tests and the devnet.
//
// The chain is a go-ethereum node (no peer-to-peer networking) driven by a
// simulated beacon that seals a block as soon as a transaction arrives. It
// serves JSON-RPC over HTTP on 127.0.0.1 only (eth, net and web3, as geth's
// --http), so code under test talks to it exactly as it would to a public
// endpoint.
//
// Invariants:
//   - Fee and gas rules are mainnet's as of Osaka (+ the BPO1/BPO2 blob
//     schedule), with EIP-1559 base fees; later forks (Amsterdam, Bogota and
//     their state-gas repricing) are off, so gas figures match mainnet.
//   - The ENS registry (@ensdomains/ens 0.6.2 ENSRegistry) lives at the
//     canonical mainnet address, placed there by the genesis allocation with
//     the dev key as the root owner; a PublicResolver (@ensdomains/resolver
//     0.3.1) is in the genesis as well, constructed by running its real
//     constructor once in a throwaway EVM.
//   - The contract artifacts are third-party bytecode fetched at set-up by
//     scripts/fetch-ens-artifacts.sh; they are read from disk (never
//     embedded), checked against pinned hashes and parsed once per process.
//   - The CCIP-read layouts (deployed on request, never in the genesis):
//     ENS's OffchainResolver (npm, pinned) with Gateway, an EIP-3668
//     gateway signing with a devnet key, and the project's own contracts in
//     contracts/ (a Universal-Resolver-compatible contract, an on-chain
//     wildcard resolver, test resolvers), compiled at set-up by
//     scripts/fetch-ens-tools.sh with a pinned solc and refused when
//     compiled from another source than the one committed here.
//   - ChainRecords answers a Gateway's lookups from a resolver on another
//     chain (the devnet's L2) at its head or lagging by N blocks; the
//     gateway's request decoding (DecodeResolveCall, ParseTextLookup) treats
//     every request as hostile and is fuzzed.
//   - A chain without a data directory lives in memory and is as fast as
//     go-ethereum allows. A chain with one is crash-safe: every block's
//     state trie is committed with the block (hash state scheme, archive),
//     the database's write-ahead log is fsynced after each block, and no
//     RPC request runs between a block becoming head and that sync. A
//     transaction whose receipt a client saw is therefore on disk, and a
//     start after kill -9 resumes at the last durable head or refuses the
//     directory (ErrDamaged) with what to do; it never rewinds silently.
package devchain
