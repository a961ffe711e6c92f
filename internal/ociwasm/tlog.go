package ociwasm

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// A bundle's transparency-log entries: which log, what its body records,
// its signed entry timestamp (its inclusion proof is rekor.go's).

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
