package seal_test

import (
	"fmt"
	"testing"

	"github.com/hermesd/hermesd/internal/seal"
)

var benchSizes = []struct {
	name string
	n    int
}{{"1KiB", 1 << 10}, {"10MiB", 10 << 20}}

// 2-of-3, AES-256-GCM: three pairings per encryption.
func BenchmarkEncrypt(b *testing.B) {
	tn := newTestNet(b, []int{1, 1, 1}, 2, nil)
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			msg := payload(s.n)
			b.SetBytes(int64(s.n))
			for b.Loop() {
				if _, _, err := seal.Encrypt(&tn.cfg, []byte("agent"), msg, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// 2-of-3 with two user secret keys: parse, verify both keys (two pairing
// checks), two pairings, combine, nonce check, AES-GCM.
func BenchmarkDecrypt(b *testing.B) {
	tn := newTestNet(b, []int{1, 1, 1}, 2, nil)
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			obj, _, err := seal.Encrypt(&tn.cfg, []byte("agent"), payload(s.n), nil)
			if err != nil {
				b.Fatal(err)
			}
			o, err := seal.ParseEncryptedObject(obj)
			if err != nil {
				b.Fatal(err)
			}
			keys := tn.usks(o)
			delete(keys, tn.cfg.Servers[2].ObjectID)
			pks := tn.pks()
			b.SetBytes(int64(s.n))
			for b.Loop() {
				o, err := seal.ParseEncryptedObject(obj)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := seal.Decrypt(o, keys, pks, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Key fetch latency against three local key servers over HTTP on
// 127.0.0.1 (2-of-3), cold cache: a signed request, concurrent fan-out,
// ElGamal decryption and verification of the keys of the first two answers.
func BenchmarkFetchKeys(b *testing.B) {
	tn := newTestNet(b, []int{1, 1, 1}, 2, nil)
	c, err := seal.NewClient(tn.cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	sk := tn.session(b)
	for _, ids := range []int{1, 10} {
		b.Run(fmt.Sprintf("%dIDs", ids), func(b *testing.B) {
			var list [][]byte
			for i := range ids {
				list = append(list, []byte(fmt.Sprintf("agent-%d", i)))
			}
			for b.Loop() {
				c.ForgetKeys()
				if err := c.FetchKeys(b.Context(), sk, approve, list, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Restore path: fetch keys (cold cache) and decrypt a 1 KiB object.
func BenchmarkClientDecrypt(b *testing.B) {
	tn := newTestNet(b, []int{1, 1, 1}, 2, nil)
	c, err := seal.NewClient(tn.cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	sk := tn.session(b)
	obj, _, err := seal.Encrypt(&tn.cfg, []byte("agent"), payload(1<<10), nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c.ForgetKeys()
		if _, err := c.Decrypt(b.Context(), obj, sk, approve, nil); err != nil {
			b.Fatal(err)
		}
	}
}
