package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/edge-mcp/edge-mcp/internal/auth"
)

// An api_key gateway whose configuration holds only the digest of the key.
func Example_apiKey() {
	const key = "ci-0123456789abcdef0123456789abcdef" // what the client holds
	sum := sha256.Sum256([]byte(key))                 // what the config holds
	a, err := auth.New(context.Background(), auth.Config{
		Mode:    auth.ModeAPIKey,
		APIKeys: []auth.APIKey{{Name: "ci", SHA256: "sha256:" + hex.EncodeToString(sum[:])}},
	}, auth.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s", id.Name)
	})))
	defer srv.Close()

	for _, presented := range []string{key, "not-the-key-0000000000"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-API-Key", presented)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			fmt.Println(resp.StatusCode, string(body))
		} else {
			fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// Output:
	// 200 hello ci
	// 401 Bearer realm="edge-mcp", error="invalid_token", error_description="invalid API key"
}
