package seal

import "encoding/hex"

// Exports for the external tests (package seal_test).

// CLIVectorKeys returns the SealCLI.mdx user secret keys, public keys and
// full ID (hex strings, full ID bytes).
func CLIVectorKeys() (usks, pks []string, fullID []byte) {
	id, _ := hex.DecodeString(cliVector.id)
	return cliVector.userKeys, cliVector.publicKeys, FullID(Address{}, id)
}
