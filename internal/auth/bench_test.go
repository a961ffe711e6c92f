package auth

import (
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func BenchmarkAuthenticate(b *testing.B) {
	k := keys()
	apiAuth := newAuth(b, apiKeyConfig(), Options{})
	jwtAuth := newAuth(b, staticJWTConfig(b), Options{})
	for _, bc := range []struct {
		name string
		a    *Authenticator
		tok  string
	}{
		{"api_key", apiAuth, ciKey},
		{"HS256", jwtAuth, sign(b, jwt.SigningMethodHS256, k.hmac, "", goodClaims(nil))},
		{"RS256", jwtAuth, sign(b, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil))},
		{"ES256", jwtAuth, sign(b, jwt.SigningMethodES256, k.ecA, "ec-a", goodClaims(nil))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := bearer(bc.tok)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.a.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
