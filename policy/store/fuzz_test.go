package store

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
)

var fuzzEncodings = []string{"", "identity", "gzip", "zstd"}

func FuzzReadBody(f *testing.F) {
	body := []byte("\x00asm fuzz seed body body body body")
	f.Add(body, uint8(0), uint16(100))
	f.Add(body, uint8(0), uint16(3))
	f.Add(gzipBytes(f, body), uint8(2), uint16(100))
	f.Add(gzipBytes(f, body), uint8(2), uint16(5))
	f.Add(zstdBytes(f, body), uint8(3), uint16(100))
	f.Add(zstdBytes(f, bytes.Repeat([]byte{0}, 5000)), uint8(3), uint16(64))
	f.Fuzz(func(t *testing.T, wire []byte, enc uint8, max uint16) {
		encoding := fuzzEncodings[int(enc)%len(fuzzEncodings)]
		got, err := ReadBody(bytes.NewReader(wire), encoding, int64(max))
		if len(got) > int(max) {
			t.Fatalf("ReadBody returned %d bytes, limit %d", len(got), max)
		}
		if err != nil && got != nil {
			t.Fatalf("ReadBody returned data with error %v", err)
		}
		if encoding == "" || encoding == "identity" {
			if len(wire) <= int(max) && (err != nil || !bytes.Equal(got, wire)) {
				t.Fatalf("identity body within the limit: %q, %v", got, err)
			}
		}
	})
}

func FuzzParseDigest(f *testing.F) {
	f.Add(Digest([]byte("x")))
	f.Add("SHA256:" + "AB" + Digest(nil)[9:])
	f.Add("sha256:")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		if len(d) != len("sha256:")+64 {
			t.Fatalf("ParseDigest(%q) = %q: wrong length", s, d)
		}
		again, err := ParseDigest(d)
		if err != nil || again != d {
			t.Fatalf("canonical digest %q does not parse to itself: %q, %v", d, again, err)
		}
	})
}

func FuzzParsePublicKey(f *testing.F) {
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	f.Add(base64.StdEncoding.EncodeToString(pub))
	f.Add(base64.RawURLEncoding.EncodeToString(pub))
	f.Add("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAO2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=\n-----END PUBLIC KEY-----\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePublicKey(s)
		if err != nil {
			return
		}
		if len(k) != ed25519.PublicKeySize {
			t.Fatalf("ParsePublicKey(%q) returned a %d-byte key", s, len(k))
		}
		again, err := ParsePublicKey(base64.StdEncoding.EncodeToString(k))
		if err != nil || !again.Equal(k) {
			t.Fatalf("key %x does not round-trip: %x, %v", k, again, err)
		}
		_ = KeyID(k)
	})
}

func FuzzDecodeState(f *testing.F) {
	st := newState()
	st.Modules["m"] = &moduleState{
		Active:  Version{Digest: Digest([]byte("b")), Size: 1, UploadedAt: time.Unix(1e9, 0).UTC(), ActivatedAt: time.Unix(2e9, 5).UTC()},
		History: []Version{{Digest: Digest([]byte("a")), Size: 1, SignedBy: "0011223344556677"}},
	}
	st.Attachments = []policy.Spec{{Name: "p", Module: "m", Config: json.RawMessage(`{"x":[1,2]}`)}}
	st.Extra["approvals"] = json.RawMessage(`{"a":null}`)
	seed, err := encodeState(st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{"format":1,"modules":{"m":null}}`))
	f.Add([]byte(`{"format":1} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a fixed point that decodes again.
		enc1, err := encodeState(st)
		if err != nil {
			t.Fatalf("encoding a decoded state: %v", err)
		}
		st2, err := decodeState(enc1)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc1, err)
		}
		enc2, err := encodeState(st2)
		if err != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("state does not round-trip:\n%s\n%s", enc1, enc2)
		}
	})
}
