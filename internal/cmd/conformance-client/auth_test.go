package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

func TestOAuthSection(t *testing.T) {
	for _, tc := range []struct {
		name, scenario, context string
		want                    map[string]any
	}{
		{"discovery", "auth/metadata-default", "", map[string]any{"client_metadata_url": clientMetadataURL}},
		{"pre-registered", "auth/pre-registration", `{"name":"auth/pre-registration","client_id":"c","client_secret":"s"}`,
			map[string]any{"client_metadata_url": clientMetadataURL, "clientId": "c", "clientSecret": "s"}},
		{"client credentials", "auth/client-credentials-basic", `{"client_id":"c","client_secret":"s"}`,
			map[string]any{"grant": "client_credentials", "clientId": "c", "clientSecret": "s"}},
		{"private key", "auth/client-credentials-jwt", `{"client_id":"c","private_key_pem":"PEM","signing_algorithm":"ES256"}`,
			map[string]any{"grant": "client_credentials", "clientId": "c", "client_private_key": "PEM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := oauthSection(tc.scenario, tc.context)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("oauthSection = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := oauthSection("auth/x", "{"); err == nil {
		t.Error("a context that is not JSON was accepted")
	}
}

// TestOperator: the operator follows a pending URL from the admin API once:
// the authorization server's redirect leads to the callback.
func TestOperator(t *testing.T) {
	var callbacks atomic.Int32
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/admin/oauth", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"servers":[{"server":"scenario","state":"needs_authorization","pending_url":"` + srv.URL + `/authorize?state=s1"}]}`))
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/oauth/callback?code=c&state="+r.URL.Query().Get("state"), http.StatusFound)
	})
	mux.HandleFunc("/oauth/callback", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("state") == "s1" {
			callbacks.Add(1)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	operator(ctx, srv.URL+"/admin/oauth")
	if n := callbacks.Load(); n != 1 {
		t.Errorf("callback reached %d times, want once", n)
	}
}
