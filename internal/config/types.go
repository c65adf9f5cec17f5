package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as "2s", "10m" or "1h30m" in YAML.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts Go duration strings; a bare 0 means zero.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 30s or 10m", n.Line)
	}
	if n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %s is not a duration (use e.g. 30s, 10m, 1h)", n.Line, shown(n.Value))
	}
	if v < 0 {
		return fmt.Errorf("line %d: duration %s is negative", n.Line, shown(n.Value))
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration in Go syntax.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ByteSize is a size in bytes written as 1048576, "10MiB", "512KiB", "1GiB"
// or with SI units ("10MB" = 10,000,000).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseByteSize parses a size as accepted in the configuration.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is not a size (use e.g. 10MiB, 512KiB or a byte count)", shown(s))
	}
	if n > 0 && mult > 1 && n > (1<<62)/mult {
		return 0, fmt.Errorf("size %s is too large", shown(s))
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML accepts integers and unit strings.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a size such as 10MiB", n.Line)
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// String formats the size with a binary unit when exact.
func (b ByteSize) String() string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(b) >= u.m && int64(b)%u.m == 0 {
			return fmt.Sprintf("%d%s", int64(b)/u.m, u.s)
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalYAML writes the size in the unit form.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// FileMode is a permission mode written in octal ("0660") in YAML.
type FileMode uint32

// UnmarshalYAML accepts an octal string or number of at most 0777.
func (m *FileMode) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a mode such as 0660", n.Line)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(n.Value, "0o"), 8, 32)
	if err != nil || v > 0o777 {
		return fmt.Errorf("line %d: %s is not a permission mode (octal, e.g. 0660)", n.Line, shown(n.Value))
	}
	*m = FileMode(v)
	return nil
}

// MarshalYAML writes the mode in octal.
func (m FileMode) MarshalYAML() (any, error) { return fmt.Sprintf("%04o", uint32(m)), nil }
