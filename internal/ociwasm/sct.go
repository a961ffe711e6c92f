package ociwasm

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// Certificate transparency: Fulcio embeds in each certificate the signed
// certificate timestamps (RFC 6962 section 3.3) of the CT logs it
// submitted the precertificate to; each signs the certificate's TBS
// without that extension and the issuer's key hash.

// oidSCTList is the embedded SCT list extension.
var oidSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}

// sct is one signed certificate timestamp, version 1.
type sct struct {
	logID      [32]byte
	timestamp  uint64
	extensions []byte
	hashAlg    uint8
	sigAlg     uint8
	sig        []byte
}

// maxSCTs bounds an SCT list; Fulcio embeds one or two.
const maxSCTs = 16

// parseSCTs parses a TLS-encoded SignedCertificateTimestampList (the
// extension's OCTET STRING content).
func parseSCTs(b []byte) ([]sct, error) {
	in := cryptobyte.String(b)
	var list cryptobyte.String
	if !in.ReadUint16LengthPrefixed(&list) || !in.Empty() {
		return nil, errors.New("SCT list: malformed")
	}
	var out []sct
	for !list.Empty() {
		var one cryptobyte.String
		var s sct
		var version uint8
		var logID, ext, sig []byte
		if !list.ReadUint16LengthPrefixed(&one) || !one.ReadUint8(&version) || !one.ReadBytes(&logID, 32) ||
			!one.ReadUint64(&s.timestamp) || !one.ReadUint16LengthPrefixed((*cryptobyte.String)(&ext)) ||
			!one.ReadUint8(&s.hashAlg) || !one.ReadUint8(&s.sigAlg) || !one.ReadUint16LengthPrefixed((*cryptobyte.String)(&sig)) || !one.Empty() {
			return nil, fmt.Errorf("SCT %d: malformed", len(out))
		}
		if version != 0 {
			return nil, fmt.Errorf("SCT %d: version %d, want 1 (0)", len(out), version)
		}
		if len(out) == maxSCTs {
			return nil, fmt.Errorf("SCT list: more than %d", maxSCTs)
		}
		copy(s.logID[:], logID)
		s.extensions, s.sig = ext, sig
		out = append(out, s)
	}
	return out, nil
}

// tbsWithout returns a TBSCertificate's DER without the extension oid.
func tbsWithout(tbs []byte, oid asn1.ObjectIdentifier) ([]byte, error) {
	in := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() {
		return nil, errors.New("TBSCertificate: malformed")
	}
	extTag := cbasn1.Tag(3).Constructed().ContextSpecific()
	var b cryptobyte.Builder
	var failed error
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		for !body.Empty() {
			var el, exts cryptobyte.String
			var tag cbasn1.Tag
			if !body.ReadAnyASN1Element(&el, &tag) {
				failed = errors.New("TBSCertificate: malformed")
				return
			}
			if tag != extTag {
				b.AddBytes(el)
				continue
			}
			var outer cryptobyte.String
			if !el.ReadASN1(&outer, extTag) || !outer.ReadASN1(&exts, cbasn1.SEQUENCE) {
				failed = errors.New("TBSCertificate extensions: malformed")
				return
			}
			b.AddASN1(extTag, func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					for !exts.Empty() {
						var ext, whole, e cryptobyte.String
						var id asn1.ObjectIdentifier
						if !exts.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
							failed = errors.New("TBSCertificate extension: malformed")
							return
						}
						if whole = ext; !whole.ReadASN1(&e, cbasn1.SEQUENCE) || !e.ReadASN1ObjectIdentifier(&id) {
							failed = errors.New("TBSCertificate extension: malformed")
							return
						}
						if !id.Equal(oid) {
							b.AddBytes(ext)
						}
					}
				})
			})
		}
	})
	if failed != nil {
		return nil, failed
	}
	return b.Bytes()
}

// verifySCTs checks, when root lists CT logs, that one of cert's embedded
// SCTs is by such a log and signs cert (issued by issuer).
func verifySCTs(root *TrustedRoot, cert, issuer *x509.Certificate) error {
	if len(root.ctlogs) == 0 {
		return nil
	}
	var raw []byte
	for _, e := range cert.Extensions {
		if e.Id.Equal(oidSCTList) {
			raw = e.Value
		}
	}
	var list []byte
	if rest, err := asn1.Unmarshal(raw, &list); raw == nil || err != nil || len(rest) > 0 {
		return errors.New("certificate transparency: the certificate embeds no SCT list")
	}
	scts, err := parseSCTs(list)
	if err != nil {
		return fmt.Errorf("certificate transparency: %w", err)
	}
	tbs, err := tbsWithout(cert.RawTBSCertificate, oidSCTList)
	if err != nil {
		return fmt.Errorf("certificate transparency: %w", err)
	}
	keyHash := sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	var reasons []string
	for i, s := range scts {
		key := root.ctlogs[hex.EncodeToString(s.logID[:])]
		if key == nil {
			reasons = append(reasons, fmt.Sprintf("SCT %d: log %x is not a CT log of the trusted root", i, s.logID))
			continue
		}
		if !key.verify(sctSigned(s, keyHash, tbs), s.sig) {
			reasons = append(reasons, fmt.Sprintf("SCT %d: the signature does not verify with log %x's key", i, s.logID))
			continue
		}
		if at := time.UnixMilli(int64(s.timestamp)); !key.valid.contains(at) {
			reasons = append(reasons, fmt.Sprintf("SCT %d: log %x's key is not valid at %s (validFor %v)", i, s.logID, at.UTC().Format(time.RFC3339), key.valid))
			continue
		}
		return nil
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "the SCT list is empty")
	}
	return errors.New("certificate transparency: " + joinReasons(reasons))
}

// sctSigned is what a precertificate's SCT signs (RFC 6962 section 3.2).
func sctSigned(s sct, issuerKeyHash [32]byte, tbs []byte) []byte {
	b := []byte{0, 0} // version 1, certificate_timestamp
	b = binary.BigEndian.AppendUint64(b, s.timestamp)
	b = append(b, 0, 1) // precert_entry
	b = append(b, issuerKeyHash[:]...)
	b = append(b, byte(len(tbs)>>16), byte(len(tbs)>>8), byte(len(tbs)))
	b = append(b, tbs...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.extensions)))
	return append(b, s.extensions...)
}
