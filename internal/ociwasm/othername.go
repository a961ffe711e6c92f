package ociwasm

import (
	"crypto/x509"
	"encoding/asn1"
	"slices"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// Fulcio's username identities: a SAN that is an otherName of type
// 1.3.6.1.4.1.57264.1.7 holding a UTF8String ("user!oidc.example").
// crypto/x509 reads no otherName, so it marks a SAN extension holding only
// that as an unhandled critical extension and refuses the chain.

var (
	oidOtherName = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 7}
	oidSAN       = asn1.ObjectIdentifier{2, 5, 29, 17}
)

// otherNames returns the Fulcio otherName SANs of cert.
func otherNames(cert *x509.Certificate) []string {
	var out []string
	for _, e := range cert.Extensions {
		if !e.Id.Equal(oidSAN) {
			continue
		}
		in := cryptobyte.String(e.Value)
		var names cryptobyte.String
		if !in.ReadASN1(&names, cbasn1.SEQUENCE) {
			return nil
		}
		for !names.Empty() {
			var gn, value cryptobyte.String
			var tag cbasn1.Tag
			var typ asn1.ObjectIdentifier
			var s []byte
			if !names.ReadAnyASN1(&gn, &tag) {
				return nil
			}
			if tag == cbasn1.Tag(0).Constructed().ContextSpecific() && gn.ReadASN1ObjectIdentifier(&typ) && typ.Equal(oidOtherName) &&
				gn.ReadASN1(&value, cbasn1.Tag(0).Constructed().ContextSpecific()) && value.ReadASN1Bytes(&s, cbasn1.UTF8String) {
				out = append(out, string(s))
			}
		}
	}
	return out
}

// withOtherNameSAN returns cert, or when its only unhandled critical
// extension is a SAN that holds Fulcio otherNames, a copy that counts it
// handled.
func withOtherNameSAN(cert *x509.Certificate) *x509.Certificate {
	if len(cert.UnhandledCriticalExtensions) != 1 || !cert.UnhandledCriticalExtensions[0].Equal(oidSAN) || len(otherNames(cert)) == 0 {
		return cert
	}
	c := *cert
	c.UnhandledCriticalExtensions = slices.Clone(cert.UnhandledCriticalExtensions[:0])
	return &c
}
