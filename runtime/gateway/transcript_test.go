package gateway

// Transcript tests: each testdata/transcripts/*.txtar file is a short
// exchange client ↔ edge-mcp ↔ upstream, replayed against a real gateway
// (gateway.New on the file's config, served on 127.0.0.1) in front of real
// go-sdk servers built from the file's fixtures. Adding a case is adding a
// file.
//
// A file is a txtar archive:
//
//	comment             what the case shows
//	-- config.json --   the gateway config; "$upstream/NAME" is the URL of the
//	                    fixture upstream/NAME.json, "$wasm/NAME" the path of
//	                    the example module wasm-examples/NAME
//	-- options.json --  optional: {"pageSize": N, "path": "/mcp/NAME"} (the
//	                    client connects to path, a virtual server's, instead
//	                    of /mcp)
//	-- upstream/NAME.json --
//	                    an upstream server: {"tools": [...], "prompts": [...],
//	                    "resources": [...], "completions": [...]}; a tool is a
//	                    Tool with a fixed "result" or a "behaviour" (see
//	                    behaviours); a prompt a Prompt with its "result"; a
//	                    resource a Resource with its "text"
//	-- client --        the exchange, one message per item:
//	    -> MSG          the client sends MSG (raw, if it is not JSON)
//	    <- MSG          the client receives MSG
//	    @NAME <- MSG    upstream NAME received MSG (only the members given are
//	                    compared: method and params, usually)
//
// An item may continue on the following indented lines; "#" starts a
// comment line. The runner initializes the session (id 0) unless the first
// item sends "initialize" itself.
//
// Messages compare as JSON values (key order does not matter). In expected
// messages the string "$_" matches any value, "$name" binds a value on its
// first match and must match it again later (and is replaced by it in the
// messages the client sends), and "$~PATTERN" matches a string where "*"
// stands for any run of characters. A received response is found by its id,
// a received request or notification by its method (the first not yet
// matched); an upstream message by its method, in the order received.
//
// At the end, every request the client sent must have been answered (but
// those it cancelled), and every response must have been expected. When a
// file has "@" lines, they list every routed request (tools/call,
// prompts/get, resources/read, completion/complete) the upstreams received:
// one more fails the case.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

const transcriptWait = 5 * time.Second // for any one expected message

func TestTranscript(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/transcripts/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel() // each transcript has its gateway and upstreams
			runTranscript(t, file)
		})
	}
}

// txtarArchive is a parsed txtar file: the comment and the sections by name,
// each with the line number its content starts on.
type txtarArchive struct {
	comment string
	files   map[string]string
	lines   map[string]int
}

var txtarMarker = regexp.MustCompile(`^-- (\S+) --$`)

func parseTxtar(data string) txtarArchive {
	a := txtarArchive{files: map[string]string{}, lines: map[string]int{}}
	name, body := "", &strings.Builder{}
	flush := func() {
		if name == "" {
			a.comment = body.String()
		} else {
			a.files[name] = body.String()
		}
		body.Reset()
	}
	for i, line := range strings.SplitAfter(data, "\n") {
		if m := txtarMarker.FindStringSubmatch(strings.TrimRight(line, "\r\n")); m != nil {
			flush()
			name = m[1]
			a.lines[name] = i + 2
			continue
		}
		body.WriteString(line)
	}
	flush()
	return a
}

