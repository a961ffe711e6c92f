package htmltext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestConvert(t *testing.T) {
	tests := []struct {
		name     string
		html     string
		markdown string
		plain    string
	}{
		{"headings and paragraphs", "<h2>Title</h2><p>One\n  two</p><p>Three</p>", "## Title\n\nOne two\n\nThree", "Title\n\nOne two\n\nThree"},
		{"links", `<p>See <a href="https://x.y/z?a=1&amp;b=2">the docs</a> and <a href="#top">top</a>.</p>`, "See [the docs](https://x.y/z?a=1&b=2) and top.", "See the docs (https://x.y/z?a=1&b=2) and top."},
		{"lists", "<ul><li>a</li><li>b<ol><li>c</li><li>d</li></ol></li></ul>", "- a\n- b\n\n  1. c\n  2. d", "- a\n- b\n\n  1. c\n  2. d"},
		{"emphasis and code", "<p><strong>bold</strong>, <em>it</em>, <code>x := 1</code></p>", "**bold**, _it_, `x := 1`", "bold, it, x := 1"},
		{"pre keeps spacing", "<pre>a  b\n  c</pre>", "```\na  b\n  c\n```", "a  b\n  c"},
		{"scripts, styles, comments dropped", "<head><title>t</title></head><style>p{}</style><p>x<!-- secret --></p><script>alert('<p>')</script><noscript>n</noscript>", "x", "x"},
		{"entities", "<p>&lt;tag&gt; &amp; &quot;q&quot; &#39;s&#39; &euro;5 &#x1F389; &bogus; &</p>", "<tag> & \"q\" 's' €5 🎉 &bogus; &", "<tag> & \"q\" 's' €5 🎉 &bogus; &"},
		{"br and hr", "a<br>b<hr/>c", "a\nb\n\n---\n\nc", "a\nb\n\nc"},
		{"table", "<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>", "k v\na 1", "k v\na 1"},
		{"image alt", `<img src="x.png" alt="a cat">`, "![a cat]", "[image: a cat]"},
		{"broken markup", "<p>a < b and <unclosed", "a < b and <unclosed", "a < b and <unclosed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Convert(tt.html, true); got != tt.markdown {
				t.Errorf("markdown:\n got %q\nwant %q", got, tt.markdown)
			}
			if got := Convert(tt.html, false); got != tt.plain {
				t.Errorf("plain:\n got %q\nwant %q", got, tt.plain)
			}
		})
	}
}

func TestLooksLikeHTML(t *testing.T) {
	for s, want := range map[string]bool{
		"<!DOCTYPE html><html>": true, "  <div>x</div>": true, "<p>hi": true,
		"plain text": false, "a < b": false, "<3 you": false, "<note>": false,
	} {
		if got := LooksLikeHTML(s); got != want {
			t.Errorf("LooksLikeHTML(%q) = %v", s, got)
		}
	}
}

// FuzzConvert checks that conversion terminates, never panics, keeps
// valid UTF-8 valid, and never lets script content through.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{"<p>x</p>", "<a href='y'>z</a>", "<script>bad</script>ok", "<ol><li>1<li>2</ol>", "<<>>&#;&#xZZ;", "<pre><b>x</b></pre>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, html string) {
		for _, md := range []bool{true, false} {
			out := Convert(html, md)
			if utf8.ValidString(html) && !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 out of %q", html)
			}
			if strings.Contains(out, "MARKER") && !strings.Contains(html, "MARKER") {
				t.Fatal("text appeared from nowhere")
			}
		}
		wrapped := "<p>a</p><script>MARKER" + strings.ReplaceAll(html, "</", "") + "</script><p>b</p>"
		if out := Convert(wrapped, true); strings.Contains(out, "MARKER") {
			t.Fatalf("script content leaked: %q", out)
		}
	})
}
