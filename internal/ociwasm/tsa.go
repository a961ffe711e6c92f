package ociwasm

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// RFC 3161 signed timestamps (a timestamp authority's signature over the
// hash of a bundle's signature and a time), verified with the standard
// library and cryptobyte: the TimeStampResp's token is a CMS SignedData
// (RFC 5652) whose content is a TSTInfo and whose signer signs the
// content's digest in its signed attributes.

var (
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidTSTInfo       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 4}
	oidContentType   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
)

// hashes are the digest algorithms a timestamp may use.
var hashes = map[string]crypto.Hash{
	"2.16.840.1.101.3.4.2.1": crypto.SHA256,
	"2.16.840.1.101.3.4.2.2": crypto.SHA384,
	"2.16.840.1.101.3.4.2.3": crypto.SHA512,
}

// signatureAlgorithms maps a SignerInfo's signature algorithm (and, for
// a bare rsaEncryption, its digest algorithm) to x509's.
func signatureAlgorithm(sig asn1.ObjectIdentifier, h crypto.Hash) x509.SignatureAlgorithm {
	switch sig.String() {
	case "1.2.840.10045.4.3.2":
		return x509.ECDSAWithSHA256
	case "1.2.840.10045.4.3.3":
		return x509.ECDSAWithSHA384
	case "1.2.840.10045.4.3.4":
		return x509.ECDSAWithSHA512
	case "1.2.840.113549.1.1.11":
		return x509.SHA256WithRSA
	case "1.2.840.113549.1.1.12":
		return x509.SHA384WithRSA
	case "1.2.840.113549.1.1.13":
		return x509.SHA512WithRSA
	case "1.2.840.113549.1.1.1": // rsaEncryption: the digest algorithm says which
		return map[crypto.Hash]x509.SignatureAlgorithm{crypto.SHA256: x509.SHA256WithRSA, crypto.SHA384: x509.SHA384WithRSA, crypto.SHA512: x509.SHA512WithRSA}[h]
	case "1.3.101.112":
		return x509.PureEd25519
	}
	return x509.UnknownSignatureAlgorithm
}

// timestamp is what verification reads of an RFC 3161 TimeStampResp.
type timestamp struct {
	genTime     time.Time
	imprintHash crypto.Hash
	imprint     []byte
	certs       []*x509.Certificate // the token's own
	content     []byte              // the TSTInfo, as signed
	digestHash  crypto.Hash
	signedAttrs []byte // DER, re-tagged as the SET OF that is signed
	sigAlg      x509.SignatureAlgorithm
	sig         []byte
}

// maxTimestamp bounds one signed timestamp; a TSA's are a few KB.
const maxTimestamp = 64 << 10

var errTimestamp = errors.New("malformed")

// parseTimestamp parses a DER TimeStampResp (RFC 3161 section 2.4.2) whose
// status is granted.
func parseTimestamp(der []byte) (*timestamp, error) {
	if len(der) > maxTimestamp {
		return nil, fmt.Errorf("%d bytes, at most %d", len(der), maxTimestamp)
	}
	in := cryptobyte.String(der)
	var resp, status, token, ci cryptobyte.String
	var st int64
	if !in.ReadASN1(&resp, cbasn1.SEQUENCE) || !in.Empty() || !resp.ReadASN1(&status, cbasn1.SEQUENCE) || !status.ReadASN1Integer(&st) {
		return nil, fmt.Errorf("TimeStampResp: %w", errTimestamp)
	}
	if st != 0 && st != 1 {
		return nil, fmt.Errorf("TimeStampResp: status %d, not granted", st)
	}
	var ct asn1.ObjectIdentifier
	if !resp.ReadASN1(&token, cbasn1.SEQUENCE) || !token.ReadASN1ObjectIdentifier(&ct) || !ct.Equal(oidSignedData) ||
		!token.ReadASN1(&ci, cbasn1.Tag(0).Constructed().ContextSpecific()) {
		return nil, fmt.Errorf("TimeStampToken: want a CMS SignedData: %w", errTimestamp)
	}
	ts := &timestamp{}
	if err := ts.parseSignedData(ci); err != nil {
		return nil, err
	}
	if err := ts.parseTSTInfo(); err != nil {
		return nil, err
	}
	return ts, nil
}

