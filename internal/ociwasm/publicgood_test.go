package ociwasm

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestVerifyKeylessPublicGood: bundles made by the public good Sigstore
// instance (testdata/public-good, from sigstore-go's test data) verify
// offline against its trusted root: Fulcio's chain and embedded SCT of
// its CT log, Rekor's signed entry timestamp, and (sigstore-js) an
// inclusion proof to a production checkpoint. A bent audit path, a
// checkpoint signed by another key, a CT log key that is not the one
// that signed, or another identity is refused.
func TestVerifyKeylessPublicGood(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/public-good/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rootJSON := read("trusted_root.json")
	root, err := ParseTrustedRoot(rootJSON)
	if err != nil {
		t.Fatal(err)
	}
	// The same root with the CT logs' keys swapped for Rekor's.
	var j map[string]any
	json.Unmarshal(rootJSON, &j)
	tlogKey := j["tlogs"].([]any)[0].(map[string]any)["publicKey"]
	for _, l := range j["ctlogs"].([]any) {
		l.(map[string]any)["publicKey"] = tlogKey
	}
	raw, _ := json.Marshal(j)
	wrongCT, err := ParseTrustedRoot(raw)
	if err != nil {
		t.Fatal(err)
	}
	js := read("sigstore-js-provenance.sigstore.json")
	jsID := Identity{SAN: "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main", Issuer: "https://token.actions.githubusercontent.com"}
	bend := func(b []byte, old, new string) []byte {
		if !strings.Contains(string(b), old) {
			t.Fatalf("the bundle has no %q", old)
		}
		return []byte(strings.Replace(string(b), old, new, 1))
	}
	cases := []struct {
		name   string
		bundle []byte
		root   *TrustedRoot
		id     Identity
		want   string // "" verifies
	}{
		{"sigstore-js provenance", js, root, jsID, ""},
		{"dsse by e-mail", read("dsse.sigstore.json"), root, Identity{SAN: "brian@dehamer.com", Issuer: "https://github.com/login/oauth"}, ""},
		{"another identity", js, root, Identity{SAN: "https://github.com/evil/x", Issuer: jsID.Issuer}, "no configured identity matches"},
		{"bent audit path", bend(js, "/pZbqoFwAGIZaonQ2KdQj3HSGP7/4yfdZBUxKadw9Z8=", "/pZcqoFwAGIZaonQ2KdQj3HSGP7/4yfdZBUxKadw9Z8="), root, jsID, "does not lead to the checkpoint's root"},
		{"checkpoint of another tree size", bend(js, `"treeSize": "27657875"`, `"treeSize": "27657876"`), root, jsID, "is not the proof's tree"},
		{"checkpoint signature bent", bend(js, "wNI9ajBEAiAzHmfHSCMNTSzP9h0P", "wNI9ajBEAiAzHmfHSCMNTSzP9h0Q"), root, jsID, "checkpoint is not signed by the log's key"},
		{"SCT by a key the root does not list", js, wrongCT, jsID, "certificate transparency"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, by, err := VerifyKeyless(c.bundle, c.root, []Identity{c.id})
			if c.want == "" {
				if err != nil || by != c.id {
					t.Fatalf("%v (signed by %v)", err, by)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want %q", err, c.want)
			}
		})
	}
}

// TestVerifyKeylessOtherName: a bundle of a private Sigstore
// (sigstore-go's scaffolding test data: a v0.3 bundle, a hashedrekord
// entry with an inclusion proof and checkpoint) whose certificate's only
// SAN is a Fulcio otherName (a username identity, a critical extension
// crypto/x509 does not read) verifies for that identity, not for an
// e-mail address of the same text.
func TestVerifyKeylessOtherName(t *testing.T) {
	rootJSON, err := os.ReadFile("testdata/public-good/scaffolding-trusted_root.json")
	if err != nil {
		t.Fatal(err)
	}
	root, err := ParseTrustedRoot(rootJSON)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/public-good/othername.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{SAN: "foo!oidc.local", Issuer: "http://oidc.local:8080"}
	subjects, by, err := VerifyKeyless(b, root, []Identity{id})
	if err != nil || by != id || len(subjects) != 1 || subjects[0] != "bc103b4a84971ef6459b294a2b98568a2bfb72cded09d4acd1e16366a401f95b" {
		t.Fatalf("%v, %v, %v", subjects, by, err)
	}
	if _, _, err := VerifyKeyless(b, root, []Identity{{SAN: "foo@oidc.local", Issuer: id.Issuer}}); err == nil || !strings.Contains(err.Error(), "no configured identity matches") {
		t.Fatalf("an e-mail identity: %v", err)
	}
}
