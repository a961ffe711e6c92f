package transports

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// WithOAuth returns a client whose requests carry h's token and which, on
// a 401 (or a 403 naming insufficient_scope), calls h.Authorize and sends
// the request once more, as go-sdk's OAuthHandler contract asks. A request
// whose body cannot be replayed gets the first answer. A token source that
// fails sends the request without a token: the server's 401 then lets the
// handler start an authorization.
func WithOAuth(c *http.Client, h auth.OAuthHandler) *http.Client {
	if h == nil {
		return c
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cc := *c
	cc.Transport = &oauthRoundTripper{next: next, h: h}
	return &cc
}

type oauthRoundTripper struct {
	next http.RoundTripper
	h    auth.OAuthHandler
}

func (t *oauthRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	sent, resp, err := t.send(req)
	if err != nil || !wantsAuthorization(resp) {
		return resp, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil
	}
	// The handler sees the request as sent: with the token it refused.
	if err := t.h.Authorize(req.Context(), sent, resp); err != nil { // it closes resp.Body
		return nil, err
	}
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		retry.Body = body
	}
	_, resp, err = t.send(retry)
	return resp, err
}

// send sends req with the handler's current token, if any, and returns
// the request as sent.
func (t *oauthRoundTripper) send(req *http.Request) (*http.Request, *http.Response, error) {
	ts, err := t.h.TokenSource(req.Context())
	if err == nil && ts != nil {
		if tok, err := ts.Token(); err == nil && tok.AccessToken != "" {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", tok.Type()+" "+tok.AccessToken)
		}
	}
	resp, err := t.next.RoundTrip(req)
	return req, resp, err
}

// wantsAuthorization: a 401, or a 403 whose challenge names
// insufficient_scope (a step-up); any other 403 is the server's answer.
func wantsAuthorization(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		for _, v := range resp.Header.Values("WWW-Authenticate") {
			if strings.Contains(v, "insufficient_scope") {
				return true
			}
		}
	}
	return false
}
