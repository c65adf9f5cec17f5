package cipher

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeScript does what the reference runtime's AesCipher does (crypto.ts):
// decode AGENT_SNAPSHOT_KEY by mapping base64url to base64 and calling atob,
// import it raw for AES-GCM, and read or write the envelope
// u32le(1) ‖ iv[12] ‖ ciphertext+tag with WebCrypto.
const nodeScript = `
const { webcrypto, createHash } = require('node:crypto');
const fs = require('node:fs');
const subtle = webcrypto.subtle;

function decodeKey(s) {
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

async function main() {
  const [mode, inPath, outPath] = process.argv.slice(2);
  const key = await subtle.importKey('raw', decodeKey(process.env.AGENT_SNAPSHOT_KEY), 'AES-GCM', false, ['encrypt', 'decrypt']);
  const input = new Uint8Array(fs.readFileSync(inPath));
  if (mode === 'encrypt') {
    const iv = webcrypto.getRandomValues(new Uint8Array(12));
    const ct = new Uint8Array(await subtle.encrypt({ name: 'AES-GCM', iv }, key, input));
    const env = new Uint8Array(4 + iv.length + ct.length);
    new DataView(env.buffer).setUint32(0, 1, true);
    env.set(iv, 4);
    env.set(ct, 16);
    fs.writeFileSync(outPath, env);
    return;
  }
  if (input.length < 16) throw new Error('crypto: envelope too short');
  const version = new DataView(input.buffer, input.byteOffset, input.byteLength).getUint32(0, true);
  if (version !== 1) throw new Error('unexpected envelope version ' + version);
  const pt = new Uint8Array(await subtle.decrypt({ name: 'AES-GCM', iv: input.subarray(4, 16) }, key, input.subarray(16)));
  process.stdout.write(createHash('sha256').update(pt).digest('hex') + ' ' + pt.length + '\n');
}

main().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
`

func runNode(t *testing.T, dir string, key Key, args ...string) (string, error) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (%v): the interop test with the reference runtime's WebCrypto needs Node.js 20+ on PATH", err)
	}
	script := filepath.Join(dir, "envelope.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "AGENT_SNAPSHOT_KEY="+key.Secret())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("node %s: %v: %s", args[0], err, stderr.String())
	}
	return string(out), nil
}

func TestV1InteropWebCrypto(t *testing.T) {
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1, 100_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := t.TempDir()
			pt := plaintext(size)
			ptPath := filepath.Join(dir, "plain")
			if err := os.WriteFile(ptPath, pt, 0o600); err != nil {
				t.Fatal(err)
			}

			// Node (WebCrypto) encrypts, Go decrypts.
			envPath := filepath.Join(dir, "node.env")
			if _, err := runNode(t, dir, key, "encrypt", ptPath, envPath); err != nil {
				t.Fatal(err)
			}
			env, err := os.ReadFile(envPath)
			if err != nil {
				t.Fatal(err)
			}
			if f, err := Detect(env); f != FormatV1 {
				t.Fatalf("Node's envelope detected as %v, %v", f, err)
			}
			got, err := OpenV1(key, env)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Go OpenV1 of Node's envelope: %d bytes, %v", len(got), err)
			}

			// Go encrypts, Node decrypts.
			goEnv, err := SealV1(key, pt)
			if err != nil {
				t.Fatal(err)
			}
			goPath := filepath.Join(dir, "go.env")
			if err := os.WriteFile(goPath, goEnv, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runNode(t, dir, key, "decrypt", goPath)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(pt)
			if want := fmt.Sprintf("%s %d\n", hex.EncodeToString(sum[:]), size); out != want {
				t.Fatalf("Node decrypted to %q, want %q", out, want)
			}

			// WebCrypto rejects a tampered Go envelope too.
			goEnv[len(goEnv)-1] ^= 1
			if err := os.WriteFile(goPath, goEnv, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := runNode(t, dir, key, "decrypt", goPath); err == nil || !strings.Contains(err.Error(), "OperationError") {
				t.Fatalf("Node accepted a tampered envelope: %v", err)
			}
		})
	}
}
