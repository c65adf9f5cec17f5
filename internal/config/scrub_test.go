package config

import (
	"strings"
	"testing"
)

// TestErrorsShowNoSecret: no configuration error quotes a secret written
// where it does not belong, or the path, query or user part of a URL
// (yaml.v3 echoes the first characters of an inline key it cannot
// decode; a URL that fails validation must not be echoed whole). Every
// window of 6 characters of every secret is looked for.
func TestErrorsShowNoSecret(t *testing.T) {
	const (
		key   = "Zq9xW2vK7pL4mN8r-1yB5cD3fG6hJ0sA2eU4iO6aX8w" // a snapshot key's shape
		hex64 = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
	)
	secrets := []string{key, hex64, "userSECRET", "pwSECRET", "PATHSECRET", "QUERYSECRET", "FRAGSECRET"}
	env := map[string]string{"TOK": key}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	base := "state_dir: /var/lib/hermesd\n"
	url := "://userSECRET:pwSECRET@host.example:8443/v1/PATHSECRET?apikey=QUERYSECRET#FRAGSECRET"
	for _, tt := range []struct{ name, body, want string }{
		{"inline key", "encryption: {key: " + key + "}\n", "a secret is never written in the configuration"},
		{"inline key through env", "walrus:\n  token: ${TOK}\n", "a secret is never written in the configuration"},
		{"inline agent key", "agents: [{id: a, brain_dir: /srv/a, key: " + key + "}]\n", "a secret is never written"},
		{"inline http token", "http: {token: " + key + "}\n", "a secret is never written"},
		{"inline sui key", "seal: {sui_key: " + hex64 + "}\n", "a secret is never written"},
		{"key as env name", "walrus: {token: {env: " + key + "}}\n", "walrus.token.env: a value of 43 characters is not an environment variable name"},
		{"agent key as env name", "agents: [{id: a, brain_dir: /srv/a, key: {env: " + key + "}}]\n", "not an environment variable name"},
		{"private key as address", "receipts: {trusted: [\"0x" + hex64 + "\"]}\n", "receipts.trusted[0]: a value of 66 characters is not an address"},
		{"private key as sui address", "walrus: {send_object_to: \"0x" + hex64 + "00\"}\n", "not a Sui address"},
		{"key in a number", "chain: {chain_id: " + key + "}\n", "chain.chain_id (line 2): want an unsigned integer, not a string"},
		{"short key in a number", "walrus: {epochs: Zq9xW2vK}\n", "walrus.epochs (line 2): want an integer, not a string"},
		{"key as a key", "chain: {" + key + ": 1}\n", "chain.<a key of 43 characters> (line 2): unknown key"},
		{"key as a repeated key", "chain: {" + key + ": 1, " + key + ": 2}\n", "chain.<a key of 43 characters> (line 2): repeated key"},
		{"key in a list", "walrus: {publishers: " + key + "}\n", "walrus.publishers (line 2): want a list, not a string"},
		{"key in a duration", "walrus:\n  jwt_ttl: ${TOK}\n", "a value of 43 characters is not a duration"},
		{"key in a size", "walrus:\n  max_blob_size: ${TOK}\n", "a value of 43 characters is not a size"},
		{"key in a mode", "http: {socket_mode: " + key + "}\n", "not a permission mode"},
		{"key as log level", "log: {level: " + key + "}\n", "log.level: a value of 43 characters is not one of"},
		{"key as agent id", "agents: [{id: " + key + ", brain_dir: /srv/a}]\n", "agents[0].id: a value of 43 characters must be"},
		{"publisher scheme", "walrus: {publishers: [\"ftp" + url + "\"]}\n", "walrus.publishers[0]: ftp://host.example:8443: scheme must be http or https"},
		{"publisher query", "walrus: {publishers: [\"https" + url + "\"]}\n", "https://host.example:8443: give the base URL without query"},
		{"aggregator query", "walrus: {aggregators: [\"http" + url + "\"]}\n", "walrus.aggregators[0]: http://host.example:8443"},
		{"aggregator without host", "walrus: {aggregators: [\"http:///v1/PATHSECRET?k=QUERYSECRET\"]}\n", "has no host"},
		{"unparsable aggregator", "walrus: {aggregators: [\"http://[::1/PATHSECRET\"]}\n", "walrus.aggregators[0]: not a URL"},
		{"rpc scheme", "chain: {rpc: \"ftp" + url + "\"}\n", "chain.rpc: ftp://host.example:8443: scheme must be"},
		{"rpc without host", "chain: {rpc: \"https:/v3/PATHSECRET\"}\n", "chain.rpc: https:// is not a URL with a host"},
		{"unparsable rpc", "chain: {rpc: \"wss://[::1/v3/PATHSECRET\"}\n", "chain.rpc: (unparsable URL)"},
		{"rpc through env", "chain: {rpc: \"ftp://h/${TOK}\"}\n", "chain.rpc: ftp://h: scheme"},
		{"seal key server", "encryption: {format: seal}\nseal: {key_servers: [{url: \"ftp" + url + "\"}]}\n", "seal.key_servers[0].url: ftp://host.example:8443"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, expandBody(t, base+tt.body, lookup)))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not say %q", msg, tt.want)
			}
			for _, s := range secrets {
				for i := 0; i+6 <= len(s); i++ {
					if strings.Contains(msg, s[i:i+6]) {
						t.Fatalf("error %q shows %q of a secret", msg, s[i:i+6])
					}
				}
			}
		})
	}
}

// expandBody puts ${VAR} references through the environment Load reads.
func expandBody(t *testing.T, body string, lookup func(string) (string, bool)) string {
	t.Helper()
	for _, k := range []string{"TOK"} {
		if v, ok := lookup(k); ok {
			t.Setenv(k, v)
		}
	}
	return body
}
