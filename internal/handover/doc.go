// Package handover is the file a seller gives the buyer of an agent
// (ERC-7857's "transfer re-encrypts the state for the receiver"): one
// JSON document naming the agent, its ENS name and token,
// the head snapshot the buyer restores and its bundle hash, and the
// agent's own v3 key (docs/format-v3.md §2) — never the seller's master
// key, so the seller's other agents stay unreadable.
//
// The document is encrypted with age (https://age-encryption.org/v1) to
// one X25519 recipient, the "age1…" string the buyer's `hermesd transfer
// request` prints, so the buyer can also inspect it with the age CLI:
//
//	age -d -i buyer.key agent.handover | jq .
//
// Open accepts both the binary and the armored ("-----BEGIN AGE ENCRYPTED
// FILE-----") encodings; Seal writes binary, as age does by default.
//
// What Open proves, and what it does not: age encrypts but does not
// authenticate the sender. Anyone who knows the buyer's recipient can
// write a well-formed handover, so a successful Open only means "this was
// written for your identity and is intact". The buyer trusts a handover
// because of the chain, not the file: the ENS name has moved to the
// buyer, its agent-snapshot record names Head, Head decrypts under Key and
// restores to BundleHash. Whatever adopts a handover must check exactly
// that; Seller is only the seller's claim, shown to the buyer.
//
// The plaintext, version "hermesd/handover/v1" (every field required,
// nothing else allowed, each key once, no trailing data):
//
//	{
//	  "format":      "hermesd/handover/v1",
//	  "agent":       "auditor",                 // the seller's agent id
//	  "identity":    "auditor.hermes.eth",      // the v3 identity (§2)
//	  "ens_name":    "auditor.hermes.eth",      // normalized; = identity
//	  "token_id":    7,                         // or null without an iNFT
//	  "head":        "<head reference>",        // the head pack to restore (docs/format-v3.md §14)
//	  "bundle_hash": "0x…",                     // keccak bundle hash of head
//	  "key":         "<43 characters>",         // the agent key, base64url
//	  "key_id":      "<16 hex digits>",         // its public key id (§2)
//	  "created":     "2026-09-01T12:00:00Z",    // RFC 3339, UTC
//	  "seller":      "0x…"                      // the seller's chain address
//	}
//
// The key id is the format's own (HKDF-SHA256 of the agent key with info
// "hermesd/v3 key id", 8 bytes; repo.AgentKey.ID), the id every v3 commit
// and pack header carries: the buyer can match it against the head without
// the key being shown. Open refuses a document whose key id does not
// belong to its key.
package handover
