package store

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstdBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func TestReadBody(t *testing.T) {
	body := bytes.Repeat([]byte("\x00asm policy module "), 100)
	max := int64(len(body))
	cases := []struct {
		name, encoding string
		wire           []byte
	}{
		{"none", "", body},
		{"identity", "identity", body},
		{"gzip", "gzip", gzipBytes(t, body)},
		{"x-gzip upper case", " X-GZIP ", gzipBytes(t, body)},
		{"zstd", "zstd", zstdBytes(t, body)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadBody(bytes.NewReader(tc.wire), tc.encoding, max)
			if err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("decoded %d bytes, want the %d-byte body", len(got), len(body))
			}
			_, err = ReadBody(bytes.NewReader(tc.wire), tc.encoding, max-1)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("one byte over the limit: %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestReadBodyErrors(t *testing.T) {
	if _, err := ReadBody(strings.NewReader("x"), "br", 10); err == nil || !strings.Contains(err.Error(), `"br"`) {
		t.Errorf("unknown encoding: %v, want an error naming \"br\"", err)
	}
	for _, enc := range []string{"gzip", "zstd"} {
		_, err := ReadBody(strings.NewReader("definitely not compressed data"), enc, 1<<20)
		if err == nil || errors.Is(err, ErrTooLarge) {
			t.Errorf("%s garbage: %v, want a decoding error", enc, err)
		}
	}
	truncated := gzipBytes(t, bytes.Repeat([]byte("abc"), 1000))
	if _, err := ReadBody(bytes.NewReader(truncated[:len(truncated)-6]), "gzip", 1<<20); err == nil {
		t.Error("truncated gzip body accepted")
	}
	if _, err := ReadBody(strings.NewReader(""), "", -1); err == nil {
		t.Error("negative limit accepted")
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestReadBodyStopsAtLimit(t *testing.T) {
	// An endless body: ReadBody must stop rather than read forever.
	if _, err := ReadBody(zeros{}, "identity", 1<<16); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("endless body: %v, want ErrTooLarge", err)
	}
}

// bomb returns a body that decodes to n zero bytes (n a multiple of
// 1 MiB): one compressed MiB of zeros, repeated. Both gzip members and
// zstd frames may be concatenated, so it is a valid body.
func bomb(t *testing.T, encoding string, n int) []byte {
	t.Helper()
	mib := make([]byte, 1<<20)
	var one []byte
	switch encoding {
	case "gzip":
		one = gzipBytes(t, mib)
	case "zstd":
		one = zstdBytes(t, mib)
	}
	return bytes.Repeat(one, n>>20)
}

func TestReadBodyRejectsBomb(t *testing.T) {
	const (
		inflated = 100 << 20
		limit    = 1 << 20
		// Decoder state, the zstd window and the output buffer: far below
		// the inflated size.
		maxAlloc = 32 << 20
	)
	for _, enc := range []string{"gzip", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			wire := bomb(t, enc, inflated)
			if len(wire) > inflated/100 {
				t.Fatalf("bomb is %d bytes; the test wants a high ratio", len(wire))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := ReadBody(bytes.NewReader(wire), enc, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("bomb: %v, want ErrTooLarge", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte %s body for %d MiB: %d KiB allocated", len(wire), enc, inflated>>20, alloc>>10)
			if alloc > maxAlloc {
				t.Fatalf("decoding the bomb allocated %d MiB; it was inflated", alloc>>20)
			}
		})
	}
}

func TestParseDigest(t *testing.T) {
	hexd := strings.Repeat("0123456789abcdef", 4)
	canonical := "sha256:" + hexd
	cases := []struct {
		in, want string
	}{
		{canonical, canonical},
		{hexd, canonical},
		{strings.ToUpper(hexd), canonical},
		{"SHA256:" + strings.ToUpper(hexd), canonical},
		{"", ""},
		{"sha256:", ""},
		{hexd[:63], ""},
		{hexd + "0", ""},
		{"sha256:" + hexd[:63] + "g", ""},
		{"sha512:" + hexd, ""},
		{" " + hexd, ""},
		{"md5:" + hexd, ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDigest(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParseDigest(%q) = %q, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseDigest(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestDigestAndCheckDigest(t *testing.T) {
	b := []byte("module")
	sum := sha256.Sum256(b)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := Digest(b); got != want {
		t.Fatalf("Digest = %s, want %s", got, want)
	}
	if err := CheckDigest(b, strings.ToUpper(hex.EncodeToString(sum[:]))); err != nil {
		t.Fatalf("CheckDigest of bare upper-case hex: %v", err)
	}
	other := Digest([]byte("other"))
	err := CheckDigest(b, other)
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("CheckDigest mismatch: %v, want ErrDigestMismatch", err)
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), other) {
		t.Fatalf("mismatch error %q should give both digests", err)
	}
	if err := CheckDigest(b, "sha256:xyz"); err == nil || errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("malformed expected digest: %v, want a parse error", err)
	}
}

func testKey(t testing.TB, seed byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv.Public().(ed25519.PublicKey), priv
}

func TestParsePublicKey(t *testing.T) {
	pub, _ := testKey(t, 1)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)

	good := map[string]string{
		"std":             base64.StdEncoding.EncodeToString(pub),
		"raw std":         base64.RawStdEncoding.EncodeToString(pub),
		"url":             base64.URLEncoding.EncodeToString(pub),
		"raw url":         base64.RawURLEncoding.EncodeToString(pub),
		"std and newline": base64.StdEncoding.EncodeToString(pub) + "\n",
		"pem":             pemKey,
	}
	for name, in := range good {
		t.Run(name, func(t *testing.T) {
			k, err := ParsePublicKey(in)
			if err != nil || !k.Equal(pub) {
				t.Fatalf("ParsePublicKey = %x, %v, want %x", k, err, pub)
			}
		})
	}
	bad := map[string]string{
		"empty":         "",
		"garbage":       "not a key!",
		"short":         base64.StdEncoding.EncodeToString(pub[:31]),
		"long":          base64.StdEncoding.EncodeToString(append(pub, 0)),
		"private block": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"ecdsa":         string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})),
		"broken pem":    "-----BEGIN PUBLIC KEY-----\nAAAA",
		"bad der":       string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}})),
		"two blocks":    pemKey + pemKey,
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			if k, err := ParsePublicKey(in); err == nil {
				t.Fatalf("ParsePublicKey(%q) = %x, want an error", in, k)
			}
		})
	}
}

