package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestNoSecretsInLogsOrResponses plants secret keys, an HMAC secret and
// signed tokens, drives every failure path (and success) through real
// servers with debug logging, and searches every log line, response and
// error for them.
func TestNoSecretsInLogsOrResponses(t *testing.T) {
	randHex := func(n int) string {
		b := make([]byte, n)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	liveKey := "sk-live-" + randHex(24)
	revoked := "sk-old-" + randHex(24)
	hmacSecret := []byte("hmac-" + randHex(24))
	var logs syncBuffer
	log := debugLogger(&logs)

	keyGW := newGateway(t, func(string) *Authenticator {
		return newAuth(t, Config{Mode: ModeAPIKey, APIKeys: []APIKey{
			{Name: "svc", Key: liveKey},
			{Name: "svc", Key: revoked, Revoked: true},
		}}, Options{Logger: log, logEveryFailure: true})
	})
	var jwtAuth *Authenticator
	jwtGW := newGateway(t, func(url string) *Authenticator {
		jwtAuth = newAuth(t, Config{Mode: ModeJWT,
			JWT:              JWTConfig{Issuer: testIssuer, Audience: []string{url + "/mcp"}, HMACSecret: hmacSecret},
			ResourceMetadata: &ResourceMetadata{Resource: url + "/mcp", AuthorizationServers: []string{testIssuer}},
		}, Options{Logger: log, logEveryFailure: true})
		return jwtAuth
	})
	aud := jwtGW.URL + "/mcp"
	hs := func(key []byte, over map[string]any) string {
		c := goodClaims(over)
		if _, ok := over["aud"]; !ok {
			c["aud"] = aud
		}
		return sign(t, jwt.SigningMethodHS256, key, "", c)
	}
	goodTok := hs(hmacSecret, nil)
	tokens := []string{
		goodTok,
		hs(hmacSecret, map[string]any{"aud": "https://elsewhere"}),
		hs(hmacSecret, map[string]any{"exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(), "nbf": nil}),
		hs(hmacSecret, map[string]any{"nbf": time.Now().Add(time.Hour).Unix()}),
		hs(hmacSecret, map[string]any{"iss": "https://evil"}),
		hs([]byte(liveKey), nil), // signed with the API key as secret
		hs(hmacSecret, map[string]any{"sub": nil}),
		goodTok[:len(goodTok)-3],
		liveKey, revoked,
	}
	keysPresented := []string{liveKey, revoked, liveKey + "x", liveKey[:len(liveKey)-1], goodTok}

	type exchange struct {
		resp *http.Response
		body string
	}
	var responses []exchange
	for _, tok := range tokens {
		resp, body := jwtGW.do(t, http.MethodPost, "/mcp", "Authorization", "Bearer "+tok)
		responses = append(responses, exchange{resp, body})
		if _, err := jwtAuth.Authenticate(bearer(tok)); err != nil {
			logs.Write([]byte("authenticate error: " + err.Error() + "\n"))
		}
	}
	for _, key := range keysPresented {
		for _, hdr := range []string{"Authorization", "X-API-Key"} {
			v := key
			if hdr == "Authorization" {
				v = "Bearer " + key
			}
			resp, body := keyGW.do(t, http.MethodPost, "/mcp", hdr, v)
			responses = append(responses, exchange{resp, body})
		}
		resp, body := keyGW.do(t, http.MethodPost, "/mcp", "Authorization", "Bearer "+key, "X-API-Key", liveKey+"-other")
		responses = append(responses, exchange{resp, body})
	}
	if _, err := New(t.Context(), Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "x", Key: liveKey + "\x01"}}}, Options{Logger: log}); err != nil {
		logs.Write([]byte("config error: " + err.Error() + "\n"))
	}

	// Both gateways did see successes and failures.
	if !strings.Contains(logs.String(), `name=svc`) || !strings.Contains(logs.String(), "reason=revoked") ||
		!strings.Contains(logs.String(), `reason="wrong audience"`) || !strings.Contains(logs.String(), "name=alice") {
		t.Fatalf("the log lacks the expected events:\n%s", logs.String())
	}

	secrets := map[string]string{
		"live key":             liveKey,
		"revoked key":          revoked,
		"hmac secret":          string(hmacSecret),
		"hmac secret base64":   base64.RawURLEncoding.EncodeToString(hmacSecret),
		"live key digest":      digest(liveKey)[len("sha256:"):],
		"revoked key digest":   digest(revoked)[len("sha256:"):],
		"live key random part": liveKey[len("sk-live-"):],
	}
	for i, tok := range tokens {
		secrets["token "+string(rune('a'+i))] = tok
		if j := strings.LastIndexByte(tok, '.'); j > 0 && len(tok)-j > 16 {
			secrets["signature of token "+string(rune('a'+i))] = tok[j+1:]
		}
	}
	for name, s := range secrets {
		for lineNo, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, s) {
				t.Errorf("log line %d contains the %s: %s", lineNo+1, name, line)
			}
		}
		for i, ex := range responses {
			if strings.Contains(ex.body, s) {
				t.Errorf("response %d body contains the %s", i, name)
			}
			for h, vals := range ex.resp.Header {
				for _, v := range vals {
					if strings.Contains(v, s) {
						t.Errorf("response %d header %s contains the %s", i, h, name)
					}
				}
			}
		}
	}
}
