package ociwasm

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"strings"
	"testing"
)

// FuzzParseRef: a parsed reference writes back to a string that parses
// to the same reference.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"oci://ghcr.io/acme/redact:v1", "oci://127.0.0.1:5000/p/x@sha256:" + strings.Repeat("a", 64),
		"oci://reg/p:v1@sha256:" + strings.Repeat("b", 64), "oci://reg/p", "oci://reg/", "oci:///x", "oci://a/b:",
		"oci://a/b@sha512:00", "http://a/b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err != nil {
			return
		}
		again, err := ParseRef(r.String())
		if err != nil || again != r {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, r, r.String(), again, err)
		}
	})
}

// FuzzManifest: wasmLayer, ParsePayload and ParseBundle never panic, and a layer they
// pick has a valid digest and a size not below zero.
func FuzzManifest(f *testing.F) {
	f.Add(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.wasm.config.v0+json","digest":"sha256:` + strings.Repeat("0", 64) + `","size":2},"layers":[{"mediaType":"application/wasm","digest":"sha256:` + strings.Repeat("1", 64) + `","size":8}]}`)
	f.Add(`{"critical":{"identity":{"docker-reference":"r/p"},"image":{"docker-manifest-digest":"sha256:` + strings.Repeat("2", 64) + `"},"type":"cosign container image signature"},"optional":null}`)
	f.Add(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"AAAA"}]}}`)
	f.Add(`{"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"` + strings.Repeat("A", 43) + `="},"signature":"AAAA"}}`)
	f.Add(`{"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":-1}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		ParsePayload([]byte(s))
		ParseBundle([]byte(s))
		l, err := wasmLayer("", []byte(s))
		if err != nil {
			return
		}
		if l.Size < 0 || l.Digest.Validate() != nil {
			t.Fatalf("picked layer %+v", l)
		}
	})
}

// FuzzExtractPlugin: an image layer never yields more than the cap.
func FuzzExtractPlugin(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"), false)
	f.Fuzz(func(t *testing.T, b []byte, plainTar bool) {
		mt := "application/vnd.oci.image.layer.v1.tar+gzip"
		if plainTar {
			mt = "application/vnd.oci.image.layer.v1.tar"
		}
		out, err := extractPlugin(b, mt, 64)
		if err == nil && len(out) > 64 {
			t.Fatalf("extracted %d bytes, cap 64", len(out))
		}
	})
}

// FuzzOtherNames: reading Fulcio otherName SANs from any SAN extension
// value never panics, and finds a name only where one is encoded.
func FuzzOtherNames(f *testing.F) {
	b, _ := os.ReadFile("testdata/public-good/othername.sigstore.json")
	var kb keylessBundle
	if der, err := kb.leafOf(b); err == nil && der != nil {
		if c, err := x509.ParseCertificate(der); err == nil {
			for _, e := range c.Extensions {
				if e.Id.Equal(oidSAN) {
					f.Add(e.Value)
				}
			}
		}
	}
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, v []byte) {
		names := otherNames(&x509.Certificate{Extensions: []pkix.Extension{{Id: oidSAN, Value: v}}})
		if len(names) > len(v) {
			t.Fatalf("%d names from %d bytes", len(names), len(v))
		}
	})
}