func TestKeyID(t *testing.T) {
	pub, _ := testKey(t, 1)
	sum := sha256.Sum256(pub)
	if got, want := KeyID(pub), hex.EncodeToString(sum[:8]); got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	pub1, priv1 := testKey(t, 1)
	pub2, priv2 := testKey(t, 2)
	_, stranger := testKey(t, 3)
	keys := NewTrustedKeys(pub1, pub2, pub1)
	if got := keys.IDs(); len(got) != 2 || got[0] != KeyID(pub1) || got[1] != KeyID(pub2) {
		t.Fatalf("IDs = %v, want the two distinct keys", got)
	}
	wasm := []byte("\x00asm module bytes")
	sig := func(k ed25519.PrivateKey, b []byte) []byte { return ed25519.Sign(k, b) }

	t.Run("good", func(t *testing.T) {
		for _, tc := range []struct {
			priv ed25519.PrivateKey
			pub  ed25519.PublicKey
			enc  *base64.Encoding
		}{
			{priv1, pub1, base64.StdEncoding},
			{priv2, pub2, base64.RawURLEncoding},
		} {
			id, err := keys.Verify(wasm, tc.enc.EncodeToString(sig(tc.priv, wasm)))
			if err != nil || id != KeyID(tc.pub) {
				t.Errorf("Verify = %q, %v, want %q", id, err, KeyID(tc.pub))
			}
		}
	})
	bad := []struct {
		name, sig string
		want      error
	}{
		{"empty", "", ErrUnsigned},
		{"blank", "  ", ErrUnsigned},
		{"wrong key", base64.StdEncoding.EncodeToString(sig(stranger, wasm)), ErrBadSignature},
		{"tampered bytes", base64.StdEncoding.EncodeToString(sig(priv1, append([]byte("x"), wasm...))), ErrBadSignature},
		{"garbage base64", "!!not base64!!", ErrBadSignature},
		{"wrong length", base64.StdEncoding.EncodeToString(sig(priv1, wasm)[:63]), ErrBadSignature},
		{"too long", base64.StdEncoding.EncodeToString(append(sig(priv1, wasm), 0)), ErrBadSignature},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if id, err := keys.Verify(wasm, tc.sig); !errors.Is(err, tc.want) || id != "" {
				t.Fatalf("Verify = %q, %v, want %v", id, err, tc.want)
			}
		})
	}
	t.Run("no keys", func(t *testing.T) {
		good := base64.StdEncoding.EncodeToString(sig(priv1, wasm))
		var none *TrustedKeys
		if _, err := none.Verify(wasm, good); !errors.Is(err, ErrBadSignature) {
			t.Errorf("nil TrustedKeys: %v, want ErrBadSignature", err)
		}
		if _, err := NewTrustedKeys().Verify(wasm, good); !errors.Is(err, ErrBadSignature) {
			t.Errorf("empty TrustedKeys: %v, want ErrBadSignature", err)
		}
		if _, err := none.Verify(wasm, ""); !errors.Is(err, ErrUnsigned) {
			t.Errorf("nil TrustedKeys, no signature: %v, want ErrUnsigned", err)
		}
	})
	t.Run("caller's key slice", func(t *testing.T) {
		k := append(ed25519.PublicKey(nil), pub1...)
		tk := NewTrustedKeys(k)
		k[0] ^= 0xff
		if _, err := tk.Verify(wasm, base64.StdEncoding.EncodeToString(sig(priv1, wasm))); err != nil {
			t.Fatalf("changing the caller's slice changed the trusted key: %v", err)
		}
	})
	t.Run("bad key length panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Fatal("NewTrustedKeys accepted a 31-byte key")
			}
		}()
		NewTrustedKeys(pub1[:31])
	})
}

func BenchmarkReadBodyZstd(b *testing.B) {
	body := bytes.Repeat([]byte("\x00asm policy module body "), 40000)
	wire := zstdBytes(b, body)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ReadBody(bytes.NewReader(wire), "zstd", 4<<20); err != nil {
			b.Fatal(err)
		}
	}
}
