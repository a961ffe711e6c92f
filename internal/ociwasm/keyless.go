package ociwasm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Keyless Sigstore bundles, verified offline with the standard library
// (and cryptobyte) against a pinned trusted root (Sigstore's
// trusted_root.json): the certificate's key must verify the signature; a
// transparency-log entry of a log of the root must record this signature
// and certificate, proven by its signed entry timestamp (Rekor v1's
// inclusion promise) or an inclusion proof to a checkpoint the log's key
// signed (rekor.go; Rekor v2 writes only these), both verified when both
// are there; the signing times are those the signed entry timestamps and
// the bundle's RFC 3161 timestamps (tsa.go) prove, at least one; the
// Fulcio certificate must chain to a certificate authority of the root at
// each of them and carry an SCT of a CT log of the root (sct.go, when the
// root lists any); and its identity (a SAN) and OIDC issuer must match a
// configured rule.

// Fulcio's certificate extensions naming the OIDC issuer.
var (
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8} // DER UTF8String
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1} // raw string
)

// Identity is who may have signed keylessly: the certificate's subject
// alternative name (a URI or an e-mail address), exactly or matching
// SANRegexp, and its OIDC issuer, exactly.
type Identity struct {
	SAN       string
	SANRegexp *regexp.Regexp
	Issuer    string
}

func (id Identity) String() string {
	san := id.SAN
	if id.SANRegexp != nil {
		san = "~" + id.SANRegexp.String()
	}
	return "keyless:" + id.Issuer + " " + san
}

func (id Identity) matches(sans []string, issuer string) bool {
	if issuer != id.Issuer {
		return false
	}
	for _, s := range sans {
		if id.SAN != "" && s == id.SAN || id.SANRegexp != nil && id.SANRegexp.MatchString(s) {
			return true
		}
	}
	return false
}

// keylessBundle is what keyless verification reads of a bundle besides
// what ParseBundle does.
type keylessBundle struct {
	VerificationMaterial struct {
		Certificate *struct {
			RawBytes string `json:"rawBytes"`
		} `json:"certificate"`
		X509CertificateChain *struct {
			Certificates []struct {
				RawBytes string `json:"rawBytes"`
			} `json:"certificates"`
		} `json:"x509CertificateChain"`
		TlogEntries               []tlogEntry `json:"tlogEntries"`
		TimestampVerificationData *struct {
			RFC3161Timestamps []struct {
				SignedTimestamp string `json:"signedTimestamp"`
			} `json:"rfc3161Timestamps"`
		} `json:"timestampVerificationData"`
	} `json:"verificationMaterial"`
}

// leafOf decodes b into kb and returns its signing certificate, nil for a
// key-pair bundle.
func (kb *keylessBundle) leafOf(b []byte) ([]byte, error) {
	if err := json.Unmarshal(b, kb); err != nil {
		return nil, err
	}
	return kb.leaf()
}

// leaf returns the bundle's signing certificate, nil for a key-pair
// bundle.
func (kb *keylessBundle) leaf() ([]byte, error) {
	vm := kb.VerificationMaterial
	raw := ""
	switch {
	case vm.Certificate != nil:
		raw = vm.Certificate.RawBytes
	case vm.X509CertificateChain != nil && len(vm.X509CertificateChain.Certificates) > 0:
		raw = vm.X509CertificateChain.Certificates[0].RawBytes
	default:
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(raw)
}

// VerifyKeyless verifies a keyless bundle (see above) against root and
// ids, and returns what ParseBundle returns of it and the identity rule
// that matched. sigs holds the one signature the certificate verified.
func VerifyKeyless(b []byte, root *TrustedRoot, ids []Identity) (subjects []string, by Identity, err error) {
	var kb keylessBundle
	if err := json.Unmarshal(b, &kb); err != nil {
		return nil, by, fmt.Errorf("bundle: %w", err)
	}
	der, err := kb.leaf()
	if err != nil || der == nil {
		return nil, by, fmt.Errorf("bundle: no signing certificate (a key-pair bundle): %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, by, fmt.Errorf("bundle: signing certificate: %w", err)
	}
	signed, sigs, subjects, err := parseSigned(b)
	if err != nil {
		return nil, by, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return nil, by, fmt.Errorf("bundle: certificate key %T: want ECDSA", cert.PublicKey)
	}
	var sig []byte
	for _, s := range sigs {
		if ecdsa.VerifyASN1(pub, signed[:], s) {
			sig = s
		}
	}
	if sig == nil {
		return nil, by, errors.New("the signature does not verify with the certificate's key")
	}
	times, err := kb.signedTimes(root, der, sig, signed)
	if err != nil {
		return nil, by, err
	}
	if err := verifyCert(root, cert, times); err != nil {
		return nil, by, err
	}
	issuer := certIssuer(cert)
	sans := append([]string(nil), cert.EmailAddresses...)
	for _, u := range cert.URIs {
		sans = append(sans, u.String())
	}
	sans = append(sans, otherNames(cert)...)
	for _, id := range ids {
		if id.matches(sans, issuer) {
			return subjects, id, nil
		}
	}
	return nil, by, fmt.Errorf("certificate of %q issued by %q: no configured identity matches", sans, issuer)
}

// signedTimes checks that the signature was logged and returns the times
// the bundle proves it was made at: its log entries' signed entry
// timestamps and its RFC 3161 timestamps, at least one.
func (kb *keylessBundle) signedTimes(root *TrustedRoot, certDER, sig []byte, signed [32]byte) ([]time.Time, error) {
	times, err := kb.logged(root, certDER, sig, signed)
	if err != nil {
		return nil, err
	}
	stamped, err := kb.stamped(root, sig)
	if err != nil {
		return nil, err
	}
	times = append(times, stamped...)
	if len(times) == 0 {
		return nil, errors.New("no signed time: the log entries carry inclusion proofs only, which prove no time; want a signed entry timestamp or an RFC 3161 timestamp")
	}
	return times, nil
}

// verifyCert checks that cert chains to a certificate authority of root,
// for code signing, at each of times, and carries an SCT of a CT log of
// root (when it lists any).
func verifyCert(root *TrustedRoot, cert *x509.Certificate, times []time.Time) error {
	var chain []*x509.Certificate
	for _, at := range times {
		chains, err := withOtherNameSAN(cert).Verify(x509.VerifyOptions{Roots: root.roots, Intermediates: root.intermediates, CurrentTime: at,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}})
		if err != nil {
			return fmt.Errorf("certificate at %s (a signed time of the bundle): %w", at.UTC().Format(time.RFC3339), err)
		}
		chain = chains[0]
		if err := root.caValid.check(chain, at, "certificate authority"); err != nil {
			return err
		}
	}
	if len(chain) < 2 {
		return errors.New("certificate: it is itself a root of the trusted root, not issued by one")
	}
	return verifySCTs(root, cert, chain[1])
}

// certIssuer is the OIDC issuer Fulcio wrote in cert.
func certIssuer(cert *x509.Certificate) string {
	for _, e := range cert.Extensions {
		switch {
		case e.Id.Equal(oidIssuerV2):
			var s string
			if _, err := asn1.UnmarshalWithParams(e.Value, &s, "utf8"); err == nil {
				return s
			}
		case e.Id.Equal(oidIssuerV1):
			return string(e.Value)
		}
	}
	return ""
}

func joinReasons(r []string) string {
	var b bytes.Buffer
	for i, s := range r {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}
