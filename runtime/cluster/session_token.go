package cluster

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// A session token is the downstream Mcp-Session-Id of a fleet: what a
// replica needs to serve a session it never saw, sealed so that only the
// fleet can read or make one.
//
//	token = base64url( 'S' | version 1 | nonce (24) | XChaCha20-Poly1305(claims JSON) )
//
// The key is HKDF-SHA256 of a configured secret; the fleet's name is the
// additional data, so a token of another fleet (another name, or another
// secret) does not open. The first secret seals, every secret opens
// (rotation).

// SessionTTL is how long a session token is valid after it was issued,
// unless the config says otherwise (cluster.session_ttl); a client holding
// an expired one gets 404 and initialises again.
const SessionTTL = 24 * time.Hour

// maxTokenLen bounds the session ids the opener looks at.
const maxTokenLen = 8 << 10

// maxClaimJSON bounds the client capabilities and client info a token
// carries verbatim; larger ones are cut down (see Seal).
const maxClaimJSON = 1 << 10

const (
	tokenMagic   = 'S'
	tokenVersion = 1
	tokenHeader  = 2
)

var tokenEncoding = base64.RawURLEncoding

// SessionClaims are what a session token says.
type SessionClaims struct {
	Identity string          `json:"id"`           // the auth identity that opened the session
	Method   string          `json:"am,omitempty"` // how it authenticated
	Version  string          `json:"v"`            // negotiated protocol version
	Caps     json.RawMessage `json:"c,omitempty"`  // the client's capabilities, as sent
	Info     json.RawMessage `json:"ci,omitempty"` // the client's clientInfo, as sent
	LogLevel string          `json:"l,omitempty"`  // logging/setLevel, when set at issue
	Owner    string          `json:"o"`            // replica that opened the session (per-client upstream state)
	Issued   int64           `json:"iat"`          // unix seconds
	Expires  int64           `json:"exp"`          // unix seconds
	Nonce    string          `json:"n,omitempty"`  // makes two sessions of one client differ
}

// Sealer seals and opens a fleet's session tokens. It is immutable and safe
// for concurrent use.
type Sealer struct {
	fleet []byte
	aeads []cipher.AEAD // first seals
	now   func() time.Time
	ttl   time.Duration
}

// ErrBadToken says a session id is not a valid token of this fleet: forged,
// altered, of another fleet, or expired.
var ErrBadToken = errors.New("not a valid session token of this fleet")

// NewSealer derives the keys of secrets (first one sealing) for the fleet
// called fleet.
func NewSealer(fleet string, secrets []string) (*Sealer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("session tokens: no secret configured")
	}
	s := &Sealer{fleet: []byte(fleet), now: time.Now, ttl: SessionTTL}
	for i, secret := range secrets {
		if secret == "" {
			return nil, fmt.Errorf("session tokens: secret %d is empty", i)
		}
		key, err := hkdf.Key(sha256.New, []byte(secret), nil, "edge-mcp session token v1", chacha20poly1305.KeySize)
		if err != nil {
			return nil, fmt.Errorf("session tokens: deriving key %d: %w", i, err)
		}
		aead, err := chacha20poly1305.NewX(key)
		if err != nil {
			return nil, fmt.Errorf("session tokens: key %d: %w", i, err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// WithTTL returns a Sealer whose tokens are valid for ttl after they are
// issued (SessionTTL when ttl is not positive). Opening checks the expiry a
// token carries, so tokens sealed before keep theirs.
func (s *Sealer) WithTTL(ttl time.Duration) *Sealer {
	c := *s
	c.ttl = SessionTTL
	if ttl > 0 {
		c.ttl = ttl
	}
	return &c
}

// TTL is how long the tokens s seals are valid.
func (s *Sealer) TTL() time.Duration { return s.ttl }

// Seal stamps c with the issue time and expiry and seals it into a token.
// Capabilities or client info larger than 1 KiB are not carried verbatim:
// capabilities keep their top-level names, client info is dropped.
func (s *Sealer) Seal(c SessionClaims) (string, error) { return s.SealAt(c, s.now()) }

// SealAt is Seal as if at time now (tests make expired tokens with it).
func (s *Sealer) SealAt(c SessionClaims, now time.Time) (string, error) {
	c.Issued, c.Expires = now.Unix(), now.Add(s.ttl).Unix()
	if len(c.Caps) > maxClaimJSON {
		c.Caps = capNames(c.Caps)
	}
	if len(c.Info) > maxClaimJSON {
		c.Info = nil
	}
	if c.Nonce == "" {
		c.Nonce = rand.Text()[:8]
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("session token: encoding claims: %w", err)
	}
	aead := s.aeads[0]
	buf := make([]byte, tokenHeader+aead.NonceSize(), tokenHeader+aead.NonceSize()+len(plain)+aead.Overhead())
	buf[0], buf[1] = tokenMagic, tokenVersion
	if _, err := rand.Read(buf[tokenHeader:]); err != nil {
		return "", fmt.Errorf("session token: nonce: %w", err)
	}
	sealed := aead.Seal(buf, buf[tokenHeader:], plain, s.fleet)
	return tokenEncoding.EncodeToString(sealed), nil
}

// capNames keeps the top-level names of a capabilities object, each with
// an empty object.
func capNames(caps json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(caps, &m) != nil {
		return nil
	}
	for k := range m {
		m[k] = json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(m)
	return b
}

// Open checks and opens a token: ErrBadToken (wrapped with the reason)
// unless it was sealed by a key of this fleet, for this fleet, and has not
// expired.
func (s *Sealer) Open(token string) (SessionClaims, error) {
	var c SessionClaims
	if len(token) > maxTokenLen {
		return c, fmt.Errorf("%w: too long", ErrBadToken)
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil {
		return c, fmt.Errorf("%w: not base64url", ErrBadToken)
	}
	ns := chacha20poly1305.NonceSizeX
	if len(raw) < tokenHeader+ns+chacha20poly1305.Overhead || raw[0] != tokenMagic || raw[1] != tokenVersion {
		return c, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	nonce, box := raw[tokenHeader:tokenHeader+ns], raw[tokenHeader+ns:]
	var plain []byte
	for _, aead := range s.aeads {
		if plain, err = aead.Open(nil, nonce, box, s.fleet); err == nil {
			break
		}
	}
	if err != nil {
		return c, fmt.Errorf("%w: does not open", ErrBadToken)
	}
	if err := json.Unmarshal(plain, &c); err != nil {
		return SessionClaims{}, fmt.Errorf("%w: claims: %v", ErrBadToken, err)
	}
	if c.Identity == "" || c.Version == "" || c.Owner == "" {
		return SessionClaims{}, fmt.Errorf("%w: incomplete claims", ErrBadToken)
	}
	if now := s.now().Unix(); now >= c.Expires {
		return SessionClaims{}, fmt.Errorf("%w: expired", ErrBadToken)
	}
	return c, nil
}
