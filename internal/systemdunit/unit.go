package systemdunit

import (
	"fmt"
	"os"
	"strings"
)

// Unit is every value of every key of a unit, in file order.
type Unit map[string][]string

// Parse reads a unit's text.
func Parse(text string) (Unit, error) {
	u := Unit{}
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasSuffix(line, `\`) {
			return nil, fmt.Errorf("line %d: malformed %q", n, line)
		}
		k = strings.TrimSpace(k)
		u[k] = append(u[k], strings.TrimSpace(v))
	}
	return u, nil
}

// Read reads the unit file at path.
func Read(path string) (Unit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}
