package store_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log"
	"os"

	"github.com/edge-mcp/edge-mcp/policy/store"
)

func ExampleStore_Commit() {
	dir, err := os.MkdirTemp("", "policy-store")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, store.Options{Keep: 3})
	if err != nil {
		log.Fatal(err)
	}
	v1, _ := s.Commit("pii-filter", []byte("\x00asm v1"), store.Version{UploadedBy: "alice"})
	v2, _ := s.Commit("pii-filter", []byte("\x00asm v2"), store.Version{UploadedBy: "bob"})
	m, _ := s.Get("pii-filter")
	fmt.Println("active by:", m.Active.UploadedBy, "| can roll back to:", len(m.History), "version(s)")

	back, err := s.Rollback("pii-filter")
	if err != nil {
		log.Fatal(err)
	}
	wasm, _, _ := s.ActiveWasm("pii-filter")
	fmt.Printf("rolled back to v1: %v, bytes %q\n", back.Digest == v1.Digest, wasm)

	_, err = s.Rollback("pii-filter")
	fmt.Println(err)
	_, err = s.Blob(v2.Digest) // v2 was discarded by the rollback
	fmt.Println(err)
	// Output:
	// active by: bob | can roll back to: 1 version(s)
	// rolled back to v1: true, bytes "\x00asm v1"
	// policy store: rolling back "pii-filter": no previous version to roll back to
	// blob sha256:5fed42394328c22dbf4ffe3ba1632a506b5cee800dee8df1baed7a49c2765774: not found
}

func ExampleTrustedKeys_Verify() {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	pub, err := store.ParsePublicKey(base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)))
	if err != nil {
		log.Fatal(err)
	}
	keys := store.NewTrustedKeys(pub)

	wasm := []byte("\x00asm module")
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, wasm))
	id, err := keys.Verify(wasm, sig)
	fmt.Println(id == store.KeyID(pub), err)

	_, err = keys.Verify(append(wasm, '!'), sig)
	fmt.Println(err)
	// Output:
	// true <nil>
	// bad signature: no trusted key verifies it
}
