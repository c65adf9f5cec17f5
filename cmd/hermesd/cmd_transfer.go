package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"

	"github.com/hermesd/hermesd/internal/handover"
)

const transferHelp = `Hand an agent to a new owner. The buyer's side:
  request AGENT    make an age identity file (mode 0600) and print its
                   recipient (age1…) for the seller to encrypt the
                   handover to
  show HANDOVER    decrypt a handover with --identity and print what it
                   names (agent, ENS name, token, head snapshot, bundle
                   hash, key id; never the key)
And the seller's:
  export AGENT     take, verify and publish a final snapshot and write the
                   handover for the buyer's recipient (--to, -o FILE)

The handover is an age file (https://age-encryption.org): the age CLI
reads it too, with 'age -d -i IDENTITY HANDOVER'. Run 'hermesd transfer
SUBCOMMAND -h' for its flags.`

func runTransfer(ctx context.Context, env *cmdEnv, args []string) error {
	return group{name: "transfer", tail: "[flags]", help: transferHelp, verbs: []command{
		{name: "request", run: runTransferRequest},
		{name: "show", run: runTransferShow},
		{name: "export", run: runTransferExport},
	}}.run(ctx, env, args)
}

var transferAgentRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

const transferRequestHelp = `Start buying an agent: write a new age identity to FILE (mode 0600; an
existing file is never overwritten) and print its recipient (age1…) on
standard output. Send the recipient to the seller, who encrypts the
agent's handover to it. Keep FILE: it is the only key that opens the
handover, and the configuration names it (agents[].key.identity).`

// runTransferRequest makes the buyer's identity file.
func runTransferRequest(_ context.Context, env *cmdEnv, args []string) error {
	fset := newFlagSet(env, "transfer request", "transfer request AGENT [--identity FILE] [--json]", transferRequestHelp)
	idFile := fset.String("identity", "", "write the identity to `FILE` (default AGENT.transfer.key in the current directory)")
	asJSON := fset.Bool("json", false, `print {"agent", "identity", "recipient"} as one JSON object`)
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("transfer request: want one AGENT, got %d arguments", len(pos))
	}
	agent := pos[0]
	if !transferAgentRe.MatchString(agent) {
		return usageErrorf("transfer request: agent %q must be 1-64 characters of a-z, 0-9, '.', '_' or '-' (the id it will have in your configuration)", sanitize(agent))
	}
	path := *idFile
	if path == "" {
		path = agent + ".transfer.key"
	}
	if path, err = filepath.Abs(path); err != nil {
		return fmt.Errorf("transfer request: %w", err)
	}
	recipient, err := handover.NewIdentityFile(path, "hermesd transfer request for agent "+agent)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return usageErrorf("transfer request: %v", err)
		}
		return fmt.Errorf("transfer request: %w", err)
	}
	if *asJSON {
		return newJSONEncoder(env.stdout).Encode(struct {
			Agent     string `json:"agent"`
			Identity  string `json:"identity"`
			Recipient string `json:"recipient"`
		}{agent, path, recipient})
	}
	fmt.Fprintf(env.stderr, "wrote identity %s (mode 0600; keep it, it opens the handover)\n"+
		"send this recipient to the seller of %s:\n", path, agent)
	_, err = fmt.Fprintln(env.stdout, recipient)
	return err
}

const transferShowHelp = `Decrypt a handover with your identity file and print what it names, without
the key: check the agent, its ENS name, token, head snapshot and bundle
hash before you configure it. A handover that opens was written for your
identity and is intact; anyone who knows your recipient can write one, so
what it names is the seller's claim until the chain agrees (the name is
yours and its record names the head).`

// transferView is what show prints: the handover without its key.
type transferView struct {
	Agent      string  `json:"agent"`
	Identity   string  `json:"identity"`
	ENSName    string  `json:"ensName"`
	TokenID    *uint64 `json:"tokenId"`
	Head       string  `json:"head"`
	BundleHash string  `json:"bundleHash"`
	KeyID      string  `json:"keyId"`
	Created    string  `json:"created"`
	Seller     string  `json:"seller"`
}

// runTransferShow decrypts and prints a handover.
func runTransferShow(_ context.Context, env *cmdEnv, args []string) error {
	fset := newFlagSet(env, "transfer show", "transfer show --identity FILE [--json] HANDOVER", transferShowHelp)
	idFile := fset.String("identity", "", "age identity `FILE` from 'hermesd transfer request' (required)")
	asJSON := fset.Bool("json", false, "print the handover (without the key) as one JSON object")
	pos, err := parseInterspersed(fset, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usageErrorf("transfer show: want one HANDOVER file, got %d arguments", len(pos))
	case *idFile == "":
		return usageErrorf("transfer show: --identity FILE is required")
	}
	ids, err := handover.ReadIdentityFile(*idFile)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("transfer show: %w", err))
	}
	h, err := handover.OpenFile(pos[0], ids...)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return withCode(exitNotFound, fmt.Errorf("transfer show: %w", err))
	case errors.Is(err, handover.ErrWrongIdentity), errors.Is(err, handover.ErrCorrupt):
		return withCode(exitAuth, fmt.Errorf("transfer show: %w", err))
	case errors.Is(err, handover.ErrInvalid), errors.Is(err, handover.ErrTooLarge):
		return withCode(exitMismatch, fmt.Errorf("transfer show: %w", err))
	case err != nil:
		return fmt.Errorf("transfer show: %w", err)
	}
	v := transferView{
		Agent: h.Agent, Identity: h.Identity, ENSName: h.ENSName, TokenID: h.TokenID, Head: h.Head,
		BundleHash: h.BundleHash.String(), KeyID: h.KeyID(), Created: h.Created.UTC().Format("2006-01-02T15:04:05Z"),
		Seller: h.Seller.Hex(),
	}
	if *asJSON {
		return newJSONEncoder(env.stdout).Encode(v)
	}
	token := "none"
	if v.TokenID != nil {
		token = fmt.Sprint(*v.TokenID)
	}
	_, err = fmt.Fprintf(env.stdout, "agent:       %s\nens name:    %s\ntoken id:    %s\nhead:        %s\nbundle hash: %s\nkey id:      %s\ncreated:     %s\nseller:      %s\n",
		sanitize(v.Agent), sanitize(v.ENSName), token, v.Head, v.BundleHash, v.KeyID, v.Created, v.Seller)
	return err
}
