package search

import (
	"unicode"
	"unicode/utf8"
)

// The tokenizer turns free text and identifiers into index terms. It works in
// two layers:
//
//   - An identifier run is a maximal stretch of letters, digits and marks,
//     possibly joined by the connectors '_', '-', '.', '/' and ':' (for
//     example "github__create_issue", "fs.read_file" or "getWeatherForecast").
//     Connectors at either end of a run are not part of it.
//   - A run is split into words at connectors and at case changes: a lower-case
//     letter or digit followed by an upper-case one ("getWeather" → get,
//     weather; "s3Bucket" → s3, bucket), and the last capital of an acronym
//     followed by a lower-case letter ("HTTPServer" → http, server).
//
// Each word is lower-cased, dropped if it is a stop word, stemmed (see stem)
// and emitted. Each pair of consecutive emitted words (stop words skipped) is
// emitted too, joined by '_' ("read_fil"), across the whole text: a tool named
// read_file or readFile, or described as reading "the file", carries the pair,
// and so a query for "read file contents" prefers it to a tool that merely
// mentions reading and files somewhere. Finally a run of two or more words is
// emitted whole, lower-cased and unstemmed ("github__create_issue"), so that a
// query naming a tool exactly matches that tool's rare whole-name term; runs
// longer than maxCompoundLen bytes (URLs, base64 blobs) are not.
const maxCompoundLen = 128

// span is one word of a run, as byte offsets into the run.
type span struct{ start, end int }

// tokenizer holds the reusable buffers of one tokenization. Tokens are stored
// back to back in buf; ends[i] is the end offset of token i.
type tokenizer struct {
	buf   []byte
	ends  []int
	words []span
	// prevStart and prevEnd locate the previous emitted word in buf, for
	// pairing, when hasPrev is set.
	prevStart, prevEnd int
	hasPrev            bool
}

func (t *tokenizer) reset() {
	t.buf = t.buf[:0]
	t.ends = t.ends[:0]
	t.hasPrev = false
}

// n returns the number of tokens produced since the last reset.
func (t *tokenizer) n() int { return len(t.ends) }

// token returns token i. The slice aliases the tokenizer's buffer.
func (t *tokenizer) token(i int) []byte {
	start := 0
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.buf[start:t.ends[i]]
}

// tokenize appends the tokens of s.
func (t *tokenizer) tokenize(s string) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isWord(r) {
			i += size
			continue
		}
		start, end, j := i, i, i
		for j < len(s) {
			r, size := utf8.DecodeRuneInString(s[j:])
			if isWord(r) {
				j += size
				end = j
				continue
			}
			if isConnector(r) {
				j += size
				continue
			}
			break
		}
		t.run(s[start:end])
		i = j
	}
}

// run tokenizes one identifier run (which starts and ends with a word rune).
func (t *tokenizer) run(run string) {
	t.words = t.words[:0]
	wstart := -1
	var prev rune
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRuneInString(run[i:])
		if isConnector(r) {
			if wstart >= 0 {
				t.words = append(t.words, span{wstart, i})
				wstart = -1
			}
			i += size
			continue
		}
		if wstart >= 0 && isUpper(r) {
			next, _ := utf8.DecodeRuneInString(run[i+size:])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (isUpper(prev) && unicode.IsLower(next)) {
				t.words = append(t.words, span{wstart, i})
				wstart = -1
			}
		}
		if wstart < 0 {
			wstart = i
		}
		prev = r
		i += size
	}
	if wstart >= 0 {
		t.words = append(t.words, span{wstart, len(run)})
	}

	for _, w := range t.words {
		start := len(t.buf)
		t.buf = appendLower(t.buf, run[w.start:w.end])
		if _, stop := stopWords[string(t.buf[start:])]; stop {
			t.buf = t.buf[:start]
			continue
		}
		t.buf = append(t.buf[:start], stem(t.buf[start:])...)
		end := len(t.buf)
		t.ends = append(t.ends, end)
		if t.hasPrev {
			t.buf = append(t.buf, t.buf[t.prevStart:t.prevEnd]...)
			t.buf = append(t.buf, '_')
			t.buf = append(t.buf, t.buf[start:end]...)
			t.ends = append(t.ends, len(t.buf))
		}
		t.prevStart, t.prevEnd, t.hasPrev = start, end, true
	}
	if len(t.words) >= 2 && len(run) <= maxCompoundLen {
		t.buf = appendLower(t.buf, run)
		t.ends = append(t.ends, len(t.buf))
	}
}

