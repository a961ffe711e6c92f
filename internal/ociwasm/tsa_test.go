package ociwasm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm/sigstoretest"
)

// TestTimestampFromOpenSSL: a TimeStampResp made by `openssl ts -reply`
// (testdata/openssl-tsa: an ECDSA TSA under its own root, genTime with
// milliseconds, accuracy, a TSA name and an ESS signing certificate v2)
// verifies against a trusted root listing that authority, and its time is
// OpenSSL's; other data, or a trusted root without the authority, is
// refused.
func TestTimestampFromOpenSSL(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/openssl-tsa/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	der := func(name string) string {
		blk, _ := pem.Decode(read(name))
		return base64.StdEncoding.EncodeToString(blk.Bytes)
	}
	var tr map[string]any
	json.Unmarshal(sigstoretest.New(t).TrustedRoot, &tr)
	tr["timestampAuthorities"] = []any{map[string]any{"certChain": map[string]any{"certificates": []any{
		map[string]any{"rawBytes": der("tsa.pem")}, map[string]any{"rawBytes": der("root.pem")}}}}}
	raw, _ := json.Marshal(tr)
	root, err := ParseTrustedRoot(raw)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := parseTimestamp(read("reply.tsr"))
	if err != nil {
		t.Fatal(err)
	}
	at, err := ts.verify(root, read("data.bin"))
	if want := time.Date(2026, 12, 3, 9, 26, 18, 382e6, time.UTC); err != nil || !at.Equal(want) {
		t.Fatalf("verify: %v at %v, want %v", err, at, want)
	}
	if _, err := ts.verify(root, []byte("other")); err == nil || !strings.Contains(err.Error(), "stamps something else") {
		t.Fatalf("other data: %v", err)
	}
	other, _ := ParseTrustedRoot(sigstoretest.New(t).TrustedRoot)
	if _, err := ts.verify(other, read("data.bin")); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("another trusted root: %v", err)
	}
}

// TestParseTimestampRefused: malformed or ungranted responses are
// refused with the part that is wrong.
func TestParseTimestampRefused(t *testing.T) {
	f := sigstoretest.New(t)
	good := f.Timestamp(t, []byte("sig"), sigstoretest.T0, nil)
	if _, err := parseTimestamp(good); err != nil {
		t.Fatal(err)
	}
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 0xff
		return c
	}
	tstAt := strings.Index(string(good), "20260601120000Z")
	cases := []struct {
		name string
		der  []byte
		want string
	}{
		{"empty", nil, "TimeStampResp: malformed"},
		{"rejection", []byte{0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x02}, "status 2, not granted"},
		{"trailing bytes", append(append([]byte(nil), good...), 0), "TimeStampResp: malformed"},
		{"truncated", good[:len(good)-10], "TimeStampResp: malformed"},
		{"tampered time", flip(good, tstAt), "the message digest is not the TSTInfo's"},
		{"too large", make([]byte, maxTimestamp+1), "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseTimestamp(c.der); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want %q", err, c.want)
			}
		})
	}
}

// FuzzParseTimestamp: parseTimestamp never panics, and what verifies
// against the fixture's authority stamps what the fixture stamped.
func FuzzParseTimestamp(f *testing.F) {
	var t testing.TB = f
	fx := sigstoretest.New(t)
	root, err := ParseTrustedRoot(fx.TrustedRoot)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fx.Timestamp(t, []byte("sig"), sigstoretest.T0, nil))
	if b, err := os.ReadFile("testdata/openssl-tsa/reply.tsr"); err == nil {
		f.Add(b)
	}
	want := sha256.Sum256([]byte("sig"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := parseTimestamp(b)
		if err != nil {
			return
		}
		if _, err := ts.verify(root, []byte("sig")); err == nil && string(ts.imprint) != string(want[:]) {
			t.Fatalf("verified a timestamp of %x", ts.imprint)
		}
	})
}
