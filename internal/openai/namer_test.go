package openai

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkNamer checks the Namer invariants for names: every OpenAI name is
// valid and unique, maps back to its MCP name, and valid names are kept.
func checkNamer(t *testing.T, n *Namer, names []string) {
	t.Helper()
	seen := map[string]string{}
	for _, name := range names {
		got := n.OpenAI(name)
		if !nameRE.MatchString(got) {
			t.Errorf("OpenAI(%q) = %q, not a valid function name", name, got)
		}
		if prev, ok := seen[got]; ok && prev != name {
			t.Errorf("OpenAI(%q) = OpenAI(%q) = %q", name, prev, got)
		}
		seen[got] = name
		if back, ok := n.MCP(got); !ok || back != name {
			t.Errorf("MCP(%q) = %q, %v, want %q", got, back, ok, name)
		}
		if nameRE.MatchString(name) && got != name {
			t.Errorf("valid name %q renamed to %q", name, got)
		}
	}
}

func TestNamer(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5) // 100 characters
	names := []string{
		"github_create_issue", "github.create_issue", "github/create_issue", "github create issue",
		"fs.read_file", "fs:read_file", "weather.get_forecast", "slack-post_message", "café.menu", "日本語ツール", "emoji🙂tool", "",
		long, long + "x", long + "y", strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("a", 66),
		"a\xffb", "a\x00b", "tool", // "tool" is also what the empty name would become
	}
	n := NewNamer(names)
	checkNamer(t, n, names)

	for _, c := range []struct{ mcp, want string }{
		{"github_create_issue", "github_create_issue"},
		{"weather.get_forecast", "weather_get_forecast"},
		{"slack-post_message", "slack-post_message"},
		{"café.menu", "caf__menu"},
		{"日本語ツール", "______"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"tool", "tool"},
	} {
		if got := n.OpenAI(c.mcp); got != c.want {
			t.Errorf("OpenAI(%q) = %q, want %q", c.mcp, got, c.want)
		}
	}
	// Names that collide after sanitising all carry a hash suffix.
	for _, name := range []string{"github.create_issue", "github/create_issue", "github create issue", "fs.read_file", "fs:read_file", "", "a\xffb", "a\x00b"} {
		if got := n.OpenAI(name); !regexp.MustCompile(`_[0-9a-f]{8}$`).MatchString(got) {
			t.Errorf("OpenAI(%q) = %q, want a hash suffix", name, got)
		}
	}
	// Long names keep a common prefix but stay distinct.
	for _, name := range []string{long, long + "x", long + "y"} {
		if got := n.OpenAI(name); len(got) != 64 || !strings.HasPrefix(got, long[:55]) {
			t.Errorf("OpenAI(%q) = %q, want 64 characters starting with the name", name, got)
		}
	}
	if _, ok := n.MCP("no_such_tool"); ok {
		t.Error("MCP(no_such_tool) found a tool")
	}
	// A name the Namer does not know still converts to a valid name.
	if got := n.OpenAI("unknown.tool"); got != "unknown_tool" {
		t.Errorf("OpenAI(unknown.tool) = %q", got)
	}
}

func TestNamerOrderIndependent(t *testing.T) {
	names := []string{"a.b", "a/b", "a_b", "a b", "x.y", strings.Repeat("z", 70), strings.Repeat("z", 71), "q", "q"}
	want := NewNamer(names)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(names)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := NewNamer(shuffled)
		for _, name := range names {
			if got.OpenAI(name) != want.OpenAI(name) {
				t.Fatalf("order %q: OpenAI(%q) = %q, want %q", shuffled, name, got.OpenAI(name), want.OpenAI(name))
			}
		}
		checkNamer(t, got, names)
	}
}

// TestNamerAdversarial gives names that equal other names' hashed forms.
func TestNamerAdversarial(t *testing.T) {
	first := NewNamer([]string{"a.b", "a/b"})
	names := []string{"a.b", "a/b", first.OpenAI("a.b"), first.OpenAI("a/b")}
	n := NewNamer(names)
	checkNamer(t, n, names)
}

func TestNamerMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "ab._/ -é🙂"
	runes := []rune(alphabet)
	var names []string
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		if rng.IntN(10) == 0 {
			b.WriteString(strings.Repeat("x", 60))
		}
		names = append(names, b.String())
	}
	checkNamer(t, NewNamer(names), names)
}
