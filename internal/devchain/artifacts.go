package devchain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
)

// EnvArtifacts names the environment variable that points at the directory
// holding ENSRegistry.json and PublicResolver.json.
const EnvArtifacts = "HERMESD_ENS_ARTIFACTS"

// File names inside the artifacts directory.
const (
	RegistryFile = "ENSRegistry.json"
	ResolverFile = "PublicResolver.json"
)

// fetchHint tells a user how to get the artifacts; every "missing" error
// carries it.
const fetchHint = "fetch them with scripts/fetch-ens-artifacts.sh [DIR] in a checkout of hermesd " +
	"(npm pack @ensdomains/ens@0.6.2 @ensdomains/resolver@0.3.1, then build/contracts/ENSRegistry.json and " +
	"PublicResolver.json into DIR; default ~/.cache/hermesd/ens), or point $HERMESD_ENS_ARTIFACTS at them"

// Pinned keccak256 of the creation bytecode of the exact npm versions. Gas
// figures and storage layout (the genesis registry slot) depend on the exact
// bytecode, so another build is refused rather than silently used.
var (
	registryCodeHash = common.HexToHash("0x48dff83b2f78d74b310a4d8d1ad6a2df4ef0b4ea1cccce9be7fa9da7ac04c9e8")
	resolverCodeHash = common.HexToHash("0xb84ce754bbef04b125d1db0b63bfcca771d34cf808f1aef7c00c81ce4a8dda9f")
)

// maxArtifactSize bounds an artifact file (the resolver's, with its AST, is
// about 0.9 MB).
const maxArtifactSize = 32 << 20

// Artifact is one compiled contract.
type Artifact struct {
	Name             string
	ABI              abi.ABI
	Bytecode         []byte // creation code (constructor + runtime)
	DeployedBytecode []byte // runtime code
}

// Artifacts are the two ENS contracts the chain deploys.
type Artifacts struct {
	Dir      string
	Registry Artifact // ENSRegistry, @ensdomains/ens@0.6.2
	Resolver Artifact // PublicResolver, @ensdomains/resolver@0.3.1
}

// cache holds one parsed set per directory: tests start many chains and
// the JSON (1.3 MB with ASTs) is parsed once per process.
var cache sync.Map // absolute dir -> *cacheEntry[Artifacts]

// LoadArtifacts reads and checks the artifacts in dir ("" = DefaultArtifactsDir).
// Results are cached per directory for the life of the process.
func LoadArtifacts(dir string) (*Artifacts, error) {
	return loadCached(&cache, dir, loadArtifacts)
}

type cacheEntry[T any] struct {
	once sync.Once
	v    *T
	err  error
}

// loadCached runs load once per absolute directory (dir "" is
// DefaultArtifactsDir) for the life of the process, keeping its result in m.
func loadCached[T any](m *sync.Map, dir string, load func(string) (*T, error)) (*T, error) {
	if dir == "" {
		d, err := DefaultArtifactsDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("devchain: artifacts dir: %w", err)
	}
	v, _ := m.LoadOrStore(abs, new(cacheEntry[T]))
	e := v.(*cacheEntry[T])
	e.once.Do(func() { e.v, e.err = load(abs) })
	return e.v, e.err
}

func loadArtifacts(dir string) (*Artifacts, error) {
	reg, err := readArtifact(filepath.Join(dir, RegistryFile), "ENSRegistry", registryCodeHash)
	if err != nil {
		return nil, err
	}
	res, err := readArtifact(filepath.Join(dir, ResolverFile), "PublicResolver", resolverCodeHash)
	if err != nil {
		return nil, err
	}
	return &Artifacts{Dir: dir, Registry: *reg, Resolver: *res}, nil
}

// truffleArtifact is the part of a truffle build artifact we use.
type truffleArtifact struct {
	ContractName     string          `json:"contractName"`
	ABI              json.RawMessage `json:"abi"`
	Bytecode         string          `json:"bytecode"`
	DeployedBytecode string          `json:"deployedBytecode"`
}

func readArtifact(path, want string, pin common.Hash) (*Artifact, error) {
	raw, err := readArtifactFile(path, fetchHint)
	if err != nil {
		return nil, err
	}
	return parseArtifact(path, raw, want, &pin)
}

// readArtifactFile reads at most maxArtifactSize+1 bytes of path; a
// missing file is an error that says what to run (hint).
func readArtifactFile(path, hint string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("devchain: ENS artifact %s is missing: %s", path, hint)
		}
		return nil, fmt.Errorf("devchain: open artifact: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxArtifactSize+1))
	if err != nil {
		return nil, fmt.Errorf("devchain: read artifact %s: %w", path, err)
	}
	return raw, nil
}

// parseArtifact parses a truffle or hardhat artifact holding contract want;
// pin, when set, is the keccak256 its creation bytecode must have.
func parseArtifact(path string, raw []byte, want string, pin *common.Hash) (*Artifact, error) {
	if len(raw) > maxArtifactSize {
		return nil, fmt.Errorf("devchain: artifact %s is larger than %d bytes", path, maxArtifactSize)
	}
	var t truffleArtifact
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("devchain: parse artifact %s: %w (%s)", path, err, fetchHint)
	}
	if t.ContractName != want {
		return nil, fmt.Errorf("devchain: artifact %s holds contract %q, want %q (%s)", path, t.ContractName, want, fetchHint)
	}
	parsed, err := abi.JSON(strings.NewReader(string(t.ABI)))
	if err != nil {
		return nil, fmt.Errorf("devchain: artifact %s: abi: %w", path, err)
	}
	code, err := hexutil.Decode(t.Bytecode)
	if err != nil || len(code) == 0 {
		return nil, fmt.Errorf("devchain: artifact %s: bad bytecode (%s)", path, fetchHint)
	}
	runtime, err := hexutil.Decode(t.DeployedBytecode)
	if err != nil || len(runtime) == 0 {
		return nil, fmt.Errorf("devchain: artifact %s: bad deployedBytecode (%s)", path, fetchHint)
	}
	if got := crypto.Keccak256Hash(code); pin != nil && got != *pin {
		return nil, fmt.Errorf("devchain: artifact %s: bytecode hash %s is not the pinned build %s (%s)", path, got, *pin, fetchHint)
	}
	return &Artifact{Name: want, ABI: parsed, Bytecode: code, DeployedBytecode: runtime}, nil
}

// DefaultArtifactsDir finds the ENS artifacts, in this order:
// $HERMESD_ENS_ARTIFACTS; .deps/ens in the nearest directory above the
// working directory that has one (a checkout of hermesd, where `make deps`
// puts them); the user's cache, ~/.cache/hermesd/ens ($XDG_CACHE_HOME),
// where scripts/fetch-ens-artifacts.sh puts them by default outside a
// checkout. It fails with what to run when none has them.
func DefaultArtifactsDir() (string, error) {
	if d := os.Getenv(EnvArtifacts); d != "" {
		return d, nil
	}
	has := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, RegistryFile))
		return err == nil
	}
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; {
			cand := filepath.Join(dir, ".deps", "ens")
			if has(cand) {
				return cand, nil
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				tried = append(tried, cand)
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				tried = append(tried, filepath.Join(wd, ".deps", "ens")+" (and above)")
				break
			}
			dir = parent
		}
	}
	if cache, err := os.UserCacheDir(); err == nil {
		cand := filepath.Join(cache, "hermesd", "ens")
		if has(cand) {
			return cand, nil
		}
		tried = append(tried, cand)
	}
	return "", fmt.Errorf("devchain: no ENS artifacts in %s: %s", strings.Join(tried, ", "), fetchHint)
}
