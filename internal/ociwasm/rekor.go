package ociwasm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Rekor inclusion proofs (RFC 6962 Merkle audit paths) and the signed
// checkpoints (signed notes, C2SP tlog-checkpoint) they lead to, verified
// with the standard library.

// logKey is a transparency or CT log's public key: ECDSA (Rekor v1 and
// the CT logs, signing a SHA-256 of the message), Ed25519 (Rekor v2 may)
// or RSA (PKCS #1 v1.5 over a SHA-256).
type logKey struct {
	der []byte // PKIX
	ec  *ecdsa.PublicKey
	ed  ed25519.PublicKey
	rsa *rsa.PublicKey
	// valid is when the trusted root says the key may be used.
	valid window
}

func parseLogKey(der []byte) (*logKey, error) {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, err
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return &logKey{der: der, ec: k}, nil
	case ed25519.PublicKey:
		return &logKey{der: der, ed: k}, nil
	case *rsa.PublicKey:
		return &logKey{der: der, rsa: k}, nil
	}
	return nil, fmt.Errorf("%T, want ECDSA, Ed25519 or RSA", pub)
}

// verify reports whether sig is the key's signature of msg.
func (k *logKey) verify(msg, sig []byte) bool {
	if k.ed != nil {
		return ed25519.Verify(k.ed, msg, sig)
	}
	sum := sha256.Sum256(msg)
	if k.rsa != nil {
		return rsa.VerifyPKCS1v15(k.rsa, crypto.SHA256, sum[:], sig) == nil
	}
	return ecdsa.VerifyASN1(k.ec, sum[:], sig)
}

// noteHint is the 4-byte key hint a signed note's signature by this key
// under name starts with: for ECDSA the SHA-256 of the PKIX key (Rekor),
// for Ed25519 SHA-256(name, "\n", 0x01, key) (C2SP signed-note), for RSA
// SHA-256(name, "\n", 0xff, "PKIX-RSA-PKCS#1v1.5", PKIX key) (rekor-tiles).
func (k *logKey) noteHint(name string) []byte {
	switch {
	case k.ed != nil:
		h := sha256.New()
		h.Write([]byte(name + "\n\x01"))
		h.Write(k.ed)
		return h.Sum(nil)[:4]
	case k.rsa != nil:
		h := sha256.New()
		h.Write([]byte(name + "\n\xffPKIX-RSA-PKCS#1v1.5"))
		h.Write(k.der)
		return h.Sum(nil)[:4]
	}
	sum := sha256.Sum256(k.der)
	return sum[:4]
}

// inclusionProof is a bundle tlog entry's proof that its body is a leaf
// of the log's tree whose root a checkpoint signs.
type inclusionProof struct {
	LogIndex   string   `json:"logIndex"`
	RootHash   string   `json:"rootHash"`
	TreeSize   string   `json:"treeSize"`
	Hashes     []string `json:"hashes"`
	Checkpoint struct {
		Envelope string `json:"envelope"`
	} `json:"checkpoint"`
}

// maxProofHashes bounds an audit path: 64 levels cover any tree size.
const maxProofHashes = 64

// verify checks that body is the leaf at the proof's index of a tree
// whose root is the one a checkpoint signed by key names.
func (p *inclusionProof) verify(key *logKey, body []byte) error {
	index, err1 := strconv.ParseUint(p.LogIndex, 10, 64)
	size, err2 := strconv.ParseUint(p.TreeSize, 10, 64)
	root, err3 := base64.StdEncoding.DecodeString(p.RootHash)
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("inclusion proof: %w", err)
	}
	if len(p.Hashes) > maxProofHashes {
		return fmt.Errorf("inclusion proof: %d hashes, at most %d", len(p.Hashes), maxProofHashes)
	}
	path := make([][]byte, len(p.Hashes))
	for i, h := range p.Hashes {
		if path[i], err1 = base64.StdEncoding.DecodeString(h); err1 != nil || len(path[i]) != sha256.Size {
			return fmt.Errorf("inclusion proof: hash %d is not a base64 SHA-256", i)
		}
	}
	cp, err := parseCheckpoint(p.Checkpoint.Envelope)
	if err != nil {
		return err
	}
	if !cp.signedBy(key) {
		return errors.New("the checkpoint is not signed by the log's key")
	}
	if cp.Size != size || !bytes.Equal(cp.Root[:], root) {
		return fmt.Errorf("the checkpoint (size %d, root %x) is not the proof's tree (size %d, root %x)", cp.Size, cp.Root, size, root)
	}
	if err := verifyInclusion(index, size, leafHash(body), path, cp.Root); err != nil {
		return fmt.Errorf("inclusion proof of leaf %d in a tree of %d: %w", index, size, err)
	}
	return nil
}

