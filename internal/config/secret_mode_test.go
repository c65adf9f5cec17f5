package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretModes is the rule for secret files: the owner may have any
// permission, the group may read (systemd LoadCredential= grants access
// through an ACL that shows as 0440; Kubernetes fsGroup mounts are
// 0440/0640), nobody else may do anything and the group may not write or
// execute.
var secretModes = []struct {
	mode fs.FileMode
	ok   bool
}{
	{0o600, true}, {0o400, true}, {0o640, true}, {0o440, true}, {0o700, true}, {0o740, true},
	{0o644, false}, {0o604, false}, {0o602, false}, {0o601, false}, {0o660, false}, {0o620, false},
	{0o610, false}, {0o650, false}, {0o670, false}, {0o664, false}, {0o666, false}, {0o444, false},
}

// TestSecretFileModes pins that rule in the code.
func TestSecretFileModes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range secretModes {
		p := filepath.Join(dir, tc.mode.String())
		if err := os.WriteFile(p, []byte("s3cret-value\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		v, err := ReadSecretFile(p)
		switch {
		case tc.ok && (err != nil || v != "s3cret-value"):
			t.Errorf("%04o refused: %v", tc.mode, err)
		case !tc.ok && err == nil:
			t.Errorf("%04o accepted", tc.mode)
		case !tc.ok && (!strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "s3cret")):
			t.Errorf("%04o: the error does not say how to fix it, or quotes the secret: %v", tc.mode, err)
		}
	}
}

// TestSecretFileModesDocumented: the sample configuration, the systemd
// unit and the documentation say what the code does. They once said a
// group-readable file is refused while the code accepted 0640.
func TestSecretFileModesDocumented(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, text := range map[string]string{
		"configs/mainnet.yml":     read("configs/mainnet.yml"),
		"docs/security.md":        read("docs/security.md"),
		"docs/configuration.md":   read("docs/configuration.md"),
		"configs/hermesd.service": read("configs/hermesd.service"),
	} {
		flat := strings.Join(strings.Fields(strings.ReplaceAll(text, "#", " ")), " ")
		for _, want := range []string{"0640", "0440"} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s does not name %s among the accepted secret file modes", name, want)
			}
		}
		for _, wrong := range []string{"no group/other bits", "group/other can read", "mode 0600 enforced", "refuses key files with group"} {
			if strings.Contains(flat, wrong) {
				t.Errorf("%s still says %q", name, wrong)
			}
		}
	}
}
