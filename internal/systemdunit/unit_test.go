package systemdunit

import (
	"maps"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Unit
		bad        bool
	}{
		{"keys repeat in order", "[Service]\nExecStartPre=a\n# note\n; note\n\nExecStartPre=b\nUser = hermesd\n",
			Unit{"ExecStartPre": {"a", "b"}, "User": {"hermesd"}}, false},
		{"a value with =", "Environment=A=1\n", Unit{"Environment": {"A=1"}}, false},
		{"an empty value resets, kept", "ReadWritePaths=\n", Unit{"ReadWritePaths": {""}}, false},
		{"no =", "[Unit]\nDescription\n", nil, true},
		{"a continuation", "ExecStart=/bin/x \\\n  -y\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := Parse(tc.text)
			if tc.bad {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want an error", tc.text, u)
				}
				return
			}
			if err != nil || !maps.EqualFunc(u, tc.want, slices.Equal) {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tc.text, u, err, tc.want)
			}
		})
	}
}
