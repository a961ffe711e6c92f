// Package compress compresses the listener's JSON answers: Handler wraps
// an http.Handler with github.com/klauspost/compress/gzhttp (zstd or gzip,
// whichever the client prefers) and leaves event streams, HEAD requests
// and protocol upgrades as they are. Stateless; the gateway wraps its
// listener's mux with it unless observability.compression is off.
package compress

import (
	"mime"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzhttp"
)

// MinSize is the smallest answer body that is compressed.
const MinSize = 1024

// Handler wraps h with github.com/klauspost/compress/gzhttp: JSON
// answers of at least MinSize bytes go out in zstd or gzip,
// whichever the client prefers (zstd on a tie); event streams and other
// types pass as they are, and so do HEAD requests and protocol upgrades
// (WebSocket), which have no body of their own to compress.
func Handler(h http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(gzhttp.MinSize(MinSize), gzhttp.ContentTypeFilter(compressible), gzhttp.AcceptWildcards(true))
	if err != nil {
		panic("gzhttp options: " + err.Error()) // constant options: a bug
	}
	zipped := wrap(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead || r.Header.Get("Upgrade") != "" {
			h.ServeHTTP(w, r)
			return
		}
		zipped(w, r)
	})
}

// compressible reports whether the media type of contentType is JSON.
func compressible(contentType string) bool {
	switch contentType {
	case "":
		return false
	case "application/json", "application/json; charset=utf-8":
		return true // the common case, without parsing
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "text/json", "application/x-ndjson", "application/jsonl":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
