// Command rrproxy is a strict round-robin reverse proxy for trying a
// fleet by hand: rrproxy -listen 127.0.0.1:8080 http://127.0.0.1:8081 http://127.0.0.1:8082 …
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	p, err := rrproxy.New(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "rrproxy: %s → %v (strict round robin)\n", *listen, flag.Args())
	srv := &http.Server{Addr: *listen, Handler: p, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
