package main

import (
	"flag"
	"fmt"
)

// newFlagSet returns a FlagSet for one subcommand that reports errors instead
// of exiting. usage is the one-line synopsis after "hermesd".
func newFlagSet(env *cmdEnv, name, usage, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("hermesd "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: hermesd %s\n\n", usage)
		if description != "" {
			fmt.Fprintf(w, "%s\n\n", description)
		}
		if hasFlags(fs) {
			fmt.Fprintln(w, "Flags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseFlags parses args and turns a parse failure into a usage error (the
// flag package has already printed what was wrong).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsageShown
	}
	return nil
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments ("put FILE --json"), and returns the positional
// ones. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
