package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// For auth/* scenarios the driver plays the operator: it writes the
// scenario's context (MCP_CONFORMANCE_CONTEXT) into the upstream's "oauth"
// section and, while edge-mcp runs, follows every pending authorization
// URL that the admin API shows (GET /admin/oauth; the suite's authorization server approves at
// once and redirects to edge-mcp's /oauth/callback). It never talks MCP
// to the scenario server itself.

const (
	// clientMetadataURL is the Client ID Metadata Document the suite's
	// authorization servers accept (the one go-sdk's client offers).
	clientMetadataURL = "https://conformance-test.local/client-metadata.json"
	// pollEvery is how often the operator looks at the admin API.
	pollEvery = 50 * time.Millisecond
)

// clientScenario is the scenario the everything-client runs against
// edge-mcp for the auth scenarios it does not know: any auth scenario
// lists the tools and calls test-tool, and edge-mcp asks the client for
// no authorization of its own.
const clientScenario = "auth/metadata-default"

// authScenario reports whether scenario is one of the suite's auth/*.
func authScenario(scenario string) bool { return strings.HasPrefix(scenario, "auth/") }

// clientCredentialsScenario reports whether scenario is the client
// credentials extension (grant client_credentials, no person).
func clientCredentialsScenario(scenario string) bool {
	return strings.HasPrefix(scenario, "auth/client-credentials-")
}

// oauthSection turns a scenario's context into the upstream's "oauth"
// section: a pre-registered client where the context names one, the
// suite's Client ID Metadata Document and dynamic registration otherwise
// (go-sdk tries them in that order), client credentials for the
// client-credentials scenarios.
func oauthSection(scenario, contextJSON string) (map[string]any, error) {
	var c struct {
		ClientID      string `json:"client_id"`
		ClientSecret  string `json:"client_secret"`
		PrivateKeyPEM string `json:"private_key_pem"`
	}
	if contextJSON != "" {
		if err := json.Unmarshal([]byte(contextJSON), &c); err != nil {
			return nil, fmt.Errorf("environment: MCP_CONFORMANCE_CONTEXT is not JSON: %w", err)
		}
	}
	o := map[string]any{}
	if clientCredentialsScenario(scenario) {
		o["grant"] = "client_credentials"
	} else {
		o["client_metadata_url"] = clientMetadataURL
	}
	if c.ClientID != "" {
		o["clientId"] = c.ClientID
	}
	if c.ClientSecret != "" {
		o["clientSecret"] = c.ClientSecret
	}
	if c.PrivateKeyPEM != "" {
		o["client_private_key"] = c.PrivateKeyPEM
	}
	return o, nil
}

// operator follows pending authorization URLs shown by the admin API's
// GET /admin/oauth (oauthURL) until ctx ends; each URL is followed once.
func operator(ctx context.Context, oauthURL string) {
	followed := map[string]bool{}
	for {
		for _, u := range pendingURLs(ctx, oauthURL) {
			if !followed[u] {
				followed[u] = true
				if err := approve(ctx, u); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "conformance-client: following the authorization URL: %v\n", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pollEvery):
		}
	}
}

// pendingURLs returns the pending authorization URLs GET /admin/oauth
// lists.
func pendingURLs(ctx context.Context, oauthURL string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, oauthURL, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Servers []struct {
			PendingURL string `json:"pending_url"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil
	}
	var out []string
	for _, s := range list.Servers {
		if s.PendingURL != "" {
			out = append(out, s.PendingURL)
		}
	}
	return out
}

// noRedirect is a client that returns a redirect instead of following it.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// approve opens the authorization URL as a person's browser would: the
// authorization server redirects at once to edge-mcp's callback, which
// completes the authorization (or refuses it: a wrong iss).
func approve(ctx context.Context, authURL string) error {
	loc, err := redirectOf(ctx, authURL)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return fmt.Errorf("opening the callback: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// redirectOf GETs u and returns the absolute Location it redirects to.
func redirectOf(ctx context.Context, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return "", fmt.Errorf("opening the authorization URL: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("the authorization server answered HTTP %d without a redirect", resp.StatusCode)
	}
	if loc.Scheme != "http" && loc.Scheme != "https" {
		return "", fmt.Errorf("the authorization server redirected to %s", (&url.URL{Scheme: loc.Scheme}).String())
	}
	return loc.String(), nil
}
