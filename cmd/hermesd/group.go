package main

import (
	"context"
	"fmt"
	"strings"
)

// group is a command whose first argument picks one of its verbs
// (hermesd pointer get, hermesd receipts quarantine list): one place for
// the usage line, help and the unknown-verb error they all share.
type group struct {
	name  string // as typed after hermesd: "receipts quarantine"
	tail  string // what follows the verb in the usage line
	help  string
	verbs []command // name and run
}

func (g group) run(ctx context.Context, env *cmdEnv, args []string) error {
	names := make([]string, len(g.verbs))
	for i, v := range g.verbs {
		names[i] = v.name
	}
	usage := fmt.Sprintf("Usage: hermesd %s <%s> %s\n\n%s\n", g.name, strings.Join(names, "|"), g.tail, g.help)
	if len(args) == 0 {
		fmt.Fprint(env.stderr, usage)
		return errUsageShown
	}
	for _, v := range g.verbs {
		if v.name == args[0] {
			return v.run(ctx, env, args[1:])
		}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(env.stdout, usage)
		return nil
	}
	return usageErrorf("%s: unknown subcommand %q (want %s)", g.name, args[0], orList(names))
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
