//go:build tools

// This file pins the module's direct dependencies while the packages that use
// them are being written; it is never built.
package tools

import (
	_ "github.com/adraffy/go-ens-normalize/ensip15"
	_ "github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	_ "github.com/ethereum/go-ethereum/accounts/keystore"
	_ "github.com/ethereum/go-ethereum/core"
	_ "github.com/ethereum/go-ethereum/eth"
	_ "github.com/ethereum/go-ethereum/eth/catalyst"
	_ "github.com/ethereum/go-ethereum/ethclient"
	_ "github.com/ethereum/go-ethereum/ethclient/simulated"
	_ "github.com/ethereum/go-ethereum/node"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/hashicorp/go-retryablehttp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/tink-crypto/tink-go/v2/streamingaead/subtle"
	_ "github.com/wealdtech/go-ens/v3"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/crypto/sha3"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
)
