// Package htmltext converts HTML to readable text or simple Markdown.
//
// It is the engine of the content-normalizer policy module, written as
// plain Go (no build constraints) so it is tested and fuzzed natively. It is
// a forgiving single-pass tokenizer, not an HTML5 parser: it keeps the text,
// turns block structure into line breaks, headings, list items, links and
// emphasis, and drops scripts, styles and comments.
package htmltext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// LooksLikeHTML reports whether s is probably an HTML document or fragment
// rather than text that merely contains a '<'.
func LooksLikeHTML(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n\ufeff")
	if !strings.HasPrefix(t, "<") {
		return false
	}
	if len(t) > 4096 {
		t = t[:4096]
	}
	t = strings.ToLower(t)
	for _, marker := range []string{"<!doctype html", "<html", "<body", "<head", "<div", "<p>", "<p ", "<span", "<table", "<ul", "<ol", "<br", "<h1", "<h2", "<h3", "<article", "<section", "<a href"} {
		if strings.Contains(t, marker) {
			return true
		}
	}
	return false
}

// Convert turns HTML into text. With markdown set, headings become "#"
// lines, list items "- " or "1. ", links "[text](href)", bold "**", italics
// "_", inline code and pre blocks backticks; without it only the text and
// line structure remain (links as "text (href)").
func Convert(html string, markdown bool) string {
	c := converter{md: markdown}
	c.run(html)
	return c.finish()
}

type converter struct {
	md    bool
	out   strings.Builder
	pre   int      // depth of <pre>
	lists []int    // per open list: -1 for ul, else next ol number
	links []string // hrefs of open <a>
	space bool     // a collapsed space is pending
}

// skipContent lists elements whose content is not text.
var skipContent = map[string]bool{"script": true, "style": true, "head": true, "noscript": true, "template": true, "svg": true, "iframe": true, "object": true}

var blockTags = map[string]bool{
	"p": true, "div": true, "section": true, "article": true, "header": true, "footer": true, "main": true,
	"nav": true, "aside": true, "table": true, "tr": true, "ul": true, "ol": true, "blockquote": true,
	"dl": true, "dt": true, "dd": true, "figure": true, "figcaption": true, "form": true, "fieldset": true,
	"address": true, "details": true, "summary": true, "body": true, "html": true, "caption": true,
}

func (c *converter) run(s string) {
	for i := 0; i < len(s); {
		if s[i] != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			c.text(s[i : i+j])
			i += j
			continue
		}
		if strings.HasPrefix(s[i:], "<!--") {
			end := strings.Index(s[i+4:], "-->")
			if end < 0 {
				return
			}
			i += 4 + end + 3
			continue
		}
		name, attrs, closing, selfClose, next, ok := parseTag(s, i)
		if !ok {
			c.text("<")
			i++
			continue
		}
		i = next
		if name == "" {
			continue // <!doctype>, <?xml ...?>
		}
		if !closing && skipContent[name] && !selfClose {
			end := indexFold(s[i:], "</"+name)
			if end < 0 {
				return
			}
			i += end
			if gt := strings.IndexByte(s[i:], '>'); gt >= 0 {
				i += gt + 1
			} else {
				return
			}
			continue
		}
		c.tag(name, attrs, closing, selfClose)
	}
}

// parseTag parses the tag at s[i] == '<'. name is lower case; it is empty
// for declarations and processing instructions.
func parseTag(s string, i int) (name, attrs string, closing, selfClose bool, next int, ok bool) {
	j := i + 1
	if j < len(s) && (s[j] == '!' || s[j] == '?') {
		end := strings.IndexByte(s[j:], '>')
		if end < 0 {
			return "", "", false, false, len(s), true
		}
		return "", "", false, false, j + end + 1, true
	}
	if j < len(s) && s[j] == '/' {
		closing = true
		j++
	}
	k := j
	for k < len(s) && (isLetter(s[k]) || (k > j && s[k] >= '0' && s[k] <= '9') || (k > j && s[k] == '-')) {
		k++
	}
	if k == j {
		return "", "", false, false, i, false
	}
	name = strings.ToLower(s[j:k])
	end := k
	quote := byte(0)
	for end < len(s) {
		ch := s[end]
		if quote != 0 {
			if ch == quote {
				quote = 0
			}
		} else if ch == '"' || ch == '\'' {
			quote = ch
		} else if ch == '>' {
			break
		}
		end++
	}
	if end >= len(s) {
		return "", "", false, false, i, false
	}
	attrs = s[k:end]
	selfClose = strings.HasSuffix(strings.TrimSpace(attrs), "/")
	return name, attrs, closing, selfClose, end + 1, true
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

func indexFold(s, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if strings.EqualFold(s[i:i+n], sub) {
			return i
		}
	}
	return -1
}