// parseSignedData reads a SignedData's content, certificates and its one
// signer.
func (ts *timestamp) parseSignedData(ci cryptobyte.String) error {
	var sd, encap, e0, signers, si cryptobyte.String
	var version int64
	var et asn1.ObjectIdentifier
	if !ci.ReadASN1(&sd, cbasn1.SEQUENCE) || !sd.ReadASN1Integer(&version) || !sd.SkipASN1(cbasn1.SET) ||
		!sd.ReadASN1(&encap, cbasn1.SEQUENCE) || !encap.ReadASN1ObjectIdentifier(&et) ||
		!encap.ReadASN1(&e0, cbasn1.Tag(0).Constructed().ContextSpecific()) || !e0.ReadASN1Bytes(&ts.content, cbasn1.OCTET_STRING) {
		return fmt.Errorf("SignedData: %w", errTimestamp)
	}
	if !et.Equal(oidTSTInfo) {
		return fmt.Errorf("SignedData: content %s, want a TSTInfo", et)
	}
	var certs cryptobyte.String
	var hasCerts bool
	if !sd.ReadOptionalASN1(&certs, &hasCerts, cbasn1.Tag(0).Constructed().ContextSpecific()) ||
		!sd.SkipOptionalASN1(cbasn1.Tag(1).Constructed().ContextSpecific()) || !sd.ReadASN1(&signers, cbasn1.SET) {
		return fmt.Errorf("SignedData: %w", errTimestamp)
	}
	for !certs.Empty() {
		var c cryptobyte.String
		var tag cbasn1.Tag
		if !certs.ReadAnyASN1Element(&c, &tag) {
			return fmt.Errorf("SignedData certificates: %w", errTimestamp)
		}
		if tag == cbasn1.SEQUENCE { // other certificate formats are skipped
			cert, err := x509.ParseCertificate(c)
			if err != nil {
				return fmt.Errorf("SignedData certificate: %w", err)
			}
			ts.certs = append(ts.certs, cert)
		}
	}
	if !signers.ReadASN1(&si, cbasn1.SEQUENCE) || !signers.Empty() {
		return errors.New("SignedData: want exactly one signer")
	}
	return ts.parseSigner(si)
}

// parseSigner reads a SignerInfo: digest algorithm, signed attributes,
// signature algorithm and signature.
func (ts *timestamp) parseSigner(si cryptobyte.String) error {
	var version int64
	var digestAlg, sigAlg cryptobyte.String
	var dOID, sOID asn1.ObjectIdentifier
	var attrs cryptobyte.String
	attrsTag := cbasn1.Tag(0).Constructed().ContextSpecific()
	var sid cryptobyte.String
	if !si.ReadASN1Integer(&version) || !si.ReadAnyASN1Element(&sid, new(cbasn1.Tag)) ||
		!si.ReadASN1(&digestAlg, cbasn1.SEQUENCE) || !digestAlg.ReadASN1ObjectIdentifier(&dOID) ||
		!si.PeekASN1Tag(attrsTag) || !si.ReadASN1Element(&attrs, attrsTag) ||
		!si.ReadASN1(&sigAlg, cbasn1.SEQUENCE) || !sigAlg.ReadASN1ObjectIdentifier(&sOID) || !si.ReadASN1Bytes(&ts.sig, cbasn1.OCTET_STRING) {
		return fmt.Errorf("SignerInfo (signed attributes required): %w", errTimestamp)
	}
	ts.digestHash = hashes[dOID.String()]
	if ts.digestHash == 0 {
		return fmt.Errorf("SignerInfo: digest algorithm %s, want SHA-256, -384 or -512", dOID)
	}
	if ts.sigAlg = signatureAlgorithm(sOID, ts.digestHash); ts.sigAlg == x509.UnknownSignatureAlgorithm {
		return fmt.Errorf("SignerInfo: signature algorithm %s not supported", sOID)
	}
	// The signature is over the attributes as a SET OF (RFC 5652 5.4).
	ts.signedAttrs = append([]byte{0x31}, attrs[1:]...)
	return ts.checkAttributes(attrs)
}

// checkAttributes checks that the signed attributes say the content is a
// TSTInfo with the content's digest.
func (ts *timestamp) checkAttributes(attrs cryptobyte.String) error {
	var set cryptobyte.String
	if !attrs.ReadASN1(&set, cbasn1.Tag(0).Constructed().ContextSpecific()) {
		return fmt.Errorf("signed attributes: %w", errTimestamp)
	}
	var gotType, gotDigest bool
	for !set.Empty() {
		var a, values cryptobyte.String
		var typ asn1.ObjectIdentifier
		if !set.ReadASN1(&a, cbasn1.SEQUENCE) || !a.ReadASN1ObjectIdentifier(&typ) || !a.ReadASN1(&values, cbasn1.SET) {
			return fmt.Errorf("signed attributes: %w", errTimestamp)
		}
		switch {
		case typ.Equal(oidContentType):
			var v asn1.ObjectIdentifier
			if !values.ReadASN1ObjectIdentifier(&v) || !values.Empty() || !v.Equal(oidTSTInfo) {
				return errors.New("signed attributes: the content type is not a TSTInfo")
			}
			gotType = true
		case typ.Equal(oidMessageDigest):
			var d []byte
			h := ts.digestHash.New()
			h.Write(ts.content)
			if !values.ReadASN1Bytes(&d, cbasn1.OCTET_STRING) || !values.Empty() || !bytes.Equal(d, h.Sum(nil)) {
				return errors.New("signed attributes: the message digest is not the TSTInfo's")
			}
			gotDigest = true
		}
	}
	if !gotType || !gotDigest {
		return errors.New("signed attributes: want a content type and a message digest")
	}
	return nil
}

