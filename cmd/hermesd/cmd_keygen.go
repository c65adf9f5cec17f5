package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/hermesd/hermesd/internal/cipher"
)

const keygenHelp = `Generate a random 32-byte snapshot encryption key (AES-256) and write it to
FILE as 43 characters of base64url, mode 0600. The key itself is never
printed, and an existing FILE is never overwritten. Point the daemon at it
with "encryption: {key: {file: FILE}}" in the configuration, and keep a copy
somewhere safe: without the key no snapshot can be restored.`

// runKeygen writes a new key file and prints its path.
func runKeygen(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "keygen", "keygen -o FILE [--json]", keygenHelp)
	out := fs.String("o", "", "write the key to `FILE`, which must not exist (required)")
	asJSON := fs.Bool("json", false, "print {\"path\", \"format\"} as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageErrorf("keygen: unexpected argument %q (the output file goes after -o)", fs.Arg(0))
	case *out == "":
		return usageErrorf("keygen: -o FILE is required: keys are written to a file, never printed")
	case *out == "-":
		return usageErrorf("keygen: -o - is not supported: keys are written to a file, never printed")
	}
	path, err := filepath.Abs(*out)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	key, err := cipher.GenerateKey()
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := cipher.WriteKeyFile(path, key); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(env.stdout).Encode(struct {
			Path   string `json:"path"`
			Format string `json:"format"`
		}{path, "base64url-32"})
	}
	_, err = fmt.Fprintln(env.stdout, path)
	return err
}
