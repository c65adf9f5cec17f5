package ens

import (
	"fmt"
	"strings"

	"github.com/adraffy/go-ens-normalize/ensip15"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// TextKey is the text record that holds the newest snapshot's blob id.
const TextKey = "agent-snapshot"

// Normalize returns the ENSIP-15 normalised form of name ("Agent.ETH" →
// "agent.eth"). A name ENSIP-15 rejects (empty labels, disallowed or
// mixed-script characters, "xn--" labels, underscores not at the start, ...)
// is an error that wraps ErrInvalidName and ensip15's reason.
func Normalize(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	norm, err := ensip15.Shared().Normalize(name)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrInvalidName, name, err)
	}
	return norm, nil
}

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
