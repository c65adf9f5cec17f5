package devchain

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/ethereum/go-ethereum/common"
)

// The resolvers of ENS's CCIP-read and wildcard layouts. OffchainResolver
// is ENS's (npm @ensdomains/offchain-resolver-contracts@0.2.1, fetched by
// scripts/fetch-ens-artifacts.sh); the others are the project's own
// contracts in contracts/, compiled at set-up by scripts/fetch-ens-tools.sh
// with a pinned solc, since ENS's own Universal Resolver is not on npm.
const (
	OffchainResolverFile  = "OffchainResolver.json"
	UniversalResolverFile = "UniversalResolver.json"
	WildcardResolverFile  = "WildcardResolver.json"
	URCheckResolverFile   = "URCheckResolver.json"
	LoopResolverFile      = "LoopResolver.json"
)

// offchainResolverCodeHash pins the creation bytecode of
// @ensdomains/offchain-resolver-contracts@0.2.1's OffchainResolver.
var offchainResolverCodeHash = common.HexToHash("0xd74ff3768805a507696e84c030408d3a2213e554021cde7495cf98e5bfae06b6")

//go:embed contracts/*.sol
var contractSources embed.FS

const ccipFetchHint = "run scripts/fetch-ens-artifacts.sh and scripts/fetch-ens-tools.sh in a checkout of hermesd (make deps does both)"

// CCIPArtifacts are the resolvers of the offchain, wildcard and Universal
// Resolver layouts.
type CCIPArtifacts struct {
	Dir string
	// OffchainResolver is ENS's CCIP-read resolver: constructor(string
	// url, address[] signers); its gateway signs every answer.
	OffchainResolver Artifact
	// UniversalResolver is the project's Universal-Resolver-compatible
	// contract: constructor(address registry, string[] batchGateways).
	UniversalResolver Artifact
	// WildcardResolver is an on-chain extended (ENSIP-10) resolver.
	WildcardResolver Artifact
	// URCheckResolver answers differently through a Universal Resolver.
	URCheckResolver Artifact
	// LoopResolver is a hostile resolver for tests: nested lookups, a
	// sender mismatch.
	LoopResolver Artifact
}

var ccipCache sync.Map // absolute dir -> *cacheEntry[CCIPArtifacts]

var offchainCache sync.Map // absolute dir -> *cacheEntry[Artifact]

// LoadOffchainResolver reads and checks ENS's OffchainResolver alone
// (fetched with the other ENS artifacts by scripts/fetch-ens-artifacts.sh,
// so the devnet's L2 layout needs no compiler): what the devnet deploys.
func LoadOffchainResolver(dir string) (*Artifact, error) {
	return loadCached(&offchainCache, dir, func(dir string) (*Artifact, error) {
		off, err := readArtifact(filepath.Join(dir, OffchainResolverFile), "OffchainResolver", offchainResolverCodeHash)
		if err != nil {
			return nil, err
		}
		return off, nil
	})
}

// LoadCCIPArtifacts reads and checks the CCIP-read artifacts in dir ("" =
// DefaultArtifactsDir): the OffchainResolver against its pinned bytecode,
// the project's compiled contracts against the sources committed here (an
// artifact built from another source is refused, with what to run).
// Results are cached per directory for the life of the process.
func LoadCCIPArtifacts(dir string) (*CCIPArtifacts, error) {
	return loadCached(&ccipCache, dir, loadCCIPArtifacts)
}

func loadCCIPArtifacts(dir string) (*CCIPArtifacts, error) {
	a := &CCIPArtifacts{Dir: dir}
	off, err := readArtifact(filepath.Join(dir, OffchainResolverFile), "OffchainResolver", offchainResolverCodeHash)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, ccipFetchHint)
	}
	a.OffchainResolver = *off
	for _, c := range []struct {
		file string
		dst  *Artifact
	}{
		{UniversalResolverFile, &a.UniversalResolver},
		{WildcardResolverFile, &a.WildcardResolver},
		{URCheckResolverFile, &a.URCheckResolver},
		{LoopResolverFile, &a.LoopResolver},
	} {
		art, err := readOwnArtifact(filepath.Join(dir, c.file))
		if err != nil {
			return nil, err
		}
		*c.dst = *art
	}
	return a, nil
}

// readOwnArtifact reads an artifact compiled from contracts/ and checks
// that it was compiled from the source committed here.
func readOwnArtifact(path string) (*Artifact, error) {
	name := filepath.Base(path)
	name = name[:len(name)-len(filepath.Ext(name))]
	src, err := contractSources.ReadFile("contracts/" + name + ".sol")
	if err != nil {
		return nil, fmt.Errorf("devchain: no source for %s: %w", name, err)
	}
	sum := sha256.Sum256(src)
	raw, err := readArtifactFile(path, ccipFetchHint)
	if err != nil {
		return nil, err
	}
	var meta struct {
		SourceSha256 string `json:"sourceSha256"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("devchain: parse artifact %s: %w (%s)", path, err, ccipFetchHint)
	}
	if meta.SourceSha256 != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("devchain: %s was compiled from another version of contracts/%s.sol: %s", path, name, ccipFetchHint)
	}
	return parseArtifact(path, raw, name, nil)
}

var needOnce struct {
	sync.Once
	err error
}

// NeedCCIPArtifacts is for tests in a checkout of hermesd: it loads the
// CCIP-read artifacts, and when they are missing or stale first runs the
// set-up scripts (scripts/fetch-ens-artifacts.sh and
// scripts/fetch-ens-tools.sh, which fetch pinned npm packages and compile
// the contracts) once per process.
func NeedCCIPArtifacts() (*CCIPArtifacts, error) {
	needOnce.Do(func() {
		if _, err := LoadCCIPArtifacts(""); err == nil {
			return
		}
		root, err := checkoutRoot()
		if err != nil {
			needOnce.err = err
			return
		}
		for _, s := range []string{"fetch-ens-artifacts.sh", "fetch-ens-tools.sh"} {
			cmd := exec.Command(filepath.Join(root, "scripts", s))
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				needOnce.err = fmt.Errorf("devchain: scripts/%s: %v: %s", s, err, out)
				return
			}
		}
		// A failed load is cached per directory; load afresh.
		ccipCache.Clear()
	})
	if needOnce.err != nil {
		return nil, needOnce.err
	}
	return LoadCCIPArtifacts("")
}

// ToolsDir is where scripts/fetch-ens-tools.sh installs the pinned npm
// tools (solc, viem) in the checkout of hermesd above the working
// directory.
func ToolsDir() (string, error) {
	root, err := checkoutRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".deps", "ens-tools"), nil
}

// checkoutRoot is the nearest directory above the working directory with a
// go.mod.
func checkoutRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("devchain: no checkout of hermesd (go.mod) above the working directory")
		}
		dir = parent
	}
}