// attr returns the value of attribute key in a tag's attribute text.
func attr(attrs, key string) string {
	for i := 0; i < len(attrs); {
		for i < len(attrs) && !isLetter(attrs[i]) {
			i++
		}
		k := i
		for i < len(attrs) && attrs[i] != '=' && attrs[i] != ' ' && attrs[i] != '>' && attrs[i] != '/' && attrs[i] != '\t' && attrs[i] != '\n' {
			i++
		}
		name := attrs[k:i]
		for i < len(attrs) && attrs[i] == ' ' {
			i++
		}
		if i >= len(attrs) || attrs[i] != '=' {
			if strings.EqualFold(name, key) {
				return ""
			}
			continue
		}
		i++
		for i < len(attrs) && attrs[i] == ' ' {
			i++
		}
		var val string
		if i < len(attrs) && (attrs[i] == '"' || attrs[i] == '\'') {
			q := attrs[i]
			e := strings.IndexByte(attrs[i+1:], q)
			if e < 0 {
				val, i = attrs[i+1:], len(attrs)
			} else {
				val, i = attrs[i+1:i+1+e], i+e+2
			}
		} else {
			v := i
			for i < len(attrs) && attrs[i] != ' ' && attrs[i] != '\t' && attrs[i] != '\n' {
				i++
			}
			val = attrs[v:i]
		}
		if strings.EqualFold(name, key) {
			return decodeEntities(val)
		}
	}
	return ""
}

func (c *converter) write(s string) {
	if c.space {
		if c.out.Len() > 0 && !c.atLineStart() {
			c.out.WriteByte(' ')
		}
		c.space = false
	}
	c.out.WriteString(s)
}

func (c *converter) atLineStart() bool {
	s := c.out.String()
	return len(s) == 0 || s[len(s)-1] == '\n'
}

// newlines ends the current line and leaves up to n line breaks.
func (c *converter) newlines(n int) {
	c.space = false
	s := c.out.String()
	if len(s) == 0 {
		return
	}
	have := 0
	for k := len(s) - 1; k >= 0 && s[k] == '\n' && have < n; k-- {
		have++
	}
	for ; have < n; have++ {
		c.out.WriteByte('\n')
	}
}

func (c *converter) text(raw string) {
	t := decodeEntities(raw)
	if c.pre > 0 {
		c.write(t)
		return
	}
	for len(t) > 0 {
		r, size := utf8.DecodeRuneInString(t)
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' {
			c.space = true
			t = t[size:]
			continue
		}
		j := 0
		for j < len(t) {
			r, size := utf8.DecodeRuneInString(t[j:])
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' {
				break
			}
			j += size
		}
		c.write(t[:j])
		t = t[j:]
	}
}