// parseTSTInfo reads the time and the message imprint of the content.
func (ts *timestamp) parseTSTInfo() error {
	in := cryptobyte.String(ts.content)
	var info, imprint, alg, gen cryptobyte.String
	var version int64
	var policy, hOID asn1.ObjectIdentifier
	if !in.ReadASN1(&info, cbasn1.SEQUENCE) || !info.ReadASN1Integer(&version) || !info.ReadASN1ObjectIdentifier(&policy) ||
		!info.ReadASN1(&imprint, cbasn1.SEQUENCE) || !imprint.ReadASN1(&alg, cbasn1.SEQUENCE) || !alg.ReadASN1ObjectIdentifier(&hOID) ||
		!imprint.ReadASN1Bytes(&ts.imprint, cbasn1.OCTET_STRING) || !info.SkipASN1(cbasn1.INTEGER) || !info.ReadASN1(&gen, cbasn1.GeneralizedTime) {
		return fmt.Errorf("TSTInfo: %w", errTimestamp)
	}
	if ts.imprintHash = hashes[hOID.String()]; ts.imprintHash == 0 {
		return fmt.Errorf("TSTInfo: imprint algorithm %s, want SHA-256, -384 or -512", hOID)
	}
	// RFC 3161: YYYYMMDDhhmmss[.s...]Z; time.Parse takes the fraction.
	s := string(gen)
	t, err := time.Parse("20060102150405Z", s)
	if err != nil || !strings.HasSuffix(s, "Z") {
		return fmt.Errorf("TSTInfo: genTime %q: want YYYYMMDDhhmmss[.f]Z", s)
	}
	ts.genTime = t
	return nil
}

// verify checks that a certificate of a timestamp authority of root (or
// one the token carries, chaining to such an authority, for time
// stamping, at the time stamped) signed the token, and that the token
// stamps signed; it returns the time.
func (ts *timestamp) verify(root *TrustedRoot, signed []byte) (time.Time, error) {
	h := ts.imprintHash.New()
	h.Write(signed)
	if !bytes.Equal(h.Sum(nil), ts.imprint) {
		return time.Time{}, errors.New("it stamps something else than the bundle's signature")
	}
	if len(root.tsaLeaves) == 0 {
		return time.Time{}, errors.New("the trusted root has no timestamp authority")
	}
	inter := root.tsaIntermediates.Clone()
	for _, c := range ts.certs {
		inter.AddCert(c)
	}
	var last error = errors.New("no certificate of the token or the trusted root's authorities signed it")
	for _, c := range append(append([]*x509.Certificate(nil), ts.certs...), root.tsaLeaves...) {
		if c.CheckSignature(ts.sigAlg, ts.signedAttrs, ts.sig) != nil {
			continue
		}
		chains, err := c.Verify(x509.VerifyOptions{Roots: root.tsaRoots, Intermediates: inter, CurrentTime: ts.genTime,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}})
		if err == nil {
			err = root.tsaValid.check(chains[0], ts.genTime, "timestamp authority")
		}
		if err != nil {
			last = fmt.Errorf("signed by %q: %w", c.Subject.CommonName, err)
			continue
		}
		return ts.genTime, nil
	}
	return time.Time{}, last
}

// maxTimestamps bounds a bundle's RFC 3161 timestamps.
const maxTimestamps = 8

// stamped verifies the bundle's RFC 3161 timestamps of sig and returns
// their times; any that does not verify refuses the bundle.
func (kb *keylessBundle) stamped(root *TrustedRoot, sig []byte) ([]time.Time, error) {
	tvd := kb.VerificationMaterial.TimestampVerificationData
	if tvd == nil {
		return nil, nil
	}
	if len(tvd.RFC3161Timestamps) > maxTimestamps {
		return nil, fmt.Errorf("%d RFC 3161 timestamps, at most %d", len(tvd.RFC3161Timestamps), maxTimestamps)
	}
	var times []time.Time
	for i, s := range tvd.RFC3161Timestamps {
		der, err := base64.StdEncoding.DecodeString(s.SignedTimestamp)
		if err != nil {
			return nil, fmt.Errorf("RFC 3161 timestamp %d: %w", i, err)
		}
		ts, err := parseTimestamp(der)
		if err != nil {
			return nil, fmt.Errorf("RFC 3161 timestamp %d: %w", i, err)
		}
		at, err := ts.verify(root, sig)
		if err != nil {
			return nil, fmt.Errorf("RFC 3161 timestamp %d: %w", i, err)
		}
		times = append(times, at)
	}
	return times, nil
}