func runTranscript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ar := parseTxtar(string(data))
	if strings.TrimSpace(ar.comment) == "" {
		t.Errorf("%s: no comment saying what the case shows", file)
	}
	ups := map[string]*fakeUpstream{}
	for name, body := range ar.files {
		up, isUp := strings.CutPrefix(name, "upstream/")
		switch {
		case isUp && strings.HasSuffix(up, ".json"):
			ups[strings.TrimSuffix(up, ".json")] = startFakeUpstream(t, strings.TrimSuffix(up, ".json"), body)
		case name != "config.json" && name != "options.json" && name != "client":
			t.Fatalf("%s:%d: unknown section %q", file, ar.lines[name]-1, name)
		}
	}
	if ar.files["config.json"] == "" || ar.files["client"] == "" {
		t.Fatalf("%s: a transcript needs a config.json and a client section", file)
	}
	cfg, opts := ar.files["config.json"], Options{}
	for name, up := range ups {
		cfg = strings.ReplaceAll(cfg, `"$upstream/`+name+`"`, fmt.Sprintf("%q", up.url))
	}
	for _, m := range regexp.MustCompile(`"\$wasm/([a-z-]+)"`).FindAllStringSubmatch(cfg, -1) {
		opts = policyOptions(t)
		cfg = strings.ReplaceAll(cfg, m[0], fmt.Sprintf("%q", writeModule(t, wasmtest.Example(t, m[1]))))
	}
	if m := regexp.MustCompile(`"\$(upstream|wasm)/[^"]*"`).FindString(cfg); m != "" {
		t.Fatalf("%s: config.json: %s names no upstream fixture or example module", file, m)
	}
	var options struct {
		PageSize int
		Path     string
	}
	if o := ar.files["options.json"]; o != "" {
		if err := json.Unmarshal([]byte(o), &options); err != nil {
			t.Fatalf("%s: options.json: %v", file, err)
		}
		opts.PageSize = options.PageSize
	}
	url, _ := startGateway(t, cfg, opts)
	if options.Path != "" {
		url = strings.TrimSuffix(url, "/mcp") + options.Path
	}
	items := parseTranscriptItems(t, file, ar.lines["client"], ar.files["client"])
	r := &transcriptRun{t: t, file: file, ups: ups, vars: map[string]any{}, seen: map[string]int{}, c: newWireClient(t, url)}
	if len(items) == 0 || items[0].kind != "->" || !strings.Contains(items[0].text, `"initialize"`) {
		r.c.initialize()
	}
	for _, it := range items {
		r.step(it)
	}
	r.finish()
}

// transcriptItem is one message of the client section.
type transcriptItem struct {
	line     int
	kind     string // "->", "<-" or "@"
	upstream string // for "@"
	text     string
}

var itemStart = regexp.MustCompile(`^(->|<-|@([A-Za-z0-9_.-]+) <-)\s`)

func parseTranscriptItems(t *testing.T, file string, first int, body string) []transcriptItem {
	var items []transcriptItem
	for i, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if m := itemStart.FindStringSubmatch(line); m != nil {
			it := transcriptItem{line: first + i, kind: m[1], upstream: m[2], text: line[len(m[0]):]}
			if m[2] != "" {
				it.kind = "@"
			}
			items = append(items, it)
			continue
		}
		if len(items) == 0 || (line[0] != ' ' && line[0] != '\t') {
			t.Fatalf("%s:%d: want '->', '<-', '@NAME <-' or an indented continuation, got %q", file, first+i, line)
		}
		items[len(items)-1].text += "\n" + line
	}
	return items
}

// transcriptRun runs the items of one transcript.
type transcriptRun struct {
	t    *testing.T
	file string
	ups  map[string]*fakeUpstream
	c    *wireClient
	vars map[string]any
	seen map[string]int // "upstream method" → messages matched so far
	at   bool           // the file has "@" lines
}

func (r *transcriptRun) fatalf(it transcriptItem, format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s:%d: %s", r.file, it.line, fmt.Sprintf(format, args...))
}