func (c *converter) tag(name, attrs string, closing, selfClose bool) {
	switch name {
	case "br":
		c.space = false
		c.out.WriteByte('\n')
		return
	case "hr":
		c.newlines(2)
		if c.md {
			c.out.WriteString("---")
		}
		c.newlines(2)
		return
	case "img":
		if alt := attr(attrs, "alt"); alt != "" {
			if c.md {
				c.write("![" + alt + "]")
			} else {
				c.write("[image: " + alt + "]")
			}
		}
		return
	case "h1", "h2", "h3", "h4", "h5", "h6":
		c.newlines(2)
		if !closing && c.md {
			c.out.WriteString(strings.Repeat("#", int(name[1]-'0')) + " ")
		}
		return
	case "li":
		if closing {
			c.newlines(1)
			return
		}
		c.newlines(1)
		if len(c.lists) > 1 {
			c.out.WriteString(strings.Repeat("  ", len(c.lists)-1))
		}
		if n := len(c.lists); n > 0 && c.lists[n-1] >= 0 {
			c.out.WriteString(strconv.Itoa(c.lists[n-1]) + ". ")
			c.lists[n-1]++
		} else {
			c.out.WriteString("- ")
		}
		return
	case "ul", "ol":
		if closing {
			if len(c.lists) > 0 {
				c.lists = c.lists[:len(c.lists)-1]
			}
		} else if !selfClose {
			if name == "ol" {
				c.lists = append(c.lists, 1)
			} else {
				c.lists = append(c.lists, -1)
			}
		}
		c.newlines(2)
		return
	case "pre":
		if closing {
			c.newlines(1)
		} else {
			c.newlines(2)
		}
		if closing {
			if c.pre > 0 {
				c.pre--
			}
			if c.md {
				c.out.WriteString("```")
				c.newlines(2)
			}
		} else {
			c.pre++
			if c.md {
				c.out.WriteString("```\n")
			}
		}
		return
	case "a":
		if closing {
			if n := len(c.links); n > 0 {
				href := c.links[n-1]
				c.links = c.links[:n-1]
				switch {
				case href == "":
				case c.md:
					c.out.WriteString("](" + href + ")")
				default:
					c.space = true
					c.write("(" + href + ")")
				}
			}
			return
		}
		if selfClose {
			return
		}
		href := attr(attrs, "href")
		if strings.HasPrefix(href, "#") || strings.HasPrefix(strings.ToLower(href), "javascript:") {
			href = ""
		}
		c.links = append(c.links, href)
		if href != "" && c.md {
			c.write("[")
		}
		return
	case "strong", "b":
		if c.md {
			if closing {
				c.out.WriteString("**")
			} else {
				c.write("**")
			}
		}
		return
	case "em", "i":
		if c.md {
			if closing {
				c.out.WriteString("_")
			} else {
				c.write("_")
			}
		}
		return
	case "code":
		if c.md && c.pre == 0 {
			if closing {
				c.out.WriteString("`")
			} else {
				c.write("`")
			}
		}
		return
	case "td", "th":
		if closing {
			c.space = true
		}
		return
	}
	if blockTags[name] {
		if name == "tr" || name == "dt" || name == "dd" {
			c.newlines(1)
		} else {
			c.newlines(2)
		}
	}
}

func (c *converter) finish() string {
	lines := strings.Split(c.out.String(), "\n")
	var b strings.Builder
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			continue
		}
		if b.Len() > 0 {
			if blank > 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteByte('\n')
			}
		}
		blank = 0
		b.WriteString(l)
	}
	return b.String()
}

var entities = map[string]string{
	"amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": " ",
	"mdash": "—", "ndash": "–", "hellip": "…", "copy": "©", "reg": "®", "trade": "™",
	"lsquo": "‘", "rsquo": "’", "ldquo": "“", "rdquo": "”", "laquo": "«", "raquo": "»",
	"euro": "€", "pound": "£", "yen": "¥", "cent": "¢", "deg": "°", "middot": "·", "bull": "•",
	"times": "×", "divide": "÷", "para": "¶", "sect": "§",
}

// decodeEntities replaces character references; unknown ones stay as they
// are.
func decodeEntities(s string) string {
	amp := strings.IndexByte(s, '&')
	if amp < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for amp >= 0 {
		b.WriteString(s[:amp])
		s = s[amp:]
		semi := strings.IndexByte(s, ';')
		if semi < 2 || semi > 10 {
			b.WriteByte('&')
			s = s[1:]
		} else {
			name := s[1:semi]
			if rep, ok := decodeRef(name); ok {
				b.WriteString(rep)
				s = s[semi+1:]
			} else {
				b.WriteByte('&')
				s = s[1:]
			}
		}
		amp = strings.IndexByte(s, '&')
	}
	b.WriteString(s)
	return b.String()
}

func decodeRef(name string) (string, bool) {
	if name[0] != '#' {
		r, ok := entities[name]
		return r, ok
	}
	var n uint64
	var err error
	if len(name) > 1 && (name[1] == 'x' || name[1] == 'X') {
		n, err = strconv.ParseUint(name[2:], 16, 32)
	} else {
		n, err = strconv.ParseUint(name[1:], 10, 32)
	}
	if err != nil || n == 0 || n > utf8.MaxRune || (n >= 0xd800 && n <= 0xdfff) {
		return "", false
	}
	return string(rune(n)), true
}
