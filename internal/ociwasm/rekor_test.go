package ociwasm

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm/sigstoretest"
)

// TestVerifyInclusion: every leaf of every tree of 1 to 33 leaves is
// proven by its RFC 6962 audit path (computed recursively, as the RFC
// defines it); another index or leaf, a shortened or lengthened path,
// another root or a leaf outside the tree is refused. (The tree size is
// bound by the signed checkpoint, not by the path.)
func TestVerifyInclusion(t *testing.T) {
	for n := 1; n <= 33; n++ {
		leaves := make([][]byte, n)
		for i := range leaves {
			leaves[i] = []byte("leaf " + strconv.Itoa(i))
		}
		var root [32]byte
		copy(root[:], sigstoretest.MerkleRoot(leaves))
		for m := range n {
			path := sigstoretest.AuditPath(m, leaves)
			leaf := leafHash(leaves[m])
			if err := verifyInclusion(uint64(m), uint64(n), leaf, path, root); err != nil {
				t.Fatalf("leaf %d of %d: %v", m, n, err)
			}
			bad := map[string]error{
				"a leaf outside the tree": verifyInclusion(uint64(n), uint64(n), leaf, path, root),
				"a longer path":           verifyInclusion(uint64(m), uint64(n), leaf, append(path, root[:]), root),
				"another root":            verifyInclusion(uint64(m), uint64(n), leaf, path, leafHash(nil)),
				"another leaf":            verifyInclusion(uint64(m), uint64(n), leafHash([]byte("x")), path, root),
			}
			if len(path) > 0 {
				bad["a shorter path"] = verifyInclusion(uint64(m), uint64(n), leaf, path[:len(path)-1], root)
			}
			if m+1 < n {
				bad["the next index"] = verifyInclusion(uint64(m+1), uint64(n), leaf, path, root)
			}
			for name, err := range bad {
				if err == nil {
					t.Errorf("leaf %d of %d, %s: verified", m, n, name)
				}
			}
		}
	}
}

// TestParseCheckpoint: a checkpoint parses into origin, size and root,
// verifies with the key that signed it and not another, and malformed
// notes are refused with the reason.
func TestParseCheckpoint(t *testing.T) {
	f := sigstoretest.New(t)
	root := sha256.Sum256([]byte("root"))
	good := f.Checkpoint(t, "rekor.test - 1", 7, root[:], nil)
	cp, err := parseCheckpoint(good)
	if err != nil || cp.Origin != "rekor.test - 1" || cp.Size != 7 || cp.Root != root {
		t.Fatalf("parse: %+v, %v", cp, err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&f.LogKey.PublicKey)
	key, _ := parseLogKey(der)
	otherDER, _ := x509.MarshalPKIXPublicKey(&sigstoretest.ECKey(t).PublicKey)
	other, _ := parseLogKey(otherDER)
	if !cp.signedBy(key) || cp.signedBy(other) {
		t.Fatalf("signed by the log's key: %v, by another: %v", cp.signedBy(key), cp.signedBy(other))
	}
	// A C2SP note signed by an Ed25519 key (as Rekor v2 may sign).
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKIXPublicKey(edPub)
	edKey, err := parseLogKey(edDER)
	if err != nil {
		t.Fatal(err)
	}
	text := "log2026.rekor.test\n7\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	hint := sha256.Sum256(append([]byte("log2026.rekor.test\n\x01"), edPub...))
	edNote := text + "\n\u2014 log2026.rekor.test " + base64.StdEncoding.EncodeToString(append(hint[:4:4], ed25519.Sign(edPriv, []byte(text))...)) + "\n"
	if cp, err := parseCheckpoint(edNote); err != nil || !cp.signedBy(edKey) || cp.signedBy(key) {
		t.Fatalf("Ed25519 note: %v", err)
	}
	// And one by an RSA key.
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaPriv.PublicKey)
	rsaKey, err := parseLogKey(rsaDER)
	if err != nil {
		t.Fatal(err)
	}
	rsaHint := sha256.Sum256(append([]byte("rsa.rekor.test\n\xffPKIX-RSA-PKCS#1v1.5"), rsaDER...))
	textSum := sha256.Sum256([]byte(text))
	rsaSig, _ := rsa.SignPKCS1v15(rand.Reader, rsaPriv, crypto.SHA256, textSum[:])
	rsaNote := text + "\n\u2014 rsa.rekor.test " + base64.StdEncoding.EncodeToString(append(rsaHint[:4:4], rsaSig...)) + "\n"
	if cp, err := parseCheckpoint(rsaNote); err != nil || !cp.signedBy(rsaKey) || cp.signedBy(edKey) {
		t.Fatalf("RSA note: %v", err)
	}
	tampered, _ := parseCheckpoint(strings.Replace(good, "\n7\n", "\n8\n", 1))
	if tampered == nil || tampered.signedBy(key) {
		t.Fatal("a checkpoint with another size verified")
	}
	for name, c := range map[string]struct{ note, want string }{
		"no signatures": {"rekor.test\n7\n" + strings.Split(good, "\n")[2] + "\n", "not a signed note"},
		"no root":       {"rekor.test\n7\n\n\u2014 rekor.test AAAAAAAA\n", "want origin, tree size and root hash lines"},
		"bad size":      {strings.Replace(good, "\n7\n", "\nseven\n", 1), "tree size"},
		"bad root":      {strings.Replace(good, strings.Split(good, "\n")[2], "AAAA", 1), "root hash"},
		"bad signature": {strings.Replace(good, "\u2014 rekor.test ", "- rekor.test ", 1), "signature line"},
		"too large":     {strings.Repeat("x", maxCheckpoint+1), "at most"},
	} {
		if _, err := parseCheckpoint(c.note); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// FuzzCheckpoint: parseCheckpoint never panics, and what it parses
// verifies with the fixture's log key only if it is the note that key
// signed.
func FuzzCheckpoint(f *testing.F) {
	var t testing.TB = f
	fx := sigstoretest.New(t)
	root := sha256.Sum256([]byte("root"))
	good := fx.Checkpoint(t, "rekor.test - 1", 7, root[:], nil)
	f.Add(good)
	f.Add("o\n1\nAAAA\n\n\u2014 n AAAAAAAA\n")
	der, _ := x509.MarshalPKIXPublicKey(&fx.LogKey.PublicKey)
	key, _ := parseLogKey(der)
	f.Fuzz(func(t *testing.T, s string) {
		cp, err := parseCheckpoint(s)
		if err == nil && cp.signedBy(key) && !strings.HasPrefix(good, string(cp.text)) {
			t.Fatalf("a note the key did not sign verified: %q", s)
		}
	})
}