func (r *transcriptRun) step(it transcriptItem) {
	r.t.Helper()
	if it.kind == "->" {
		var v any
		if json.Unmarshal([]byte(it.text), &v) != nil {
			r.c.post([]byte(it.text)) // deliberately malformed: sent as written
			return
		}
		v = substituteVars(v, r.vars)
		if name := unboundVar(v); name != "" {
			r.fatalf(it, "%s is not bound by an earlier expected message", name)
		}
		b, _ := json.Marshal(v)
		r.c.post(b)
		return
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(it.text), &want); err != nil {
		r.fatalf(it, "expected message is not a JSON object: %v", err)
	}
	method, _ := want["method"].(string)
	var got map[string]any
	if it.kind == "@" {
		up := r.ups[it.upstream]
		if up == nil {
			r.fatalf(it, "no fixture upstream/%s.json", it.upstream)
		}
		if method == "" {
			r.fatalf(it, "an upstream line needs the method it checks")
		}
		r.at = true
		key := it.upstream + " " + method
		n := r.seen[key]
		r.seen[key]++
		got = up.log.wait(transcriptWait, func(m map[string]any) bool { return m["method"] == method }, n)
		if got == nil {
			r.fatalf(it, "upstream %s received no %s #%d within %v; it received:\n%s", it.upstream, method, n+1, transcriptWait, up.log.dump())
		}
		// Only the members the transcript gives are compared.
		sub := map[string]any{}
		for k := range want {
			sub[k] = got[k]
		}
		got = sub
	} else {
		id, hasID := want["id"]
		match := func(m map[string]any) bool { return m["method"] == method }
		if method == "" {
			if !hasID {
				r.fatalf(it, "an expected message needs a method or an id")
			}
			idv := substituteVars(id, r.vars)
			match = func(m map[string]any) bool {
				_, isCall := m["method"]
				return !isCall && (isTranscriptVar(idv) || reflect.DeepEqual(m["id"], idv))
			}
		}
		got = r.c.received.take(transcriptWait, match)
		if got == nil {
			r.fatalf(it, "no message like\n%s\nwithin %v; unmatched received messages:\n%s%s", it.text, transcriptWait, r.c.received.dump(), strings.Join(r.c.errs(), "\n"))
		}
	}
	bound := map[string]any{}
	if path, why := matchMessage("", want, any(got), r.vars, bound); path != "" || why != "" {
		r.fatalf(it, "at %s: %s\nwant %s\n got %s", pathOrMessage(path), why, strings.TrimSpace(it.text), jsonText(got))
	}
	for k, v := range bound {
		r.vars[k] = v
	}
}

// finish checks that no response went unexpected, and, when the file
// lists upstream messages, that the upstreams got no routed request more.
func (r *transcriptRun) finish() {
	r.t.Helper()
	if open := r.c.settle(transcriptWait); len(open) > 0 {
		r.t.Errorf("%s: requests not answered within %v:\n%s", r.file, transcriptWait, strings.Join(open, "\n"))
	}
	if extra := r.c.received.unmatched(func(m map[string]any) bool { _, call := m["method"]; return !call }); len(extra) > 0 {
		r.t.Errorf("%s: responses the transcript does not expect:\n%s", r.file, strings.Join(extra, "\n"))
	}
	for _, e := range r.c.errs() {
		r.t.Errorf("%s: %s", r.file, e)
	}
	if !r.at {
		return
	}
	for name, up := range r.ups {
		for _, method := range []string{"tools/call", "prompts/get", "resources/read", "completion/complete"} {
			if n := up.log.count(method); n != r.seen[name+" "+method] {
				r.t.Errorf("%s: upstream %s received %d %s, the transcript lists %d:\n%s", r.file, name, n, method, r.seen[name+" "+method], up.log.dump())
			}
		}
	}
}

