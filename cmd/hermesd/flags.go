package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/walrus"
)

// newFlagSet returns a FlagSet for one subcommand that reports errors instead
// of exiting. usage is the one-line synopsis after "hermesd". Help asked
// for (-h, -help, --help) goes to stdout and exits 0; the usage shown
// after a mistake goes to stderr with it (see parseFlags).
func newFlagSet(env *cmdEnv, name, usage, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("hermesd "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{env: env})
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
func parseFlags(fs *flag.FlagSet, args []string) (err error) {
	if out, ok := fs.Output().(*flagOutput); ok {
		defer func() { out.flush(err == flag.ErrHelp) }()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return errUsageShown
	}
	return nil
}

// flagOutput holds what the flag package prints (a mistake and the usage,
// or the usage asked for) until parseFlags knows which it was: help goes
// to stdout, mistakes to stderr.
type flagOutput struct {
	env *cmdEnv
	buf []byte
}

func (o *flagOutput) Write(p []byte) (int, error) {
	o.buf = append(o.buf, p...)
	return len(p), nil
}

func (o *flagOutput) flush(help bool) {
	if len(o.buf) == 0 {
		return
	}
	w := o.env.stderr
	if help {
		w = o.env.stdout
	}
	w.Write(o.buf)
	o.buf = o.buf[:0]
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments ("put FILE --json"), and returns the positional
// ones. Everything after "--" is positional.
//
// A value may begin with '-': blob ids are base64url and do. A flag's own
// value is always the next argument (--expect -xyz) or follows '='
// (--expect=-xyz); a positional argument that begins with '-' is taken as
// a value, not a flag, when it is none of the command's flags and cannot
// be a flag name — a blob id, or anything with a character no flag name
// has (an upper-case letter, '_', '.', '/', ...). Any other value goes
// after "--".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return append(pos, args[1:]...), nil
		case a == "-" || !strings.HasPrefix(a, "-") || dashValue(fs, a):
			pos = append(pos, a)
			args = args[1:]
			continue
		}
		// One flag at a time, with its value when it takes the next
		// argument.
		n := 1
		if takesNext(fs, a) && len(args) > 1 {
			n = 2
		}
		if err := parseFlags(fs, args[:n]); err != nil {
			return nil, err
		}
		args = args[n:]
	}
	return pos, nil
}

// flagName is the name in a flag argument ("--expect=x" → "expect").
func flagName(a string) string {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	name, _, _ = strings.Cut(name, "=")
	return name
}

// takesNext reports whether flag argument a takes the next argument as
// its value: a defined flag that is not boolean, without "=value".
func takesNext(fs *flag.FlagSet, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	f := fs.Lookup(flagName(a))
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// dashValue reports whether a, which begins with '-', is a value rather
// than a flag: none of fs's flags (nor help), and not shaped like a flag
// name (lower-case letters, digits and '-').
func dashValue(fs *flag.FlagSet, a string) bool {
	name := flagName(a)
	switch {
	case name == "" || fs.Lookup(name) != nil || name == "h" || name == "help":
		return false
	case walrus.ValidateRef(headref.ID(a)) == nil: // a blob or patch id, or a head reference
		return true
	}
	return strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	})
}
