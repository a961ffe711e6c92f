package ociwasm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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

// TrustedRoot is the part of a Sigstore trusted root that keyless
// verification reads: Fulcio's certificate authorities and Rekor's keys.
type TrustedRoot struct {
	roots, intermediates *x509.CertPool
	logs                 map[string]*logKey // hex log ID -> key
	ctlogs               map[string]*logKey // certificate transparency logs, hex log ID -> key
	// Timestamp authorities: each chain's first certificate, the others
	// but the last, the last.
	tsaLeaves                  []*x509.Certificate
	tsaIntermediates, tsaRoots *x509.CertPool
	// When each certificate or timestamp authority is valid, by its root.
	caValid, tsaValid anchors
}

// certChain is a trusted root's certificate chain, the root last.
type certChain struct {
	validForJSON
	CertChain struct {
		Certificates []struct {
			RawBytes string `json:"rawBytes"`
		} `json:"certificates"`
	} `json:"certChain"`
}

// parse returns the chain's certificates.
func (c certChain) parse() ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for k, c := range c.CertChain.Certificates {
		der, err := base64.StdEncoding.DecodeString(c.RawBytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", k, err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", k, err)
		}
		out = append(out, cert)
	}
	return out, nil
}

// logJSON is a trusted root's transparency or CT log.
type logJSON struct {
	validForJSON
	PublicKey struct {
		RawBytes string `json:"rawBytes"`
	} `json:"publicKey"`
	LogID struct {
		KeyID string `json:"keyId"`
	} `json:"logId"`
}

// parseLogs returns the logs' keys by hex log ID (the trusted root's, or
// the SHA-256 of the key).
func parseLogs(logs []logJSON, what string) (map[string]*logKey, error) {
	out := map[string]*logKey{}
	for i, l := range logs {
		der, err := base64.StdEncoding.DecodeString(l.PublicKey.RawBytes)
		if err != nil {
			return nil, fmt.Errorf("trusted root: %s[%d] public key: %w", what, i, err)
		}
		key, err := parseLogKey(der)
		if err != nil {
			return nil, fmt.Errorf("trusted root: %s[%d] public key: %w", what, i, err)
		}
		if key.valid, err = l.window(); err != nil {
			return nil, fmt.Errorf("trusted root: %s[%d] %w", what, i, err)
		}
		id, err := base64.StdEncoding.DecodeString(l.LogID.KeyID)
		if err != nil || len(id) == 0 {
			sum := sha256.Sum256(der)
			id = sum[:]
		}
		out[hex.EncodeToString(id)] = key
	}
	return out, nil
}

type trustedRootJSON struct {
	Tlogs                  []logJSON   `json:"tlogs"`
	Ctlogs                 []logJSON   `json:"ctlogs"`
	CertificateAuthorities []certChain `json:"certificateAuthorities"`
	TimestampAuthorities   []certChain `json:"timestampAuthorities"`
}