func pathOrMessage(path string) string {
	if path == "" {
		return "the message"
	}
	return path
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var transcriptVar = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*$`)

func isTranscriptVar(v any) bool {
	s, ok := v.(string)
	return ok && transcriptVar.MatchString(s)
}

// substitute replaces bound variables in v.
func substituteVars(v any, vars map[string]any) any {
	switch v := v.(type) {
	case string:
		if b, ok := vars[v]; ok {
			return b
		}
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = substituteVars(e, vars)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = substituteVars(e, vars)
		}
		return out
	}
	return v
}

// unboundVar returns the first variable left in v after substitution.
func unboundVar(v any) string {
	switch v := v.(type) {
	case string:
		if isTranscriptVar(v) {
			return v
		}
	case map[string]any:
		for _, e := range v {
			if n := unboundVar(e); n != "" {
				return n
			}
		}
	case []any:
		for _, e := range v {
			if n := unboundVar(e); n != "" {
				return n
			}
		}
	}
	return ""
}

// matchMessage compares got with want (placeholders allowed in want) and
// returns the path of the first difference and why; bound receives the
// variables the match binds.
func matchMessage(path string, want, got any, vars, bound map[string]any) (string, string) {
	if s, ok := want.(string); ok {
		switch {
		case s == "$_":
			return "", ""
		case strings.HasPrefix(s, "$~"):
			g, ok := got.(string)
			if !ok || !transcriptGlob(s[2:], g) {
				return path, fmt.Sprintf("want a string like %q, got %s", s[2:], jsonText(got))
			}
			return "", ""
		case transcriptVar.MatchString(s):
			if v, ok := vars[s]; ok {
				want = v
			} else if v, ok := bound[s]; ok {
				want = v
			} else {
				bound[s] = got
				return "", ""
			}
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, fmt.Sprintf("want an object, got %s", jsonText(got))
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inG:
				return path + "." + k, "missing"
			case !inW:
				return path + "." + k, fmt.Sprintf("unexpected member %s", jsonText(gv))
			}
			if p, why := matchMessage(path+"."+k, wv, gv, vars, bound); why != "" {
				return p, why
			}
		}
		return "", ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, fmt.Sprintf("want %d elements, got %s", len(w), jsonText(got))
		}
		for i := range w {
			if p, why := matchMessage(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], vars, bound); why != "" {
				return p, why
			}
		}
		return "", ""
	}
	if !reflect.DeepEqual(want, got) {
		return path, fmt.Sprintf("want %s, got %s", jsonText(want), jsonText(got))
	}
	return "", ""
}

func transcriptGlob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, p := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(s, p)
		}
		j := strings.Index(s, p)
		if j < 0 {
			return false
		}
		s = s[j+len(p):]
	}
	return s == ""
}

// msgLog is a list of received JSON-RPC messages that a test goroutine
// waits on.
type msgLog struct {
	mu      sync.Mutex
	msgs    []map[string]any
	taken   []bool
	changed chan struct{} // a message arrived
}

func newMsgLog() *msgLog { return &msgLog{changed: make(chan struct{}, 1)} }

func (l *msgLog) add(raw []byte) error {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("not a JSON-RPC message: %s", raw)
	}
	l.mu.Lock()
	l.msgs = append(l.msgs, m)
	l.taken = append(l.taken, false)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return nil
}

// await returns the result of find once it is non-nil, or nil after d.
func (l *msgLog) await(d time.Duration, find func() map[string]any) map[string]any {
	timeout := time.After(d)
	for {
		l.mu.Lock()
		m := find()
		l.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-l.changed:
		case <-timeout:
			return nil
		}
	}
}

// take waits for the first message not taken yet that matches, and takes it.
func (l *msgLog) take(d time.Duration, match func(map[string]any) bool) map[string]any {
	return l.await(d, func() map[string]any {
		for i, m := range l.msgs {
			if !l.taken[i] && match(m) {
				l.taken[i] = true
				return m
			}
		}
		return nil
	})
}

// wait waits for the n-th (from 0) message that matches.
func (l *msgLog) wait(d time.Duration, match func(map[string]any) bool, n int) map[string]any {
	return l.await(d, func() map[string]any {
		left := n // await may call this more than once
		for _, m := range l.msgs {
			if match(m) {
				if left == 0 {
					return m
				}
				left--
			}
		}
		return nil
	})
}

func (l *msgLog) count(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m["method"] == method {
			n++
		}
	}
	return n
}

func (l *msgLog) unmatched(match func(map[string]any) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, m := range l.msgs {
		if !l.taken[i] && match(m) {
			out = append(out, "  "+jsonText(m))
		}
	}
	return out
}

func (l *msgLog) dump() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for i, m := range l.msgs {
		if l.taken != nil && l.taken[i] {
			continue
		}
		fmt.Fprintf(&b, "  %s\n", jsonText(m))
	}
	if b.Len() == 0 {
		return "  (none)"
	}
	return b.String()
}

// wireClient is a streamable-HTTP MCP client that sends messages as
// written and records every message it receives.
type wireClient struct {
	t        *testing.T
	url      string
	ctx      context.Context
	received *msgLog
	http     *http.Client
	wg       sync.WaitGroup

	mu        sync.Mutex
	session   string
	version   string
	problems  []string
	open      map[*http.Request][]byte // POSTs not answered in full
	cancelled map[string]bool          // ids of requests the client cancelled
	closed    chan struct{}            // a POST was answered in full
}

func newWireClient(t *testing.T, url string) *wireClient {
	ctx, cancel := context.WithCancel(context.Background())
	c := &wireClient{t: t, url: url, ctx: ctx, received: newMsgLog(), http: &http.Client{Transport: &http.Transport{}},
		open: map[*http.Request][]byte{}, cancelled: map[string]bool{}, closed: make(chan struct{}, 1)}
	t.Cleanup(func() { cancel(); c.wg.Wait(); c.http.CloseIdleConnections() })
	return c
}

func (c *wireClient) initialize() {
	c.t.Helper()
	c.post([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",
		"capabilities":{"sampling":{}},"clientInfo":{"name":"transcript","version":"1"}}}`))
	res := c.received.take(transcriptWait, func(m map[string]any) bool { return m["id"] == float64(0) })
	if res == nil || res["result"] == nil {
		c.t.Fatalf("initialize: %v %v", res, c.errs())
	}
	c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// settle waits until every POST has been answered in full, but for those
