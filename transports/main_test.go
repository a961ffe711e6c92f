package transports

import (
	"net/http"
	"os"
	"testing"
)

// TestMain gives http.DefaultClient a transport of its own. The tests run
// in parallel, and httptest.Server.Close closes the idle connections of
// http.DefaultTransport: a request that took one of them as another test
// closed its server would fail ("CloseIdleConnections called").
func TestMain(m *testing.M) {
	http.DefaultClient.Transport = http.DefaultTransport.(*http.Transport).Clone()
	os.Exit(m.Run())
}
