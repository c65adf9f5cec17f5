// Package configs holds hermesd's sample configurations (devnet, Sepolia +
// Walrus testnet, mainnet), the systemd unit and a Kubernetes example. It
// has no code: its test loads every sample through internal/config, so a
// sample that drifts from the schema fails the build.
package configs
