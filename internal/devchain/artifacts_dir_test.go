package devchain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `hermesd-devnet` outside a checkout finds the artifacts in the user's
// cache, and says what to run when nothing has them (it used to look only
// for .deps/ens above the working directory).
func TestDefaultArtifactsDirOutsideACheckout(t *testing.T) {
	t.Setenv(EnvArtifacts, "")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	t.Chdir(t.TempDir())
	_, err := DefaultArtifactsDir()
	if err == nil || !strings.Contains(err.Error(), "fetch-ens-artifacts.sh") || !strings.Contains(err.Error(), filepath.Join(cache, "hermesd", "ens")) {
		t.Fatalf("nothing anywhere: %v", err)
	}
	dir := filepath.Join(cache, "hermesd", "ens")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, RegistryFile), []byte("{}"), 0o644)
	if got, err := DefaultArtifactsDir(); err != nil || got != dir {
		t.Fatalf("user cache: %q %v", got, err)
	}
	// A checkout's .deps/ens wins over the cache.
	co := t.TempDir()
	os.MkdirAll(filepath.Join(co, ".deps", "ens"), 0o755)
	os.WriteFile(filepath.Join(co, ".deps", "ens", RegistryFile), []byte("{}"), 0o644)
	os.MkdirAll(filepath.Join(co, "sub"), 0o755)
	t.Chdir(filepath.Join(co, "sub"))
	if got, err := DefaultArtifactsDir(); err != nil || got != filepath.Join(co, ".deps", "ens") {
		t.Fatalf("checkout: %q %v", got, err)
	}
	t.Setenv(EnvArtifacts, "/explicit")
	if got, _ := DefaultArtifactsDir(); got != "/explicit" {
		t.Fatalf("env: %q", got)
	}
}
