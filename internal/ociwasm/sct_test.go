package ociwasm

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm/sigstoretest"
)

// TestSCTOptionalWithoutCTLogs: a trusted root that lists no CT logs (a
// private Sigstore without certificate transparency) accepts a
// certificate without an SCT; one that lists them refuses it.
func TestSCTOptionalWithoutCTLogs(t *testing.T) {
	f := sigstoretest.New(t)
	var j map[string]any
	json.Unmarshal(f.TrustedRoot, &j)
	delete(j, "ctlogs")
	raw, _ := json.Marshal(j)
	noCT, err := ParseTrustedRoot(raw)
	if err != nil {
		t.Fatal(err)
	}
	withCT, _ := ParseTrustedRoot(f.TrustedRoot)
	key := sigstoretest.ECKey(t)
	b := f.Bundle(t, key, f.LeafWith(t, key, testSAN, testIssuer, sigstoretest.LeafOpts{NoSCT: true}), sha256.Sum256([]byte("m")), bundleOpts{})
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	if _, _, err := VerifyKeyless(b, noCT, ids); err != nil {
		t.Fatalf("without CT logs: %v", err)
	}
	if _, _, err := VerifyKeyless(b, withCT, ids); err == nil || !strings.Contains(err.Error(), "certificate transparency") {
		t.Fatalf("with CT logs: %v", err)
	}
}

// TestTBSWithout: removing the SCT extension from a leaf's TBS gives the
// TBS of the same certificate issued without it, byte for byte; a TBS
// without the extension is unchanged.
func TestTBSWithout(t *testing.T) {
	f := sigstoretest.New(t)
	key := sigstoretest.ECKey(t)
	with, _ := x509.ParseCertificate(f.Leaf(t, key, testSAN, testIssuer))
	without, _ := x509.ParseCertificate(f.LeafWith(t, key, testSAN, testIssuer, sigstoretest.LeafOpts{NoSCT: true}))
	got, err := tbsWithout(with.RawTBSCertificate, oidSCTList)
	if err != nil || string(got) != string(without.RawTBSCertificate) {
		t.Fatalf("%v: the TBS without the SCT list differs from the certificate issued without one", err)
	}
	if got, err := tbsWithout(without.RawTBSCertificate, oidSCTList); err != nil || string(got) != string(without.RawTBSCertificate) {
		t.Fatalf("%v: a TBS without the extension changed", err)
	}
	for _, bad := range [][]byte{nil, {0x30, 0x03, 0xa3, 0x01, 0x00}, {0x30, 0x02, 0x02}} {
		if _, err := tbsWithout(bad, oidSCTList); err == nil {
			t.Errorf("tbsWithout(%x): no error", bad)
		}
	}
}

// FuzzSCT: parseSCTs and tbsWithout never panic; an SCT list parses back
// to at most maxSCTs entries.
func FuzzSCT(f *testing.F) {
	var t testing.TB = f
	fx := sigstoretest.New(t)
	key := sigstoretest.ECKey(t)
	c, _ := x509.ParseCertificate(fx.Leaf(t, key, testSAN, testIssuer))
	f.Add(c.RawTBSCertificate)
	for _, e := range c.Extensions {
		if e.Id.Equal(oidSCTList) {
			f.Add(e.Value[2:])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if scts, err := parseSCTs(b); err == nil && len(scts) > maxSCTs {
			t.Fatalf("%d SCTs", len(scts))
		}
		tbsWithout(b, oidSCTList)
	})
}
