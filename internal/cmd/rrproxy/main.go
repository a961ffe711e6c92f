// Command rrproxy is a strict round-robin reverse proxy for trying a
// fleet by hand: rrproxy -listen 127.0.0.1:8080 http://127.0.0.1:8081 http://127.0.0.1:8082 …
// With -skip-down, a request whose backend refuses the connection goes to
// the next backend (rrproxy.Proxy.SkipDown), so a replica can be killed.
// It stops on SIGINT or SIGTERM (also when started in the background by a
// shell, which ignores SIGINT for it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	skip := flag.Bool("skip-down", false, "send a request whose backend refuses the connection to the next backend")
	flag.Parse()
	p, err := rrproxy.New(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	p.SkipDown = *skip
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "rrproxy: %s → %v (strict round robin)\n", *listen, flag.Args())
	srv := &http.Server{Addr: *listen, Handler: p, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
