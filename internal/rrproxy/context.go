package rrproxy

import (
	"context"
	"net/http"
	"net/url"
)

func contextWith(r *http.Request, u *url.URL) context.Context {
	return context.WithValue(r.Context(), backendKey{}, u)
}
