package ociwasm

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// TrustedRoot is the part of a Sigstore trusted root that keyless
// verification reads: Fulcio's certificate authorities, the Rekor and CT
// logs' keys, the timestamp authorities, and when each is valid.
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
		if err != nil {
			return nil, fmt.Errorf("trusted root: certificateAuthorities[%d] %w", i, err)
		}
		if len(chain) == 0 {
			return nil, fmt.Errorf("trusted root: certificateAuthorities[%d]: no certificates", i)
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
