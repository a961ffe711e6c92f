package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// readLines returns every line of the files in dir matching pattern, failing
// the test on a line that is not a whole JSON object.
func readLines(t *testing.T, pattern string) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, f := range files {
		recs = append(recs, readFile(t, f)...)
	}
	return recs
}

func readFile(t *testing.T, path string) []map[string]any {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	return decodeLines(t, fh)
}

func decodeLines(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 4<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %d is not a JSON object: %v: %.200q", len(recs)+1, err, sc.Text())
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestDisabled(t *testing.T) {
	l, err := Open(Config{})
	if err != nil || l != nil {
		t.Fatalf("Open(empty path) = %v, %v; want nil, nil", l, err)
	}
	l.ToolCall(ToolCall{Tool: "x"})
	l.AdminChange(AdminChange{Action: "reload"})
	l.Approval(Approval{Tool: "x"})
	if l.Dropped() != 0 {
		t.Error("nil logger dropped records")
	}
	if err := l.Close(); err != nil {
		t.Errorf("nil Close: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"parent is a file", Config{Path: filepath.Join(blocker, "audit.log")}},
		{"negative size", Config{Path: filepath.Join(dir, "a.log"), MaxSizeMB: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Open(tt.cfg)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestRecords(t *testing.T) {
	args := json.RawMessage(`{"path":"/etc/passwd","mode":420,"recursive":true,"tags":["a","bcd"],"opt":null}`)
	when := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, include := range []bool{false, true} {
		t.Run(fmt.Sprintf("IncludeArguments=%v", include), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			l, err := Open(Config{Path: path, IncludeArguments: include})
			if err != nil {
				t.Fatal(err)
			}
			l.ToolCall(ToolCall{Time: when, Identity: "alice", Server: "fs", Tool: "read_file", Outcome: "ok",
				DurationMS: 12, Arguments: args, SessionID: "s1"})
			l.Approval(Approval{Identity: "bob", Server: "fs", Tool: "delete", Decision: "approved", Arguments: args})
			l.AdminChange(AdminChange{Identity: "root", Action: "policy.replace", Target: "pii", Digest: "sha256:ab", Detail: "v2"})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			recs := readFile(t, path)
			if len(recs) != 3 {
				t.Fatalf("got %d records, want 3", len(recs))
			}
			call, appr, admin := recs[0], recs[1], recs[2]
			for k, want := range map[string]any{"type": "tool_call", "identity": "alice", "server": "fs", "tool": "read_file",
				"outcome": "ok", "duration_ms": 12.0, "session_id": "s1", "time": "2025-03-01T12:00:00Z"} {
				if call[k] != want {
					t.Errorf("tool_call %s = %v, want %v", k, call[k], want)
				}
			}
			if appr["type"] != "approval" || appr["decision"] != "approved" || appr["time"] == nil {
				t.Errorf("approval record = %v", appr)
			}
			if admin["type"] != "admin_change" || admin["action"] != "policy.replace" || admin["digest"] != "sha256:ab" {
				t.Errorf("admin record = %v", admin)
			}
			for _, rec := range []map[string]any{call, appr} {
				got, _ := json.Marshal(rec["arguments"])
				want := `{"mode":"[number]","opt":null,"path":"[string:11]","recursive":"[bool]","tags":["[string:1]","[string:3]"]}`
				if include {
					want = `{"mode":420,"opt":null,"path":"/etc/passwd","recursive":true,"tags":["a","bcd"]}`
				}
				if string(got) != want {
					t.Errorf("%s arguments = %s, want %s", rec["type"], got, want)
				}
			}
		})
	}
}

func TestInvalidArgumentsIncluded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Config{Path: path, IncludeArguments: true})
	if err != nil {
		t.Fatal(err)
	}
	l.ToolCall(ToolCall{Tool: "t", Arguments: json.RawMessage(`{"a":`)})
	l.Close()
	recs := readFile(t, path)
	if len(recs) != 1 || recs[0]["arguments"] != "[invalid json:5 bytes]" {
		t.Fatalf("records = %v", recs)
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	const n = 800 // ~1.6 MB with 2 KB of arguments each: exactly one rotation
	l, err := Open(Config{Path: path, MaxSizeMB: 1, MaxBackups: 3, IncludeArguments: true, BufferSize: n})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 2000)})
	for i := range n {
		l.ToolCall(ToolCall{Server: "s", Tool: fmt.Sprintf("t%d", i), Arguments: args})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Dropped() != 0 {
		t.Fatalf("dropped %d records", l.Dropped())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.log"))
	if len(files) < 2 {
		t.Fatalf("files after writing past MaxSizeMB = %v, want a rotated backup", files)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, over 1 MB", f, st.Size())
		}
	}
	recs := readLines(t, filepath.Join(dir, "audit*.log"))
	if len(recs) != n {
		t.Fatalf("records across files = %d, want %d", len(recs), n)
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	const writers, each = 8, 300
	l, err := Open(Config{Path: path, BufferSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.ToolCall(ToolCall{Server: "s", Tool: fmt.Sprintf("w%d-%d", w, i), Arguments: json.RawMessage(`{"q":"x"}`)})
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readFile(t, path)
	if got := uint64(len(recs)) + l.Dropped(); got != writers*each {
		t.Fatalf("written %d + dropped %d != %d logged", len(recs), l.Dropped(), writers*each)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		tool, _ := r["tool"].(string)
		if seen[tool] {
			t.Fatalf("record %q written twice", tool)
		}
		seen[tool] = true
	}
}

func TestCloseFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Config{Path: path, BufferSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		l.AdminChange(AdminChange{Action: "a", Target: fmt.Sprint(i)})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := len(readFile(t, path)); got != 1000 {
		t.Fatalf("after Close the file has %d records, want 1000", got)
	}
	l.AdminChange(AdminChange{Action: "late"})
	if l.Dropped() != 1 {
		t.Errorf("record after Close: dropped = %d, want 1", l.Dropped())
	}
}

// gateWriter blocks every Write until released, signalling when one starts.
type gateWriter struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	buf     []byte
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, p...)
	return len(p), nil
}

func TestDropWhenQueueFull(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}, 10), release: make(chan struct{})}
	l := newLogger(g, nil, 1, false, nil)
	l.AdminChange(AdminChange{Action: "0"})
	<-g.entered // the writer now holds record 0, blocked on the slow disk
	const n = 10
	for i := 1; i < n; i++ {
		l.AdminChange(AdminChange{Action: fmt.Sprint(i)})
	}
	// Record 1 fills the queue; records 2..9 must be dropped, not block.
	if d := l.Dropped(); d != n-2 {
		t.Fatalf("dropped = %d, want %d", d, n-2)
	}
	close(g.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs := decodeLines(t, strings.NewReader(string(g.buf)))
	if len(recs) != 2 || recs[0]["action"] != "0" || recs[1]["action"] != "1" {
		t.Fatalf("written records = %v, want actions 0 and 1", recs)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestWriteErrorsCountAsDropped(t *testing.T) {
	l := newLogger(failWriter{}, nil, 10, false, nil)
	l.AdminChange(AdminChange{Action: "a"})
	l.AdminChange(AdminChange{Action: "b"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Dropped() != 2 {
		t.Fatalf("dropped = %d, want 2", l.Dropped())
	}
}

func TestStdout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	l, err := Open(Config{Path: "-"})
	os.Stdout = old
	if err != nil {
		t.Fatal(err)
	}
	l.AdminChange(AdminChange{Action: "reload"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Close must not have closed the (fake) stdout.
	if _, err := w.Write([]byte("{\"after\":1}\n")); err != nil {
		t.Fatalf("stdout closed by Close: %v", err)
	}
	w.Close()
	recs := decodeLines(t, r)
	if len(recs) != 2 || recs[0]["action"] != "reload" {
		t.Fatalf("stdout records = %v", recs)
	}
}

func ExampleRedactArguments() {
	fmt.Println(string(RedactArguments(json.RawMessage(`{"query":"select 1","limit":10,"dry":false,"tags":["x"],"cursor":null}`))))
	// Output: {"query":"[string:8]","limit":"[number]","dry":"[bool]","tags":["[string:1]"],"cursor":null}
}

func ExampleRedactSecrets() {
	fmt.Println(RedactSecrets("upstream said: bad token sk-123456", "sk-123456", ""))
	// Output: upstream said: bad token [REDACTED]
}
