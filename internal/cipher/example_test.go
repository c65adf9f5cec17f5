package cipher_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/hermesd/hermesd/internal/cipher"
)

func Example() {
	key, err := cipher.GenerateKey()
	if err != nil {
		log.Fatal(err)
	}

	var blob bytes.Buffer
	w, err := cipher.Encrypt(&blob, key, "alice.agents.eth")
	if err != nil {
		log.Fatal(err)
	}
	io.WriteString(w, "the brain, as a tar stream")
	if err := w.Close(); err != nil { // writes the final segment
		log.Fatal(err)
	}

	r, err := cipher.Decrypt(bytes.NewReader(blob.Bytes()), key, "alice.agents.eth")
	if err != nil {
		log.Fatal(err)
	}
	plaintext, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", plaintext)

	// Another agent's identity does not authenticate; ProbeIdentity says
	// whose blob it is.
	_, err = cipher.Decrypt(bytes.NewReader(blob.Bytes()), key, "bob.agents.eth")
	fmt.Println(errors.Is(err, cipher.ErrAuthFirstSegment))
	owner, err := cipher.ProbeIdentity(bytes.NewReader(blob.Bytes()), key, []string{"bob.agents.eth", "alice.agents.eth"})
	fmt.Println(owner, err)
	// Output:
	// the brain, as a tar stream
	// true
	// alice.agents.eth <nil>
}
