package ens

import (
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/hermesd/hermesd/internal/ensname"
)

// TextKey is the text record that holds the newest snapshot's blob id.
const TextKey = "agent-snapshot"

// Normalize returns the ENSIP-15 normalised form of name; an invalid one
// is an error wrapping ErrInvalidName (see package ensname).
func Normalize(name string) (string, error) { return ensname.Normalize(name) }

// Readable is ensname.Readable.
func Readable(s string) (shown string, escaped bool) { return ensname.Readable(s) }

// Node returns the namehash of name after normalising it.
func Node(name string) (common.Hash, error) {
	norm, err := Normalize(name)
	if err != nil {
		return common.Hash{}, err
	}
	return nameHash(norm), nil
}

// nameHash is the ENS namehash of an already normalised name. go-ens's
// NameHash is not used because it re-normalises with IDNA rules.
func nameHash(norm string) common.Hash {
	var node common.Hash
	if norm == "" {
		return node
	}
	labels := strings.Split(norm, ".")
	for i := len(labels) - 1; i >= 0; i-- {
		node = crypto.Keccak256Hash(node[:], crypto.Keccak256([]byte(labels[i])))
	}
	return node
}
