package console

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTailRecordsOnceStarted: nothing is kept before the console is
// opened; then the newest entries first, at most tailSize, filtered;
// calls and errors counted per second and per server.
func TestTailRecordsOnceStarted(t *testing.T) {
	tl := NewTail()
	now := time.Unix(1_800_000_000, 0)
	tl.now = func() time.Time { return now }
	tl.Publish(Entry{Kind: KindCall, Server: "a", Tool: "x", Outcome: "ok"})
	if tl.ring != nil || len(tl.recent(filter{})) != 0 {
		t.Fatal("a tail that was never started kept an entry")
	}
	tl.Start()
	for i := range tailSize + 5 {
		outcome := "ok"
		if i%10 == 0 {
			outcome = "error"
		}
		tl.Publish(Entry{Time: now.Add(-time.Second), Kind: KindCall, Identity: "alice", Server: "a", Tool: "t" + string(rune('a'+i%3)),
			Outcome: outcome, Duration: time.Millisecond, Text: "n"})
	}
	tl.Publish(Entry{Kind: KindAdmin, Identity: "ops", Outcome: "policy.promote"})
	all := tl.recent(filter{})
	if len(all) != tailSize || all[0].Kind != KindAdmin {
		t.Fatalf("%d entries kept, newest %+v", len(all), all[0])
	}
	for _, tc := range []struct {
		name string
		f    filter
		want int
	}{
		{"kind admin", filter{Kind: KindAdmin}, 1},
		{"tool ta", filter{Tool: "TA"}, 67},
		{"outcome error", filter{Outcome: "error"}, 20},
		{"identity nobody", filter{Identity: "bob"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(tl.recent(tc.f)); got != tc.want {
				t.Errorf("%d entries, want %d", got, tc.want)
			}
		})
	}
	calls, errs := tl.rates()
	if calls[chartSeconds-1] != tailSize+5 || errs[chartSeconds-1] != 21 || calls[chartSeconds-2] != 0 {
		t.Errorf("last second: %d calls, %d errors", calls[chartSeconds-1], errs[chartSeconds-1])
	}
	st, _ := tl.serverStats()
	if a := st["a"]; a.Calls != tailSize+5 || a.Errors != 21 || a.MeanMS != "1ms" || a.LastError != "error: n" {
		t.Errorf("server a: %+v", a)
	}
}

// TestTailLogHandler: log records at INFO and above reach the tail once
// started, with their attributes (groups included) and the server, tool
// and identity fields filled; the inner handler sees every record it
// wants; the "audit" line is left to its admin entry.
func TestTailLogHandler(t *testing.T) {
	tl := NewTail()
	var buf bytes.Buffer
	log := slog.New(tl.LogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	log.Info("before the console was opened")
	tl.Start()
	log.With("server_name", "vault").WithGroup("g").Info("server lost", "reason", "EOF")
	log.Debug("too fine")
	log.Info("audit", "action", "x")
	log.Warn("disk", "tool_name", "write")
	got := tl.recent(filter{})
	if len(got) != 2 {
		t.Fatalf("%d entries: %+v", len(got), got)
	}
	if e := got[1]; e.Kind != KindLog || e.Server != "vault" || e.Outcome != "info" || e.Text != "server lost server_name=vault g.reason=EOF" {
		t.Errorf("entry %+v", e)
	}
	if e := got[0]; e.Tool != "write" || e.Outcome != "warn" {
		t.Errorf("entry %+v", e)
	}
	if s := buf.String(); strings.Contains(s, "server lost") || !strings.Contains(s, "disk") {
		t.Errorf("the inner handler (WARN) got:\n%s", s)
	}
	if !log.Enabled(context.Background(), slog.LevelInfo) || log.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("Enabled")
	}
}

// TestNoInlineScript: no template carries inline script or an event
// handler attribute (the CSP would refuse them; the pages must not need
// them), and the one script file sets text, never HTML.
func TestNoInlineScript(t *testing.T) {
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<script(?:\s(?:[^>s]|s[^r]|sr[^c])*)?>|\son[a-z]+=|javascript:`)
	for bad, want := range map[string]bool{`<script>alert(1)</script>`: true, `<img src=x onerror="x()">`: true,
		`<script src="/ui/static/console.js" defer></script>`: false, `<a href="javascript:x()">`: true} {
		if (inline.FindString(bad) != "") != want {
			t.Fatalf("the check misjudges %s", bad)
		}
	}
	fs.WalkDir(files, "templates", func(path string, d fs.DirEntry, err error) error {
		if d.IsDir() {
			return nil
		}
		b, _ := files.ReadFile(path)
		if m := inline.Find(b); m != nil {
			t.Errorf("%s: %q", path, m)
		}
		return nil
	})
	js, _ := files.ReadFile("static/console.js")
	if bytes.Contains(js, []byte("innerHTML")) || bytes.Contains(js, []byte("eval(")) {
		t.Error("console.js parses text as HTML or code")
	}
}
