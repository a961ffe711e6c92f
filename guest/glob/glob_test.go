package glob

import (
	"regexp"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"", "", true},
		{"", "a", false},
		{"github", "github", true},
		{"github", "github2", false},
		{"search-*", "search-eu", true},
		{"search-*", "search", false},
		{"*_issue", "create_issue", true},
		{"*_issue", "create_issues", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*a*b*c*", "xxaxxbxxcxx", true},
		{"*a*b*c*", "xxaxxcxxbxx", false},
		{"a**", "a", true},
		{"?", "é", false}, // '?' is one byte
		{"??", "é", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.name, func(t *testing.T) {
			if got := Match(tt.pattern, tt.name); got != tt.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
			}
		})
	}
}

func TestMatchAny(t *testing.T) {
	tests := []struct {
		patterns []string
		name     string
		want     bool
	}{
		{nil, "x", false},
		{[]string{"a*", "b*"}, "bee", true},
		{[]string{"a*", "b*"}, "sea", false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.patterns, ",")+"~"+tt.name, func(t *testing.T) {
			if got := MatchAny(tt.patterns, tt.name); got != tt.want {
				t.Errorf("MatchAny(%q, %q) = %v, want %v", tt.patterns, tt.name, got, tt.want)
			}
		})
	}
}

// TestMatchWorstCase checks that a pathological pattern stays polynomial:
// a backtracking matcher would take exponential time here.
func TestMatchWorstCase(t *testing.T) {
	pattern := strings.Repeat("*a", 30) + "b"
	name := strings.Repeat("a", 2000)
	if Match(pattern, name) {
		t.Fatal("matched a name without 'b'")
	}
}

// FuzzGlob checks the matcher against a regexp translation of the pattern.
func FuzzGlob(f *testing.F) {
	f.Add("search*", "search_web")
	f.Add("a*b?c", "axxbyc")
	f.Add("**?*", "")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 64 {
			return
		}
		var re strings.Builder
		re.WriteString(`(?s)^`)
		for _, c := range []byte(pattern) {
			switch c {
			case '*':
				re.WriteString(`.*`)
			case '?':
				re.WriteString(`[\x00-\xff]`)
			default:
				re.WriteString(regexp.QuoteMeta(string([]byte{c})))
			}
		}
		re.WriteString(`$`)
		// Compare byte-wise: map both to Latin-1 runes so '?' is one byte.
		latin := func(s string) string {
			r := make([]rune, len(s))
			for i := 0; i < len(s); i++ {
				r[i] = rune(s[i])
			}
			return string(r)
		}
		rx, err := regexp.Compile(latin(re.String()))
		if err != nil {
			return
		}
		if got, want := Match(pattern, name), rx.MatchString(latin(name)); got != want {
			t.Fatalf("Match(%q, %q) = %v, regexp says %v", pattern, name, got, want)
		}
	})
}
