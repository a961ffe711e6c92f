package rrproxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStrictRoundRobin: consecutive requests go to consecutive backends,
// and a streamed response arrives event by event, not at the end.
func TestStrictRoundRobin(t *testing.T) {
	var urls []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/stream" {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: first\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(300 * time.Millisecond)
				fmt.Fprintf(w, "data: second\n\n")
				return
			}
			fmt.Fprintf(w, "%d %s", i, r.Host)
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	p, err := New(urls...)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	for n := range 6 {
		resp, err := http.Get(front.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("%d %s", n%3, strings.TrimPrefix(front.URL, "http://"))
		if string(b) != want {
			t.Fatalf("request %d: got %q, want %q", n, b, want)
		}
	}
	resp, err := http.Get(front.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("first event held back %v: the proxy buffers streams", d)
	}
}

// TestSkipDown: with SkipDown, a request whose backend refuses the
// connection goes to the next backend, body and all, and the rotation
// stays strict for the others; without it, that request gets 502.
func TestSkipDown(t *testing.T) {
	var urls []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %s", i, b)
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its port now refuses connections
	urls[1] = dead.URL
	for _, tc := range []struct {
		skip bool
		want []string // per request: body, or the status when not 200
	}{
		{true, []string{"0 r0", "2 r1", "2 r2", "0 r3", "2 r4", "2 r5"}},
		{false, []string{"0 r0", "502", "2 r2", "0 r3", "502", "2 r5"}},
	} {
		t.Run(fmt.Sprintf("SkipDown=%v", tc.skip), func(t *testing.T) {
			p, err := New(urls...)
			if err != nil {
				t.Fatal(err)
			}
			p.SkipDown = tc.skip
			front := httptest.NewServer(p)
			defer front.Close()
			for n, want := range tc.want {
				resp, err := http.Post(front.URL+"/x", "text/plain", strings.NewReader(fmt.Sprintf("r%d", n)))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got := string(b)
				if resp.StatusCode != http.StatusOK {
					got = fmt.Sprint(resp.StatusCode)
				}
				if got != want {
					t.Fatalf("request %d: got %q, want %q", n, got, want)
				}
			}
		})
	}
}