// of requests the client cancelled, and returns those still open after d.
func (c *wireClient) settle(d time.Duration) []string {
	timeout := time.After(d)
	for {
		c.mu.Lock()
		var open []string
		for _, body := range c.open {
			var m struct{ ID json.RawMessage }
			json.Unmarshal(body, &m)
			if !c.cancelled[string(m.ID)] {
				open = append(open, "  "+string(body))
			}
		}
		c.mu.Unlock()
		if len(open) == 0 {
			return nil
		}
		select {
		case <-c.closed:
		case <-timeout:
			return open
		}
	}
}

func (c *wireClient) problem(format string, args ...any) {
	c.mu.Lock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *wireClient) errs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.problems)
}

// post sends one message in its own POST and records what comes back, in
// the background: a request may be answered only after later messages.
func (c *wireClient) post(body []byte) {
	req, _ := http.NewRequestWithContext(c.ctx, "POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.mu.Lock()
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	var cancel struct {
		Method string
		Params struct{ RequestID json.RawMessage }
	}
	if json.Unmarshal(body, &cancel) == nil && cancel.Method == "notifications/cancelled" {
		c.cancelled[string(cancel.Params.RequestID)] = true
	}
	c.open[req] = body
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.open, req)
			c.mu.Unlock()
			select {
			case c.closed <- struct{}{}:
			default:
			}
		}()
		resp, err := c.http.Do(req)
		if err != nil {
			if c.ctx.Err() == nil {
				c.problem("POST %s: %v", body, err)
			}
			return
		}
		defer resp.Body.Close()
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			c.mu.Lock()
			c.session = sid
			c.mu.Unlock()
		}
		switch ct := resp.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/event-stream"):
			c.readEvents(resp.Body)
		case strings.HasPrefix(ct, "application/json"):
			b, _ := io.ReadAll(resp.Body)
			c.receive(b)
		case resp.StatusCode != http.StatusAccepted:
			b, _ := io.ReadAll(resp.Body)
			c.problem("POST %s: HTTP %d %q", body, resp.StatusCode, b)
		}
	}()
}