// ParseTrustedRoot reads a Sigstore trusted root (trusted_root.json, as
// `sigstore` TUF repositories publish it or a private deployment writes
// it): each certificate authority's chain (the root last) and each
// transparency log's ECDSA key.
func ParseTrustedRoot(b []byte) (*TrustedRoot, error) {
	var j trustedRootJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	tr := &TrustedRoot{roots: x509.NewCertPool(), intermediates: x509.NewCertPool(),
		tsaIntermediates: x509.NewCertPool(), tsaRoots: x509.NewCertPool(), caValid: anchors{}, tsaValid: anchors{}}
	cas := 0
	for i, ca := range j.CertificateAuthorities {
		chain, err := ca.parse()
		if err != nil {
			return nil, fmt.Errorf("trusted root: certificateAuthorities[%d] %w", i, err)
		}
		w, err := ca.window()
		if err != nil || len(chain) == 0 {
			return nil, fmt.Errorf("trusted root: certificateAuthorities[%d]: no certificates or %v", i, err)
		}
		tr.caValid.add(chain[len(chain)-1], w)
		for k, cert := range chain {
			if k == len(chain)-1 {
				tr.roots.AddCert(cert)
				cas++
			} else {
				tr.intermediates.AddCert(cert)
			}
		}
	}
	for i, ta := range j.TimestampAuthorities {
		chain, err := ta.parse()
		if err != nil {
			return nil, fmt.Errorf("trusted root: timestampAuthorities[%d] %w", i, err)
		}
		if len(chain) < 2 {
			return nil, fmt.Errorf("trusted root: timestampAuthorities[%d]: %d certificates, want the authority's and its root", i, len(chain))
		}
		w, err := ta.window()
		if err != nil {
			return nil, fmt.Errorf("trusted root: timestampAuthorities[%d] %w", i, err)
		}
		tr.tsaValid.add(chain[len(chain)-1], w)
		tr.tsaLeaves = append(tr.tsaLeaves, chain[0])
		for _, c := range chain[1 : len(chain)-1] {
			tr.tsaIntermediates.AddCert(c)
		}
		tr.tsaRoots.AddCert(chain[len(chain)-1])
	}
	var err error
	if tr.logs, err = parseLogs(j.Tlogs, "tlogs"); err != nil {
		return nil, err
	}
	if tr.ctlogs, err = parseLogs(j.Ctlogs, "ctlogs"); err != nil {
		return nil, err
	}
	if cas == 0 || len(tr.logs) == 0 {
		return nil, fmt.Errorf("trusted root: %d certificate authorities and %d transparency logs: want at least one of each", cas, len(tr.logs))
	}
	return tr, nil
}

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
		chains, err := cert.Verify(x509.VerifyOptions{Roots: root.roots, Intermediates: root.intermediates, CurrentTime: at,
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

// setPayload is what Rekor's signed entry timestamp signs, in canonical
// JSON (keys sorted, no spaces).
type setPayload struct {
	Body           string `json:"body"`
	IntegratedTime int64  `json:"integratedTime"`
	LogID          string `json:"logID"`
	LogIndex       int64  `json:"logIndex"`
}

// maxTlogEntries bounds the log entries of a bundle (cosign writes one).
const maxTlogEntries = 8

// errUnknownLog: an entry of a log the trusted root does not list.
var errUnknownLog = errors.New("not a transparency log of the trusted root")

// logged checks that a transparency log of root recorded this signature
// and certificate, and returns the times the entries' signed entry
// timestamps prove (none for inclusion proofs alone). Entries of logs the
// root does not list are skipped; any other that does not verify refuses
// the bundle.
func (kb *keylessBundle) logged(root *TrustedRoot, certDER, sig []byte, signed [32]byte) ([]time.Time, error) {
	entries := kb.VerificationMaterial.TlogEntries
	if len(entries) == 0 {
		return nil, errors.New("the bundle has no transparency-log entry to prove it was logged")
	}
	if len(entries) > maxTlogEntries {
		return nil, fmt.Errorf("%d transparency-log entries, at most %d", len(entries), maxTlogEntries)
	}
	var reasons []string
	var times []time.Time
	ok := false
	for i, e := range entries {
		at, timed, err := e.verify(root, certDER, sig, signed)
		if errors.Is(err, errUnknownLog) {
			reasons = append(reasons, fmt.Sprintf("tlog entry %d: %v", i, err))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tlog entry %d: %w", i, err)
		}
		ok = true
		if timed {
			times = append(times, at)
		}
	}
	if !ok {
		return nil, errors.New(joinReasons(reasons))
	}
	return times, nil
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

// tlogEntry is a transparency-log entry of a bundle.
type tlogEntry struct {
	LogIndex string `json:"logIndex"`
	LogID    struct {
		KeyID string `json:"keyId"`
	} `json:"logId"`
	IntegratedTime   string `json:"integratedTime"`
	InclusionPromise *struct {
		SignedEntryTimestamp string `json:"signedEntryTimestamp"`
	} `json:"inclusionPromise"`
	InclusionProof    *inclusionProof `json:"inclusionProof"`
	CanonicalizedBody string          `json:"canonicalizedBody"`
}

// verify checks that the entry is of a log of root and its body records
// this signature and certificate, then its signed entry timestamp (with
// the log's key) and its inclusion proof, whichever it carries (at least
// one; both must verify). It returns the integrated time the signed entry
// timestamp proves (timed is false without one).
func (e *tlogEntry) verify(root *TrustedRoot, certDER, sig []byte, signed [32]byte) (at time.Time, timed bool, err error) {
	id, err := base64.StdEncoding.DecodeString(e.LogID.KeyID)
	if err != nil {
		return at, false, fmt.Errorf("log ID: %w", err)
	}
	key := root.logs[hex.EncodeToString(id)]
	if key == nil {
		return at, false, fmt.Errorf("log %x is %w", id, errUnknownLog)
	}
	if e.InclusionPromise == nil && e.InclusionProof == nil {
		return at, false, errors.New("neither a signed entry timestamp nor an inclusion proof")
	}
	body, err := base64.StdEncoding.DecodeString(e.CanonicalizedBody)
	if err != nil {
		return at, false, fmt.Errorf("body: %w", err)
	}
	if e.InclusionPromise != nil {
		if at, err = e.verifySET(key, id); err != nil {
			return at, false, err
		}
		timed = true
	}
	if e.InclusionProof != nil {
		if err := e.InclusionProof.verify(key, body); err != nil {
			return at, false, err
		}
	}
	if err := bodyNames(body, certDER, sig, signed); err != nil {
		return at, false, err
	}
	return at, timed, nil
}

// verifySET checks the entry's signed entry timestamp (Rekor v1's
// inclusion promise) and returns the integrated time it signs.
func (e *tlogEntry) verifySET(key *logKey, id []byte) (time.Time, error) {
	index, err1 := strconv.ParseInt(e.LogIndex, 10, 64)
	at, err2 := strconv.ParseInt(e.IntegratedTime, 10, 64)
	set, err3 := base64.StdEncoding.DecodeString(e.InclusionPromise.SignedEntryTimestamp)
	if err := errors.Join(err1, err2, err3); err != nil {
		return time.Time{}, err
	}
	payload, _ := json.Marshal(setPayload{Body: e.CanonicalizedBody, IntegratedTime: at, LogID: hex.EncodeToString(id), LogIndex: index})
	if !key.verify(payload, set) {
		return time.Time{}, errors.New("the signed entry timestamp does not verify with the log's key")
	}
	if !key.valid.contains(time.Unix(at, 0)) {
		return time.Time{}, fmt.Errorf("the log's key is not valid at the integrated time %s (validFor %v)", time.Unix(at, 0).UTC().Format(time.RFC3339), key.valid)
	}
	return time.Unix(at, 0), nil
}

// rekorBody is the part of a hashedrekord or dsse entry body that names
// the signature and the certificate.
type rekorBody struct {
	Kind string `json:"kind"`
	Spec struct {
		Data *struct {
			Hash struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"value"`
			} `json:"hash"`
		} `json:"data"`
		Signature *struct {
			Content   string `json:"content"`
			PublicKey struct {
				Content string `json:"content"`
			} `json:"publicKey"`
		} `json:"signature"`
		Signatures []struct {
			Signature string `json:"signature"`
			Verifier  string `json:"verifier"`
		} `json:"signatures"`
		// intoto 0.0.2: the envelope's signatures, each base64 twice.
		Content *struct {
			Envelope struct {
				Signatures []struct {
					Sig       string `json:"sig"`
					PublicKey string `json:"publicKey"`
				} `json:"signatures"`
			} `json:"envelope"`
		} `json:"content"`
		// Rekor v2 (apiVersion 0.0.2).
		HashedRekordV002 *struct {
			Data struct {
				Algorithm string `json:"algorithm"`
				Digest    string `json:"digest"`
			} `json:"data"`
			Signature signatureV002 `json:"signature"`
		} `json:"hashedRekordV002"`
		DSSEV002 *struct {
			Signatures []signatureV002 `json:"signatures"`
		} `json:"dsseV002"`
	} `json:"spec"`
}

// signatureV002 is a signature and its verifier in a Rekor v2 body.
type signatureV002 struct {
	Content  string `json:"content"`
	Verifier struct {
		X509Certificate struct {
			RawBytes string `json:"rawBytes"`
		} `json:"x509Certificate"`
	} `json:"verifier"`
}

// bodyNames checks that a log entry body records this signature by this
// certificate (and, for hashedrekord, this digest).
func bodyNames(body, certDER, sig []byte, signed [32]byte) error {
	var rb rekorBody
	if err := json.Unmarshal(body, &rb); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	sameCert := func(b64PEM string) bool {
		p, err := base64.StdEncoding.DecodeString(b64PEM)
		if err != nil {
			return false
		}
		blk, _ := pem.Decode(p)
		return blk != nil && bytes.Equal(blk.Bytes, certDER)
	}
	sameSig := func(b64 string) bool {
		s, err := base64.StdEncoding.DecodeString(b64)
		return err == nil && bytes.Equal(s, sig)
	}
	sameV002 := func(s signatureV002) bool {
		der, err := base64.StdEncoding.DecodeString(s.Verifier.X509Certificate.RawBytes)
		return err == nil && bytes.Equal(der, certDER) && sameSig(s.Content)
	}
	switch {
	case rb.Kind == "hashedrekord" && rb.Spec.HashedRekordV002 != nil:
		h := rb.Spec.HashedRekordV002
		if !sameV002(h.Signature) {
			return errors.New("the entry records another signature or certificate")
		}
		if d, err := base64.StdEncoding.DecodeString(h.Data.Digest); err != nil || h.Data.Algorithm != "SHA2_256" || !bytes.Equal(d, signed[:]) {
			return errors.New("the entry records another digest")
		}
		return nil
	case rb.Kind == "dsse" && rb.Spec.DSSEV002 != nil:
		if slices.ContainsFunc(rb.Spec.DSSEV002.Signatures, sameV002) {
			return nil
		}
		return errors.New("the entry records another signature or certificate")
	case rb.Kind == "hashedrekord":
		sp := rb.Spec
		if sp.Signature == nil || sp.Data == nil || !sameSig(sp.Signature.Content) || !sameCert(sp.Signature.PublicKey.Content) {
			return errors.New("the entry records another signature or certificate")
		}
		if sp.Data.Hash.Algorithm != "sha256" || sp.Data.Hash.Value != hex.EncodeToString(signed[:]) {
			return errors.New("the entry records another digest")
		}
		return nil
	case rb.Kind == "intoto" && rb.Spec.Content != nil:
		for _, s := range rb.Spec.Content.Envelope.Signatures {
			if inner, err := base64.StdEncoding.DecodeString(s.Sig); err == nil && sameSig(string(inner)) && sameCert(s.PublicKey) {
				return nil
			}
		}
		return errors.New("the entry records another signature or certificate")
	case rb.Kind == "dsse":
		for _, s := range rb.Spec.Signatures {
			if sameSig(s.Signature) && sameCert(s.Verifier) {
				return nil
			}
		}
		return errors.New("the entry records another signature or certificate")
	}
	return fmt.Errorf("entry kind %q: want hashedrekord, dsse or intoto", rb.Kind)
}
