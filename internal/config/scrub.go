package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Configuration errors never show a secret, nor the path, query or user
// of a URL (docs/design.md §1.4, invariant 8). A secret reaches an error
// only by mistake, when it is written where it does not belong: inline
// instead of {file: PATH} or {env: NAME}, as an environment variable's
// name, in an address field, or through ${VAR} into any field. So:
//   - yaml.v3's own messages quote the value that did not fit its type
//     (its first seven characters when longer than ten); scrubYAML drops
//     the quote, and says what to write instead where a secret went
//     inline;
//   - messages of this package quote a value only through shown, which
//     elides one long enough to be a secret, and a URL only through
//     redact.URL (scheme://host:port).

// minSecretLen is the length from which a value is never quoted: hermesd's
// keys are 43 characters, tokens at least 16, private keys 64 hex digits.
const minSecretLen = 16

// shown quotes a value for an error message, or only says how long it is
// when it could be a secret (or is not printable text).
func shown(v string) string {
	printable := strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
	if len(v) < minSecretLen && printable {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("a value of %d characters", len(v))
}

// yamlTypeLine matches yaml.v3's "cannot unmarshal" line with its quoted
// value.
var yamlTypeLine = regexp.MustCompile("^(line [0-9]+: cannot unmarshal [^ ]+) `[^`]*` into (.+)$")

// secretTypes are the types a secret reference decodes into.
var secretTypes = map[string]bool{"config.SecretRef": true, "config.AgentKey": true}

// scrubYAML rewrites a yaml.v3 decoding error without the values it
// quotes. A *yaml.TypeError stays one, line by line.
func scrubYAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	out := &yaml.TypeError{Errors: make([]string, len(te.Errors))}
	for i, line := range te.Errors {
		m := yamlTypeLine.FindStringSubmatch(line)
		switch {
		case m == nil:
			out.Errors[i] = line
		case secretTypes[m[2]]:
			ln, _, _ := strings.Cut(m[1], ": ")
			out.Errors[i] = ln + ": a secret is never written in the configuration: give {file: PATH} or {env: NAME}"
		default:
			out.Errors[i] = m[1] + " into " + m[2]
		}
	}
	return out
}
