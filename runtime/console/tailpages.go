package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// streamLife bounds one live stream: the browser's EventSource reconnects
// by itself, and a shutdown never waits longer for a stream to end.
const streamLife = 2 * time.Minute

func filterOf(r *http.Request) filter {
	q := r.URL.Query()
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return filter{Kind: get("kind"), Server: get("server"), Tool: get("tool"), Identity: get("identity"), Outcome: get("outcome")}
}

type tailData struct {
	Filter  filter
	Entries []Entry
	Stream  string // the stream's URL, with the same filters
}

func (c *Console) tailPage(r *http.Request) (string, any, error) {
	f := filterOf(r)
	v := url.Values{}
	for k, s := range map[string]string{"kind": f.Kind, "server": f.Server, "tool": f.Tool, "identity": f.Identity, "outcome": f.Outcome} {
		if s != "" {
			v.Set(k, s)
		}
	}
	stream := "/ui/tail/stream"
	if len(v) > 0 {
		stream += "?" + v.Encode()
	}
	return "tail.html", tailData{Filter: f, Entries: c.tail.recent(f), Stream: stream}, nil
}

// stream serves the entries that pass the request's filters as
// server-sent events ("entry", JSON), and every second a "tick" with the
// last whole second's calls and errors.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	if c.whoIs(r).identity == "" {
		http.Error(w, "log in first", http.StatusUnauthorized)
		return
	}
	c.tail.Start()
	f := filterOf(r)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	if err := rc.Flush(); err != nil {
		c.log.Warn("console: the live stream cannot be flushed", "err", err)
		return
	}
	entries, stop := c.tail.subscribe()
	defer stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.NewTimer(streamLife)
	defer end.Stop()
	for {
		select {
		case e := <-entries:
			if !f.keep(e) {
				continue
			}
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "event: entry\ndata: %s\n\n", b)
		case <-tick.C:
			calls, errs := c.tail.rates()
			fmt.Fprintf(w, "event: tick\ndata: {\"calls\":%d,\"errors\":%d}\n\n", calls[chartSeconds-1], errs[chartSeconds-1])
		case <-end.C:
			return
		case <-r.Context().Done():
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func (c *Console) serveJS(w http.ResponseWriter, r *http.Request) {
	b, _ := files.ReadFile("static/console.js")
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Write(b)
}
