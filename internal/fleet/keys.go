package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The fleet's keys in etcd, below /hermesd/<fleet>/:
//
//	nodes/<node>     NodeInfo, bound to the node's lease
//	owners/<agent>   Owner, bound to the owner's lease; its create
//	                 revision is the ownership token
//	heads/<agent>    Head, no lease: survives every node
//	handoffs/<agent> Handoff, bound to the giver's lease, while one runs
//	drain/<node>     "", bound to the drained node's lease
const (
	nodesDir    = "nodes/"
	ownersDir   = "owners/"
	headsDir    = "heads/"
	handoffsDir = "handoffs/"
	drainDir    = "drain/"
)

// maxValue bounds a value read from etcd: a node record lists every
// agent, the others are small.
const maxValue = 1 << 20

// Prefix is the key prefix of fleet name.
func Prefix(fleet string) string { return "/hermesd/" + fleet + "/" }

// NodeInfo is a node's registration.
type NodeInfo struct {
	Node    string    `json:"node"`
	API     string    `json:"api,omitempty"`
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
	// Agents are the agents whose keys the node loaded: the ones it may
	// own.
	Agents []string `json:"agents"`
	// Missing says, for each agent it cannot open, why (its key).
	Missing map[string]string `json:"missing,omitempty"`
	// Draining: the node is leaving; it takes nothing.
	Draining bool `json:"draining,omitempty"`
}

// Owner is an agent's owner key.
type Owner struct {
	Node  string    `json:"node"`
	Lease int64     `json:"lease"`
	Since time.Time `json:"since"`
}

// Head is an agent's fleet head: its newest verified snapshot, written by
// its owner on every verified snapshot.
type Head struct {
	// Value names the snapshot as the pointer package names it (the
	// ENS record's value form).
	Value      string    `json:"value"`
	BundleHash string    `json:"bundleHash"`
	Version    int64     `json:"version"`
	CreatedAt  time.Time `json:"createdAt,omitzero"`
	// Node and Token are the owner that wrote it.
	Node  string    `json:"node"`
	Token int64     `json:"token"`
	At    time.Time `json:"at"`
	// Published is what the writer last knew the ENS record to hold.
	Published string `json:"published,omitempty"`
}

// Handoff is a hand-off in flight.
type Handoff struct {
	From  string    `json:"from"`
	To    string    `json:"to,omitempty"`
	Since time.Time `json:"since"`
	Step  string    `json:"step"`
}

// decode parses a JSON value read from etcd, bounded.
func decode(b []byte, v any) error {
	if len(b) > maxValue {
		return fmt.Errorf("value of %d bytes (at most %d)", len(b), maxValue)
	}
	return json.Unmarshal(b, v)
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // our own types
	}
	return string(b)
}

// name returns the last component of key below dir, or "" when key is
// not below dir.
func name(prefix, dir, key string) string {
	rest, ok := strings.CutPrefix(key, prefix+dir)
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return ""
	}
	return rest
}
