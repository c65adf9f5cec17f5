// Package ens reads and compare-and-sets the `agent-snapshot` ENS text
// record that points at an agent's newest snapshot blob, and transfers
// names between owners.
//
// It talks JSON-RPC (http, https, ws or wss) to any Ethereum node through
// go-ethereum's client. Reads resolve the name the way ENS specifies and
// wallets do (docs/design.md §7.1; Resolver, resolve.go): through the
// Universal Resolver when one is configured, else ENSIP-10 over the
// registry (the nearest resolver up the name; an extended resolver asked
// resolve(dnsName, text(node, key))), following EIP-3668 CCIP-read lookups
// to gateways (ccip.go), whose answers are hostile input bounded in size
// and time. Writes use go-ens's registry and resolver bindings:
// resolver.setText on the name's own resolver, resolver.multicall for
// several names that share one resolver, registry.setOwner to transfer a
// name.
//
// New does no network I/O and does not fail because the node is down: the
// chain checks (chain id against the configuration, a contract at the
// registry address) run on first use, are kept once they succeed and are
// retried by the next call after a failure. A call that cannot reach the
// node fails with an error matching ErrUnavailable, distinct from the
// definitive errors (wrong chain, no registry, not authorised, conflict,
// reverted); Ping probes for recovery.
//
// A records client (Config.Records) writes where a record lives when that
// is not the name's L1 resolver (docs/design.md §7.2): a contract named by
// address, on its own chain, with the PublicResolver's setText/text ABI
// (an L2 resolver or registry). Its compare-and-set reads text() from that
// contract; whether L1 resolution shows the value is its caller's to
// confirm (with a Client of the L1).
//
// WriteBatches publishes any number of updates: it checks every name, then
// sends the writable ones in the order given, in transactions sized by gas
// estimate to fit GasCap, and reports one outcome per update (published,
// unchanged, conflict with the value on chain, not authorised, not found,
// invalid, retry, failed).
//
// Invariants:
//   - Every name is normalised with ENSIP-15 before it is namehashed, the
//     same way on read and on write; a name ENSIP-15 rejects is an error
//     (go-ens's own IDNA normalisation accepts names ENSIP-15 rejects, and
//     decodes xn-- labels into a different namehash, so it is not used).
//   - A write is a compare-and-set: it reads the record first and sends
//     nothing unless the record holds the expected previous value. Between
//     that read and the transaction there is an unavoidable window (TOCTOU):
//     one process is the only writer per signing key (a process-wide nonce
//     manager per chain and address, plus the daemon's state-directory
//     lock); a writer on another host that races us is detected by our next
//     compare-and-set. WriteBatches reads each batch's records again just
//     before sending it, so the window stays one batch long.
//   - Nothing is sent that is known to fail: authorisation is checked first
//     (registry owner, the 0.3.1 resolver's authorisations, and for other
//     resolver models a gas estimate, which executes the real check; for a
//     transfer, the registry owner or its approved operator), since the
//     contracts' bare require()s revert with no reason. A batch too large
//     for the gas cap is split, never reported as "would revert".
//   - Transactions are EIP-1559, nonces come from one counter per signer
//     and chain, and a receipt with status 0 is an error (go-ethereum's
//     WaitMined does not check status). A resolver gets multicall batches
//     only when it has multicall(bytes[]) (probed once per address).
//   - Every read of a pointer, the compare-and-set of a write included,
//     goes through one Resolver, so all of hermesd sees what a fresh
//     machine resolving the name would. What a resolver's callback accepts
//     from a gateway is the value; the blob it names is verified by the
//     caller as always, so a gateway can deny service or serve an older
//     value, never a wrong brain. A gateway that cannot be reached is
//     ErrGatewayUnavailable (an ErrUnavailable: retried); anything else it
//     or the lookup gets wrong is an ErrOffchain, never "no record".
//   - Every request to the node is bounded (RPCTimeout, 8 MiB answers; at
//     most 16 in flight per node, over as many kept connections, however
//     many agents ask at once) and every error it causes is scrubbed: the RPC URL's path, query and
//     userinfo (where providers put API keys) never reach an error or a log
//     line, only its scheme://host[:port]. Key material is never logged or
//     put into an error either.
package ens