// tokenize returns the tokens of s; it is the allocating form used by tests.
func tokenize(s string) []string {
	var t tokenizer
	t.tokenize(s)
	out := make([]string, t.n())
	for i := range out {
		out[i] = string(t.token(i))
	}
	return out
}

func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isConnector(r rune) bool {
	return r == '_' || r == '-' || r == '.' || r == '/' || r == ':'
}

func isUpper(r rune) bool { return unicode.IsUpper(r) || unicode.IsTitle(r) }

func appendLower(dst []byte, s string) []byte {
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			dst = append(dst, byte(r)+'a'-'A')
		} else if r < utf8.RuneSelf {
			dst = append(dst, byte(r))
		} else {
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
		}
	}
	return dst
}

// stopWords are dropped from text and queries (but not from whole-run terms).
// The list is deliberately small: words that carry no meaning in a tool
// search ("please send a message to the channel").
var stopWords = func() map[string]struct{} {
	m := make(map[string]struct{})
	for _, w := range []string{
		"a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "could",
		"do", "does", "for", "from", "how", "i", "if", "in", "into", "is", "it",
		"its", "me", "my", "of", "on", "or", "our", "please", "s", "should", "so",
		"some", "t", "that", "the", "their", "them", "then", "there", "these",
		"this", "those", "to", "via", "want", "was", "we", "were", "what", "when",
		"where", "which", "who", "will", "with", "would", "you", "your",
	} {
		m[w] = struct{}{}
	}
	return m
}()

// stem applies light English suffix stripping to a lower-case word made only
// of ASCII letters (other words are returned unchanged), in place:
//
//  1. plurals: "-ies" → "-y" (entries → entry); "-sses", "-xes", "-ches",
//     "-shes" lose "es" (addresses → address, boxes → box); otherwise a final
//     "s" is dropped unless the word ends in "ss", "us" or (for words of five
//     letters or more) "is" (files → file, status, redis stay);
//  2. "-ing" (words of six letters or more) and "-ed" (five or more, not
//     "-eed") are dropped when a vowel remains, and a doubled final consonant
//     other than l, s or z is then undoubled (running → run, stopped → stop);
//  3. a final "e" is dropped from words of four letters or more (not "-ee"),
//     so that create, creates, created and creating all become "creat".
//
// Words of three letters or fewer are never changed.
func stem(w []byte) []byte {
	if len(w) <= 3 {
		return w
	}
	for _, c := range w {
		if c < 'a' || c > 'z' {
			return w
		}
	}
	switch {
	case hasSuffix(w, "ies") && len(w) > 4:
		w = append(w[:len(w)-3], 'y')
	case hasSuffix(w, "sses"), hasSuffix(w, "xes"), hasSuffix(w, "ches"), hasSuffix(w, "shes"):
		w = w[:len(w)-2]
	case hasSuffix(w, "s") && !hasSuffix(w, "ss") && !hasSuffix(w, "us") && !(hasSuffix(w, "is") && len(w) >= 5):
		w = w[:len(w)-1]
	}
	switch {
	case hasSuffix(w, "ing") && len(w) >= 6 && hasVowel(w[:len(w)-3]):
		w = undouble(w[:len(w)-3])
	case hasSuffix(w, "ed") && !hasSuffix(w, "eed") && len(w) >= 5 && hasVowel(w[:len(w)-2]):
		w = undouble(w[:len(w)-2])
	}
	if len(w) >= 4 && w[len(w)-1] == 'e' && w[len(w)-2] != 'e' {
		w = w[:len(w)-1]
	}
	return w
}

func hasSuffix(w []byte, suffix string) bool {
	return len(w) >= len(suffix) && string(w[len(w)-len(suffix):]) == suffix
}

// hasVowel reports whether w contains a, e, i, o, u, or a y after its first
// letter.
func hasVowel(w []byte) bool {
	for i, c := range w {
		switch c {
		case 'a', 'e', 'i', 'o', 'u':
			return true
		case 'y':
			if i > 0 {
				return true
			}
		}
	}
	return false
}

// undouble drops the last letter of w when w is at least four letters long and
// ends in a doubled consonant other than l, s or z.
func undouble(w []byte) []byte {
	n := len(w)
	if n < 4 || w[n-1] != w[n-2] {
		return w
	}
	switch w[n-1] {
	case 'a', 'e', 'i', 'o', 'u', 'l', 's', 'z':
		return w
	}
	return w[:n-1]
}
