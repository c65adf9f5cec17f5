// Package ens reads and compare-and-sets the `agent-snapshot` ENS text
// record that points at an agent's newest snapshot blob.
//
// It talks JSON-RPC to any Ethereum node (go-ethereum's ethclient) and uses
// go-ens's registry and resolver bindings: registry.resolver(node) finds the
// name's own resolver, resolver.text(node, "agent-snapshot") reads the
// record, resolver.setText writes it, and resolver.multicall batches several
// names that share one resolver into a single transaction.
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
//     compare-and-set.
//   - Nothing is sent that is known to fail: authorisation is checked first
//     (registry owner, the 0.3.1 resolver's authorisations, and for other
//     resolver models a gas estimate, which executes the real check), since a
//     resolver's bare require() reverts with no reason.
//   - Transactions are EIP-1559, nonces come from one counter per signer,
//     and a receipt with status 0 is an error (go-ethereum's WaitMined does
//     not check status).
//   - Key material is never logged or put into an error.
package ens