func (c *wireClient) readEvents(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 4<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		} else if line == "" && len(data) > 0 {
			// An event with empty data (a SEP-1699 priming event: an id
			// and a retry time) is not dispatched, as the SSE rules say.
			if msg := strings.Join(data, "\n"); msg != "" {
				c.receive([]byte(msg))
			}
			data = nil
		}
	}
}

func (c *wireClient) receive(b []byte) {
	if err := c.received.add(b); err != nil {
		c.problem("%v", err)
		return
	}
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &init) == nil && init.Result.ProtocolVersion != "" {
		c.mu.Lock()
		c.version = init.Result.ProtocolVersion
		c.mu.Unlock()
	}
}

// fakeUpstream is a go-sdk server built from a fixture, served over
// streamable HTTP on 127.0.0.1; log records every message it receives.
type fakeUpstream struct {
	name string
	url  string
	log  *msgLog
	kill func() // the server dies: listener and connections closed
}

type upstreamFixture struct {
	Tools       []json.RawMessage `json:"tools"`
	Prompts     []json.RawMessage `json:"prompts"`
	Resources   []json.RawMessage `json:"resources"`
	Completions []string          `json:"completions"`
}

func startFakeUpstream(t *testing.T, name, body string) *fakeUpstream {
	var fx upstreamFixture
	if err := json.Unmarshal([]byte(body), &fx); err != nil {
		t.Fatalf("upstream/%s.json: %v", name, err)
	}
	var opts *mcp.ServerOptions
	if fx.Completions != nil {
		opts = &mcp.ServerOptions{CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: fx.Completions, Total: len(fx.Completions)}}, nil
		}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, opts)
	up := &fakeUpstream{name: name, log: newMsgLog()}
	for _, raw := range fx.Tools {
		var tool mcp.Tool
		var extra struct {
			Result    json.RawMessage `json:"result"`
			Behaviour string          `json:"behaviour"`
		}
		decodeFixture(t, name, raw, &tool, &extra)
		if tool.InputSchema == nil {
			tool.InputSchema = map[string]any{"type": "object"}
		}
		h := up.behaviour(t, extra.Behaviour)
		if extra.Result != nil {
			var res mcp.CallToolResult
			decodeFixture(t, name, extra.Result, &res)
			h = func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return &res, nil }
		}
		s.AddTool(&tool, h)
	}
	for _, raw := range fx.Prompts {
		var p mcp.Prompt
		var extra struct {
			Result mcp.GetPromptResult `json:"result"`
		}
		decodeFixture(t, name, raw, &p, &extra)
		s.AddPrompt(&p, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) { return &extra.Result, nil })
	}
	for _, raw := range fx.Resources {
		var r mcp.Resource
		var extra struct {
			Text string `json:"text"`
		}
		decodeFixture(t, name, raw, &r, &extra)
		s.AddResource(&r, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.URI, MIMEType: r.MIMEType, Text: extra.Text}}}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			if err := up.log.add(b); err != nil {
				t.Errorf("upstream %s: %v", name, err)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	var once sync.Once
	up.kill = func() { once.Do(func() { hs.Listener.Close(); hs.CloseClientConnections() }) }
	t.Cleanup(func() { up.kill(); hs.Close() })
	up.url = hs.URL
	return up
}

func decodeFixture(t *testing.T, name string, raw []byte, into ...any) {
	t.Helper()
	for _, v := range into {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("upstream/%s.json: %s: %v", name, raw, err)
		}
	}
}