// leafHash is RFC 6962's hash of a leaf.
func leafHash(data []byte) [32]byte {
	return sha256.Sum256(append([]byte{0}, data...))
}

// nodeHash is RFC 6962's hash of an interior node.
func nodeHash(l, r []byte) [32]byte {
	b := make([]byte, 0, 1+2*sha256.Size)
	b = append(append(append(b, 1), l...), r...)
	return sha256.Sum256(b)
}

// verifyInclusion checks an audit path from leaf (at index of a tree of
// size) to root, as RFC 9162 section 2.1.3.2 says.
func verifyInclusion(index, size uint64, leaf [32]byte, path [][]byte, root [32]byte) error {
	if index >= size {
		return errors.New("the index is outside the tree")
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range path {
		if sn == 0 {
			return errors.New("the audit path is too long")
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r[:])
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = nodeHash(r[:], p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return errors.New("the audit path is too short")
	}
	if r != root {
		return errors.New("the audit path does not lead to the checkpoint's root")
	}
	return nil
}

// checkpoint is a transparency log's signed tree head, a signed note:
// origin, tree size and root hash lines (and optional others), a blank
// line, then signature lines "— NAME base64(hint(4) || signature)".
type checkpoint struct {
	Origin string
	Size   uint64
	Root   [32]byte
	text   []byte // what the signatures sign
	sigs   []noteSig
}

type noteSig struct {
	name      string
	hint, sig []byte
}

// Bounds on a checkpoint, far above what logs write.
const (
	maxCheckpoint     = 16 << 10
	maxCheckpointSigs = 16
)

// parseCheckpoint parses a signed checkpoint note.
func parseCheckpoint(s string) (*checkpoint, error) {
	if len(s) > maxCheckpoint {
		return nil, fmt.Errorf("checkpoint: %d bytes, at most %d", len(s), maxCheckpoint)
	}
	split := strings.LastIndex(s, "\n\n")
	if split < 0 || !strings.HasSuffix(s, "\n") {
		return nil, errors.New("checkpoint: not a signed note (text, a blank line, signature lines)")
	}
	text, sigs := s[:split+1], s[split+2:]
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || lines[0] == "" {
		return nil, errors.New("checkpoint: want origin, tree size and root hash lines")
	}
	cp := &checkpoint{Origin: lines[0], text: []byte(text)}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tree size: %w", err)
	}
	cp.Size = size
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != sha256.Size {
		return nil, errors.New("checkpoint: the root hash is not a base64 SHA-256")
	}
	copy(cp.Root[:], root)
	for _, l := range strings.Split(strings.TrimSuffix(sigs, "\n"), "\n") {
		rest, ok := strings.CutPrefix(l, "\u2014 ")
		name, b64, ok2 := strings.Cut(rest, " ")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if !ok || !ok2 || name == "" || err != nil || len(raw) < 5 {
			return nil, fmt.Errorf("checkpoint: signature line %q: want \"\u2014 NAME BASE64\"", l)
		}
		if len(cp.sigs) == maxCheckpointSigs {
			return nil, fmt.Errorf("checkpoint: more than %d signatures", maxCheckpointSigs)
		}
		cp.sigs = append(cp.sigs, noteSig{name: name, hint: raw[:4], sig: raw[4:]})
	}
	return cp, nil
}

// signedBy reports whether one of the checkpoint's signatures is key's.
func (cp *checkpoint) signedBy(key *logKey) bool {
	for _, s := range cp.sigs {
		if bytes.Equal(s.hint, key.noteHint(s.name)) && key.verify(cp.text, s.sig) {
			return true
		}
	}
	return false
}
