package transports

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestStreamableClientOAuthHandler: the transport honours go-sdk's
// OAuthHandler contract with go-sdk's own authorization-code handler
// against a real authorization server: the first POST gets 401, Authorize
// runs the flow, the POST is sent again with the token.
func TestStreamableClientOAuthHandler(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	const redirect = "http://127.0.0.1:1/callback" // never reached: the fetcher reads the Location
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{redirect}}},
		RedirectURL:                     redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := c.Get(args.URL)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil {
				return nil, err
			}
			q := loc.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := (&StreamableClientTransport{URL: as.MCPURL, OAuthHandler: h}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	scHandshake(t, conn)
	scWrite(t, conn, scEchoCall(2, "authorized"))
	if got := scToolText(t, scReadResponse(t, conn, 2)); got != "authorized" {
		t.Fatalf("echo = %q", got)
	}
	if as.Grants("authorization_code") != 1 {
		t.Errorf("authorization code grants: %d, want 1", as.Grants("authorization_code"))
	}

	// Without the handler the same server answers 401.
	plain := scConnect(t, as.MCPURL, nil)
	scWrite(t, plain, scCall(1, "initialize", `{"protocolVersion":"`+scProtocolVersion+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if resp := scReadResponse(t, plain, 1); resp.Error == nil {
		t.Fatal("initialize without a token succeeded")
	}
}