func fixtureText(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// behaviour returns the handler of a named tool behaviour:
//
//	echo                  answers "NAME: " and the argument text
//	slow-until-cancelled  blocks until the call is cancelled (at most
//	                      transcriptWait, then answers "never cancelled")
//	sampling-during-call  asks the client's model (sampling/createMessage)
//	                      the argument text and answers "model said: " and
//	                      the model's text
//	dies-mid-call         the server dies while the call is in flight
//	progress              sends progress 1 and 2 of 2 with the call's
//	                      token before it answers "done"
//	logs                  sends a notifications/message (level info, data
//	                      the argument text) before it answers "logged"
func (up *fakeUpstream) behaviour(t *testing.T, name string) mcp.ToolHandler {
	text := func(req *mcp.CallToolRequest) string {
		var a struct{ Text string }
		json.Unmarshal(req.Params.Arguments, &a)
		return a.Text
	}
	switch name {
	case "", "echo":
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return fixtureText(up.name + ": " + text(req)), nil
		}
	case "slow-until-cancelled":
		return func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(transcriptWait):
				return fixtureText("never cancelled"), nil
			}
		}
	case "sampling-during-call":
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Bounded: a transcript that fails before it answers must
			// not leave the server's Close waiting for this handler.
			ctx, cancel := context.WithTimeout(ctx, transcriptWait)
			defer cancel()
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: text(req)}}}})
			if err != nil {
				return nil, err
			}
			tc, _ := res.Content.(*mcp.TextContent)
			if tc == nil {
				return nil, fmt.Errorf("the model answered %T", res.Content)
			}
			return fixtureText("model said: " + tc.Text), nil
		}
	case "dies-mid-call":
		return func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			up.kill()
			select {
			case <-ctx.Done():
			case <-time.After(transcriptWait):
			}
			return nil, fmt.Errorf("%s is dead", up.name)
		}
	case "progress":
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1.0; i <= 2; i++ {
				p := &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: i, Total: 2}
				if err := req.Session.NotifyProgress(ctx, p); err != nil {
					return nil, err
				}
			}
			return fixtureText("done"), nil
		}
	case "logs":
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: up.name, Data: text(req)}); err != nil {
				return nil, err
			}
			return fixtureText("logged"), nil
		}
	}
	t.Fatalf("upstream %s: unknown behaviour %q", up.name, name)
	return nil
}

// TestTranscriptMatcher pins the comparison rules the transcripts rely on.
func TestTranscriptMatcher(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want, got string
		vars      map[string]any
		path      string // "" when they match
	}{
		{`{"a":1,"b":[true,"x"]}`, `{"b":[true,"x"],"a":1.0}`, nil, ""},
		{`{"a":1}`, `{"a":1,"b":2}`, nil, ".b"},
		{`{"a":1,"b":2}`, `{"a":1}`, nil, ".b"},
		{`{"a":[1,2]}`, `{"a":[2,1]}`, nil, ".a[0]"},
		{`{"id":"$_"}`, `{"id":{"any":"thing"}}`, nil, ""},
		{`{"id":"$x","again":"$x"}`, `{"id":3,"again":3}`, nil, ""},
		{`{"id":"$x","again":"$x"}`, `{"id":3,"again":4}`, nil, ".id"}, // members in key order: "again" binds
		{`{"id":"$x"}`, `{"id":5}`, map[string]any{"$x": float64(4)}, ".id"},
		{`{"m":"$~*server \"a\"*"}`, `{"m":"error from server \"a\": EOF"}`, nil, ""},
		{`{"m":"$~*server \"a\"*"}`, `{"m":"error from server \"b\": EOF"}`, nil, ".m"},
		{`{"m":"$~exact"}`, `{"m":"exactly"}`, nil, ".m"},
	} {
		var want, got any
		if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.got), &got); err != nil {
			t.Fatal(err)
		}
		vars := tc.vars
		if vars == nil {
			vars = map[string]any{}
		}
		path, why := matchMessage("", want, got, vars, map[string]any{})
		if path != tc.path || (tc.path == "") != (why == "") {
			t.Errorf("match %s against %s: path %q (%s), want %q", tc.want, tc.got, path, why, tc.path)
		}
	}
}
