package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// minAPIKeyLen is the shortest literal APIKey.Key accepted.
const minAPIKeyLen = 16

// digestPrefix marks an APIKey.SHA256 value (and is optional there).
const digestPrefix = "sha256:"

// apiKeyEntry is a configured API key, reduced to its digest.
type apiKeyEntry struct {
	name    string
	digest  [sha256.Size]byte
	id      string // first 8 hex digits of digest, safe to log
	revoked bool
}

// newAPIKeys validates the configured keys and reduces them to digests.
func newAPIKeys(keys []APIKey) ([]apiKeyEntry, error) {
	if len(keys) == 0 {
		return nil, errors.New("auth: config: APIKeys: at least one key is required in api_key mode")
	}
	out := make([]apiKeyEntry, 0, len(keys))
	seen := make(map[[sha256.Size]byte]int, len(keys))
	for i, k := range keys {
		field := fmt.Sprintf("APIKeys[%d]", i)
		if strings.TrimSpace(k.Name) == "" {
			return nil, fmt.Errorf("auth: config: %s.Name: required", field)
		}
		if strings.IndexFunc(k.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return nil, fmt.Errorf("auth: config: %s.Name: contains control characters", field)
		}
		var e apiKeyEntry
		switch {
		case k.Key != "" && k.SHA256 != "":
			return nil, fmt.Errorf("auth: config: %s: set either Key or SHA256, not both", field)
		case k.Key != "":
			// The key is not quoted in these errors: it is a secret.
			if strings.HasPrefix(k.Key, digestPrefix) {
				return nil, fmt.Errorf("auth: config: %s.Key: looks like a digest; put it in SHA256", field)
			}
			if len(k.Key) < minAPIKeyLen {
				return nil, fmt.Errorf("auth: config: %s.Key: shorter than %d characters", field, minAPIKeyLen)
			}
			if !validCredential(k.Key) {
				return nil, fmt.Errorf("auth: config: %s.Key: only visible ASCII characters are allowed", field)
			}
			e.digest = sha256.Sum256([]byte(k.Key))
		case k.SHA256 != "":
			h := k.SHA256
			if len(h) > len(digestPrefix) && strings.EqualFold(h[:len(digestPrefix)], digestPrefix) {
				h = h[len(digestPrefix):]
			}
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("auth: config: %s.SHA256: want %q followed by 64 hex digits", field, digestPrefix)
			}
			copy(e.digest[:], b)
		default:
			return nil, fmt.Errorf("auth: config: %s: Key or SHA256 is required", field)
		}
		if j, dup := seen[e.digest]; dup {
			return nil, fmt.Errorf("auth: config: %s: same key as APIKeys[%d]", field, j)
		}
		seen[e.digest] = i
		e.name = k.Name
		e.id = hex.EncodeToString(e.digest[:4])
		e.revoked = k.Revoked
		out = append(out, e)
	}
	return out, nil
}

// authenticateAPIKey matches the presented key against every configured
// digest in constant time.
func (a *Authenticator) authenticateAPIKey(r *http.Request) (Identity, error) {
	key, err := presentedAPIKey(r.Header)
	if err != nil {
		return Identity{}, err
	}
	d := sha256.Sum256([]byte(key))
	match := -1
	for i := range a.apiKeys {
		if subtle.ConstantTimeCompare(d[:], a.apiKeys[i].digest[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		// No digest of the unknown key either: it may be a low-entropy
		// secret sent by mistake, and a prefix of its hash helps guess it.
		return Identity{}, fmt.Errorf("auth: api key not recognised: %w", ErrInvalidKey)
	}
	e := a.apiKeys[match]
	if e.revoked {
		return Identity{}, fmt.Errorf("auth: api key %s of %q: %w", e.id, e.name, ErrRevoked)
	}
	return Identity{Name: e.name, Method: ModeAPIKey}, nil
}

// presentedAPIKey returns the key of "Authorization: Bearer" or "X-API-Key".
// When both are present they must agree.
func presentedAPIKey(h http.Header) (string, error) {
	bearer, berr := bearerToken(h)
	xs := h.Values("X-Api-Key")
	switch {
	case len(xs) == 0:
		return bearer, berr
	case len(xs) > 1:
		return "", fmt.Errorf("auth: several X-API-Key headers: %w", ErrMalformed)
	}
	x := xs[0]
	if !validCredential(x) {
		return "", fmt.Errorf("auth: X-API-Key: not a valid key: %w", ErrMalformed)
	}
	switch {
	case errors.Is(berr, ErrMissingCredentials):
		return x, nil
	case berr != nil:
		return "", berr
	case bearer != x:
		return "", fmt.Errorf("auth: Authorization and X-API-Key carry different keys: %w", ErrMalformed)
	}
	return x, nil
}
