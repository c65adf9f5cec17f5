// Command ethkey creates or inspects the Ethereum key that signs hermesd's
// ENS pointer transactions on a testnet, so that the testnet kit needs no
// wallet software:
//
//	go run ./testnet/ethkey -o sepolia.key     # new key (0x + 64 hex, mode 0600); prints its address
//	go run ./testnet/ethkey -show sepolia.key  # prints the address of an existing key file
//	go run ./testnet/ethkey -env DEPLOYER_PRIVATE_KEY
//
// The key itself is never printed. Use a fresh key for testnets only.
package main

import (
	"crypto/ecdsa"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ethereum/go-ethereum/crypto"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "ethkey:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ethkey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "create a new key in `FILE` (must not exist)")
	show := fs.String("show", "", "print the address of the key in `FILE`")
	env := fs.String("env", "", "print the address of the key in environment variable `NAME`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n := 0
	for _, s := range []string{*out, *show, *env} {
		if s != "" {
			n++
		}
	}
	if n != 1 || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("give exactly one of -o, -show or -env")
	}
	var key *ecdsa.PrivateKey
	var err error
	switch {
	case *out != "":
		key, err = create(*out)
	case *show != "":
		var b []byte
		if b, err = os.ReadFile(*show); err == nil {
			key, err = parse(string(b))
		}
	default:
		v, ok := os.LookupEnv(*env)
		if !ok {
			return fmt.Errorf("environment variable %s is not set", *env)
		}
		key, err = parse(v)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, crypto.PubkeyToAddress(key.PublicKey).Hex())
	return nil
}

// create writes a new random key to path, refusing to overwrite anything.
func create(path string) (*ecdsa.PrivateKey, error) {
	key, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(f, "0x%x\n", crypto.FromECDSA(key)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}

// parse reads a hex private key, with or without 0x.
func parse(s string) (*ecdsa.PrivateKey, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "0x")
	key, err := crypto.HexToECDSA(s)
	if err != nil {
		return nil, fmt.Errorf("not a hex private key (0x + 64 hex digits): %w", err)
	}
	return key, nil
}
