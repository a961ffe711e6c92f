package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/guest/glob"
)

// The Extism kernel's http_request: a plugin reaches the hosts its
// attachment allows (allowed_hosts, globs on the host name, or on
// host:port when the glob has a colon) through the host's net/http, within
// the call's deadline, the response held in the kernel memory the
// plugin's byte budget bounds (max_input + max_output). A redirect to a
// host not allowed is refused like a request to it. Without allowed_hosts
// every call is refused.

// maxRedirects bounds the redirects one http_request follows.
const maxRedirects = 5

// extismRequest is the JSON request block of http_request.
type extismRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// errHostRefused is a request or redirect to a host not allowed.
type errHostRefused struct{ host string }

func (e *errHostRefused) Error() string {
	return fmt.Sprintf("host %q is not in the plugin's allowed_hosts", e.host)
}

// checkHosts validates allowed_hosts globs.
func checkHosts(hosts []string) error {
	for _, h := range hosts {
		if h == "" || len(h) > 255 || strings.ContainsAny(h, "/@ ") {
			return fmt.Errorf("allowed_hosts: %q is not a host name glob (no scheme, path or user)", h)
		}
	}
	return nil
}

// hostAllowed reports whether u's host matches one of hosts.
func hostAllowed(hosts []string, u *url.URL) bool {
	for _, p := range hosts {
		name := u.Hostname()
		if strings.Contains(p, ":") {
			name = u.Host
		}
		if glob.Match(p, name) {
			return true
		}
	}
	return false
}

// httpClient is the client of a plugin instance: the host's transport,
// redirects only to allowed hosts.
func httpClient(hosts []string) *http.Client {
	return &http.Client{Transport: http.DefaultTransport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if !hostAllowed(hosts, req.URL) {
			return &errHostRefused{req.URL.Host}
		}
		return nil
	}}
}

// httpRequest runs the kernel's http_request(request, body) and returns
// the offset of the response body (0 for an empty one); http_status_code
// then reports its status.
func (s *extismState) httpRequest(ctx context.Context, reqOff, bodyOff uint64) uint64 {
	const name = "http_request"
	if len(s.hosts) == 0 {
		s.refuse(name, "the plugin may not reach outside: no allowed_hosts are configured for it")
	}
	var r extismRequest
	if err := json.Unmarshal(s.block(name, reqOff), &r); err != nil {
		s.refuse(name, "the request is not Extism's JSON request: %v", err)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		s.refuse(name, "url %q is not an http or https URL", r.URL)
	}
	if !hostAllowed(s.hosts, u) {
		s.refuse(name, "%v", &errHostRefused{u.Host})
	}
	var body io.Reader
	if bodyOff != 0 {
		body = bytes.NewReader(s.block(name, bodyOff))
	}
	ctx, cancel := context.WithDeadline(ctx, s.deadline)
	defer cancel()
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		s.refuse(name, "%v", err)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.httpFailed(ctx, u, err)
	}
	defer resp.Body.Close()
	budget := s.maxMem - len(s.mem)
	if resp.ContentLength > int64(budget) {
		s.refuse(name, "the response of %d bytes would pass the plugin's kernel memory limit (%d bytes left of %d)", resp.ContentLength, budget, s.maxMem)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(budget)+1))
	if len(data) > budget {
		s.refuse(name, "the response passes the plugin's kernel memory limit (%d bytes left of %d)", budget, s.maxMem)
	}
	if err != nil {
		s.httpFailed(ctx, u, err)
	}
	s.status = resp.StatusCode
	return s.bytesAlloc(data)
}

// httpFailed stops the guest on a request that failed: refused (a
// redirect to a host not allowed), past the deadline, or an I/O error.
func (s *extismState) httpFailed(ctx context.Context, u *url.URL, err error) {
	var hr *errHostRefused
	switch {
	case errors.As(err, &hr):
		s.refuse("http_request", "%s redirected to %v", u.Redacted(), hr)
	case ctx.Err() != nil && time.Now().After(s.deadline):
		s.fail(ErrTimeout, fmt.Errorf("%s.http_request: %s: no answer before the call's deadline", extismModule, u.Redacted()))
	default:
		s.fail(ErrGuest, fmt.Errorf("%s.http_request: %w", extismModule, err))
	}
}
