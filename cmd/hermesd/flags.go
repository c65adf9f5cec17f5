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
