// Package redact finds secrets and personal data in JSON text and masks
// them.
//
// It is the engine of the redact-secrets policy module, written as plain Go
// (no build constraints) so it is unit-tested, fuzzed and benchmarked
// natively.
//
// The input is JSON text as it travels on the wire: a whole document, or
// the contents of a JSON string. Matching happens on that text directly
// (escape sequences such as \n count as word boundaries, PEM blocks keep
// their \n escapes), matches never cross a quote, and replacements are
// JSON-safe, so the output is valid JSON whenever the input was.
//
// # Semantics
//
// Scanning left to right, at each position not inside an earlier match, the
// first of these that matches is masked:
//   - a configured literal or custom token;
//   - at '@': an e-mail address around it;
//   - at a word start (a position preceded by the start of the text, a
//     character other than a letter, digit or '_', or an escape sequence):
//     a payment card number (13-19 digits in groups of at least 3, a card
//     network prefix, a valid Luhn checksum), a PEM private key block, an
//     API key (sk-, sk_live_, rk_live_, ghp_/gho_/ghu_/ghs_/ghr_,
//     github_pat_, xoxb-/xoxp-/..., AKIA/ASIA, AIza), a JWT, or the token
//     after "Bearer ".
//
// # Speed
//
// Inside a WebAssembly guest whose runtime enforces deadlines, every loop
// iteration costs about as much as fifty straight-line instructions, so the
// scanner looks at the text eight bytes per iteration and classifies each
// 8-byte tile with one table-driven sum. Only tiles that could hold the
// start of a match (a run of at least eight token characters, an '@', six
// digits, three dashes, a custom pattern's first byte) get a closer look.
// A straightforward per-position scanner with the same semantics is kept
// in the tests, and a fuzz test checks the two agree.
package redact

import (
	"math/bits"
	"strings"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// Kind names a class of secret.
type Kind uint8

// The kinds of secret the Redactor knows.
const (
	APIKey Kind = iota
	Bearer
	JWT
	PrivateKey
	Email
	Card
	Custom
	numKinds
)

var kindNames = [numKinds]string{"api_key", "bearer", "jwt", "private_key", "email", "card", "custom"}

// String returns the kind's config name, e.g. "api_key".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// ParseKind parses a config name.
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

// Token describes an extra token pattern: Prefix followed by at least
// MinLen characters from Charset ("alnum", "alnum_-" (default), "base64",
// "hex"). Prefixes that start with a letter or digit match at word starts
// only.
type Token struct {
	Prefix  string
	MinLen  int
	Charset string
}

// Config configures a Redactor.
type Config struct {
	// Replacement replaces each secret; "{kind}" in it is replaced by the
	// kind's name. Default "[REDACTED]".
	Replacement string
	// Disable turns kinds off.
	Disable []Kind
	// Tokens adds prefix-based token patterns (kind "custom").
	Tokens []Token
	// Literals are exact strings to mask wherever they occur (kind
	// "custom"), e.g. an internal host name. Empty strings are ignored.
	Literals []string
}

// Redactor masks secrets. It is immutable after New and safe for
// concurrent use.
type Redactor struct {
	repl     [numKinds][]byte
	disabled [numKinds]bool
	tokens   []token
	literals [][]byte // JSON-escaped
	custom   bool
	tab      [256]uint32 // tile classification, see the f* constants
	start    [256]uint8  // bytes that can begin a match after a separator
}

type token struct {
	prefix []byte
	min    int
	set    int  // character set id
	word   bool // must start at a word start
}

// Tile classification: each byte's table entry adds 1 to the 5-bit fields
// it belongs to. Eight entries summed never overflow a field, and adding
// bias sets a field's top bit (16) exactly when the field reaches its
// trigger threshold, so one add and one mask test a whole tile without
// branches.
const (
	fDigit  = 1 << 0
	fDash   = 1 << 5
	fAt     = 1 << 10
	fCustom = 1 << 15
	fWord   = 1 << 20 // token character: letter, digit, _ - . ~ + / =
	fSep    = 1 << 25 // token character that is not a letter, digit or _

	fieldMask = 31

	// Triggers: six digits (a card number), three dashes (a PEM header),
	// an '@' (an e-mail address), a custom pattern's first byte, eight
	// token characters (a key, token or JWT).
	biasOther = (16-6)*fDigit | (16-3)*fDash | (16-1)*fAt | (16-1)*fCustom
	highOther = 16*fDigit | 16*fDash | 16*fAt | 16*fCustom
	bias      = biasOther | (16-8)*fWord
	high      = highOther | 16*fWord
)

var (
	alnum, alnumDash, b64, hexSet, emailLocal, domainSet, tokenSet, upperNum, backoff [256]bool
	sepTab, tokBit, second                                                            [256]uint8
	baseTab                                                                           [256]uint32
)

func init() {
	for c := 0; c < 256; c++ {
		b := byte(c)
		isAlnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		alnum[c] = isAlnum
		alnumDash[c] = isAlnum || b == '_' || b == '-'
		b64[c] = isAlnum || b == '+' || b == '/' || b == '=' || b == '_' || b == '-'
		hexSet[c] = b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
		emailLocal[c] = isAlnum || strings.IndexByte("._%+-", b) >= 0
		domainSet[c] = isAlnum || b == '-' || b == '.'
		isSep := strings.IndexByte("-.~+/=", b) >= 0
		tokenSet[c] = isAlnum || b == '_' || isSep
		upperNum[c] = b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if tokenSet[c] {
			tokBit[c] = 1
		}
		// Second bytes of the patterns that can start inside a token run:
		// sk rk gh gi xo AK AS AI ey, card digits, and the PEM dashes.
		if strings.IndexByte("khioKSIy0123456789-", b) >= 0 {
			second[c] = 1
		}
		backoff[c] = b >= '0' && b <= '9' || b == ' ' || b == '-'
		var v uint32
		if b >= '0' && b <= '9' {
			v |= fDigit
		}
		if b == '-' {
			v |= fDash
		}
		if b == '@' {
			v |= fAt
		}
		if tokenSet[c] {
			v |= fWord
		}
		if isSep {
			v |= fSep
			sepTab[c] = 1
		}
		baseTab[c] = v
	}
}

func charset(name string) (int, bool) {
	switch name {
	case "", "alnum_-":
		return setAlnumDash, true
	case "alnum":
		return setAlnum, true
	case "base64":
		return setB64, true
	case "hex":
		return setHex, true
	}
	return 0, false
}

// ConfigError reports an invalid Config.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "redact config: " + e.Msg }

// jsonEscape returns s as it appears inside a JSON string written by the
// gateway (package jsonscan).
func jsonEscape(s string) []byte {
	q := jsonscan.AppendString(nil, s)
	return q[1 : len(q)-1]
}

// New builds a Redactor.
func New(cfg Config) (*Redactor, error) {
	r := &Redactor{tab: baseTab}
	repl := cfg.Replacement
	if repl == "" {
		repl = "[REDACTED]"
	}
	for k := Kind(0); k < numKinds; k++ {
		r.repl[k] = jsonEscape(strings.ReplaceAll(repl, "{kind}", k.String()))
	}
	for _, k := range cfg.Disable {
		if k < numKinds {
			r.disabled[k] = true
		}
	}
	for _, t := range cfg.Tokens {
		if t.Prefix == "" {
			return nil, &ConfigError{"token with an empty prefix"}
		}
		set, ok := charset(t.Charset)
		if !ok {
			return nil, &ConfigError{"unknown charset " + t.Charset + " (alnum, alnum_-, base64, hex)"}
		}
		minLen := t.MinLen
		if minLen <= 0 {
			minLen = 16
		}
		p := jsonEscape(t.Prefix)
		r.tokens = append(r.tokens, token{prefix: p, min: minLen, set: set, word: alnum[p[0]] || p[0] == '_'})
		r.tab[p[0]] |= fCustom
	}
	for _, l := range cfg.Literals {
		if l != "" {
			e := jsonEscape(l)
			r.literals = append(r.literals, e)
			r.tab[e[0]] |= fCustom
		}
	}
	r.custom = !r.disabled[Custom] && (len(r.tokens) > 0 || len(r.literals) > 0)
	for _, c := range "srgxAeBb23456-" {
		r.start[c] = 1
	}
	return r, nil
}

// state is one Redact call's output under construction.
type state struct {
	s       []byte
	dst     []byte
	last    int // end of the last match: s[:last] is settled
	changed bool
	runs    runs
}

func (st *state) emit(start, end int, repl []byte) {
	st.dst = append(st.dst, st.s[st.last:start]...)
	st.dst = append(st.dst, repl...)
	st.last = end
	st.changed = true
}

// Redact appends s to dst with every secret masked. changed reports whether
// anything was masked; when it is false dst is returned unchanged (nothing
// appended), so callers can keep s and skip a copy.
func (r *Redactor) Redact(dst, s []byte) (out []byte, changed bool) {
	st := state{s: s, dst: dst}
	t := &r.tab
	i := 0
	for i+8 <= len(s) {
		c := s[i : i+8 : i+8]
		sum := t[c[0]] + t[c[1]] + t[c[2]] + t[c[3]] + t[c[4]] + t[c[5]] + t[c[6]] + t[c[7]]
		if (sum+bias)&high == 0 {
			i += 8
			continue
		}
		if (sum>>20)&fieldMask == 8 {
			// Eight token characters. Keys, tokens and JWTs need runs of
			// 15 or more, card numbers 13 or more mostly digits; a long
			// word is an ordinary tile. Count the token characters next to
			// the tile without a loop or call (both are dear in the guest).
			digits := sum&fieldMask >= 6
			long := true
			if i >= 8 && i+16 <= len(s) {
				l, rt := s[i-8:i:i], s[i+8:i+16:i+16]
				lm := tokBit[l[7]] | tokBit[l[6]]<<1 | tokBit[l[5]]<<2 | tokBit[l[4]]<<3 |
					tokBit[l[3]]<<4 | tokBit[l[2]]<<5 | tokBit[l[1]]<<6 | tokBit[l[0]]<<7
				rm := tokBit[rt[0]] | tokBit[rt[1]]<<1 | tokBit[rt[2]]<<2 | tokBit[rt[3]]<<3 |
					tokBit[rt[4]]<<4 | tokBit[rt[5]]<<5 | tokBit[rt[6]]<<6 | tokBit[rt[7]]<<7
				n := bits.TrailingZeros8(^lm) + bits.TrailingZeros8(^rm)
				long = n >= 7 || digits && n >= 5
			}
			if long {
				if ts, re := runBounds(s, i, st.last); re-ts >= 15 || digits && re-ts >= 13 {
					i = r.longRun(&st, ts, re)
					continue
				}
			}
			if (sum+biasOther)&highOther == 0 {
				i += 8
				continue
			}
		}
		i = r.scan(&st, r.backoff(&st, i), i+8)
	}
	// The tail was never tiled: look at it, and far enough before it to
	// catch any match that began in tiles too short to trigger.
	r.scan(&st, max(i-24, 0), len(s))
	if !st.changed {
		return dst, false
	}
	return append(st.dst, s[st.last:]...), true
}

// wmask returns a bit mask of the token characters among s[i:i+8].
func wmask(s []byte, i int) uint8 {
	c := s[i : i+8 : i+8]
	return b2u(tokenSet[c[0]]) | b2u(tokenSet[c[1]])<<1 | b2u(tokenSet[c[2]])<<2 | b2u(tokenSet[c[3]])<<3 |
		b2u(tokenSet[c[4]])<<4 | b2u(tokenSet[c[5]])<<5 | b2u(tokenSet[c[6]])<<6 | b2u(tokenSet[c[7]])<<7
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// runBounds returns the run of token characters around the all-token tile
// at i, not reaching back before floor. It works a tile at a time.
func runBounds(s []byte, i, floor int) (ts, re int) {
	ts = i
	if i >= 8 {
		if m := wmask(s, i-8); m != 0xff {
			ts = i - bits.LeadingZeros8(^m)
		} else {
			ts = i - 8
			for ts > 0 && tokenSet[s[ts-1]] {
				ts--
			}
		}
	} else {
		for ts > 0 && tokenSet[s[ts-1]] {
			ts--
		}
	}
	ts = max(ts, floor)
	re = i + 8
	for re+8 <= len(s) {
		m := wmask(s, re)
		if m != 0xff {
			return ts, re + bits.TrailingZeros8(^m)
		}
		re += 8
	}
	for re < len(s) && tokenSet[s[re]] {
		re++
	}
	return ts, re
}

// backoff moves a tile's start left over digits, spaces and dashes, so a
// card number or PEM header that began before the tile is seen whole.
func (r *Redactor) backoff(st *state, i int) int {
	a := i
	for a > st.last && i-a < 24 && backoff[st.s[a-1]] {
		a--
	}
	return a
}

// candidate reports whether a match could start at s[p] at all, so the
// scanners call matchAt only where it can succeed.
func (r *Redactor) candidate(c byte) bool {
	return c == '@' || r.start[c] != 0 || r.custom && r.tab[c]&(fieldMask*fCustom) != 0
}

// scan examines every position in [from, to) (matches may run past to)
// and returns where scanning should resume.
func (r *Redactor) scan(st *state, from, to int) int {
	p := max(from, st.last)
	for p < to {
		if r.candidate(st.s[p]) {
			if start, end, k := r.matchAt(st, p); end > 0 {
				st.emit(start, end, r.repl[k])
				p = end
				continue
			}
		}
		p++
	}
	return max(p, to)
}

// longRun examines a run of token characters [ts, re) of length 13 or
// more. Inside a run a match can only start at the run's start, after an
// escape sequence at its start, or right after a separator (- . ~ + / =),
// so the run is walked a tile at a time looking for a separator followed
// by a byte that can start a match. The "Bearer" that may precede the run
// is checked too. It returns where scanning resumes.
func (r *Redactor) longRun(st *state, ts, re int) int {
	s := st.s
	if !r.disabled[Bearer] && ts > 0 && (s[ts-1] == ' ' || s[ts-1] == '\t') {
		r.bearerBefore(st, ts)
	}
	if r.custom {
		return r.scan(st, ts, re) // custom literals may start anywhere
	}
	// The run's start, or the first byte after an escape sequence that
	// opens the run (\n: one letter, \uXXXX: five bytes); no other word
	// start lies between them.
	first := ts
	if ts > 0 && s[ts-1] == '\\' {
		first = ts + 1
		if s[ts] == 'u' {
			first = ts + 5
		}
	}
	if p := first; p < re && p >= st.last && r.start[s[p]] != 0 && wordStart(s, p) {
		if start, end, k := r.matchAt(st, p); end > 0 {
			st.emit(start, end, r.repl[k])
		}
	}
	f := &r.start
	q := max(ts+1, st.last)
	for q+9 <= re {
		// Positions q..q+7: a separator before, a byte that can start a
		// match, and a plausible second byte.
		c := s[q-1 : q+9 : q+9]
		if sepTab[c[0]]&f[c[1]]&second[c[2]]|sepTab[c[1]]&f[c[2]]&second[c[3]]|sepTab[c[2]]&f[c[3]]&second[c[4]]|
			sepTab[c[3]]&f[c[4]]&second[c[5]]|sepTab[c[4]]&f[c[5]]&second[c[6]]|sepTab[c[5]]&f[c[6]]&second[c[7]]|
			sepTab[c[6]]&f[c[7]]&second[c[8]]|sepTab[c[7]]&f[c[8]]&second[c[9]] == 0 {
			q += 8
			continue
		}
		q = r.afterSeps(st, q, q+8)
	}
	r.afterSeps(st, q, re)
	return max(re, st.last)
}

// afterSeps checks the positions of [from, to) that follow a separator.
func (r *Redactor) afterSeps(st *state, from, to int) int {
	s := st.s
	p := max(from, st.last)
	for p < to {
		if p > 0 && sepTab[s[p-1]] != 0 && r.start[s[p]] != 0 && (p+1 >= len(s) || second[s[p+1]] != 0) {
			if start, end, k := r.matchAt(st, p); end > 0 {
				st.emit(start, end, r.repl[k])
				p = end
				continue
			}
		}
		p++
	}
	return max(p, to)
}

// bearerBefore checks for "Bearer " right before a token run at ts.
func (r *Redactor) bearerBefore(st *state, ts int) {
	s := st.s
	k := ts
	for k > 0 && ts-k < 8 && (s[k-1] == ' ' || s[k-1] == '\t') {
		k--
	}
	b := k - 6
	if k == ts || b < st.last || b < 0 || s[b]|0x20 != 'b' || s[b+1]|0x20 != 'e' {
		return
	}
	if start, end, kind := r.matchAt(st, b); end > 0 {
		st.emit(start, end, r.repl[kind])
	}
}

// wordStart reports whether a word starts at s[p]: at the start of the
// text, after a byte other than a letter, digit or '_', or right after a
// JSON escape sequence (\n \t \r \b \f or \uXXXX).
func wordStart(s []byte, p int) bool {
	if p == 0 {
		return true
	}
	c := s[p-1]
	if c == '\\' {
		return false // s[p] is part of an escape sequence (or follows a literal backslash)
	}
	if !alnum[c] && c != '_' {
		return true
	}
	if p >= 2 && s[p-2] == '\\' && (c == 'n' || c == 't' || c == 'r' || c == 'b' || c == 'f') {
		return true
	}
	return p >= 6 && s[p-6] == '\\' && s[p-5] == 'u' && hexSet[s[p-4]] && hexSet[s[p-3]] && hexSet[s[p-2]] && hexSet[c]
}

// matchAt tries every pattern at s[p]. end is 0 when nothing matches. An
// e-mail's local part does not reach back past the previous match.
func (r *Redactor) matchAt(st *state, p int) (start, end int, k Kind) {
	s, m := st.s, &st.runs
	c := s[p]
	if p > 0 && escaped(s, p) {
		return 0, 0, 0 // never start inside an escape sequence
	}
	if r.custom && r.tab[c]&(fieldMask*fCustom) != 0 {
		if e := r.customAt(s, p, m); e > p {
			return p, e, Custom
		}
	}
	if c == '@' {
		if !r.disabled[Email] {
			if b, e := email(s, p, st.last, m); e > 0 {
				return b, e, Email
			}
		}
		return 0, 0, 0
	}
	if !wordStart(s, p) {
		return 0, 0, 0
	}
	switch {
	case c >= '2' && c <= '6':
		if !r.disabled[Card] {
			if e, ok := card(s, p); ok {
				return p, e, Card
			}
		}
	case c == '-':
		if !r.disabled[PrivateKey] {
			if e := pemBlock(s, p); e > 0 {
				return p, e, PrivateKey
			}
		}
	case c == 'e':
		if !r.disabled[JWT] {
			if e := jwt(s, p, m); e > 0 {
				return p, e, JWT
			}
		}
	case c == 'B' || c == 'b':
		if !r.disabled[Bearer] {
			if b, e := bearer(s, p, m); e > 0 {
				return b, e, Bearer
			}
		}
	default:
		if !r.disabled[APIKey] {
			if e := apiKey(s, p, c, m); e > 0 {
				return p, e, APIKey
			}
		}
	}
	return 0, 0, 0
}

// escaped reports whether s[p] is preceded by an odd number of
// backslashes, i.e. is the letter of a JSON escape sequence.
func escaped(s []byte, p int) bool {
	n := 0
	for p-n > 0 && s[p-n-1] == '\\' && n < 64 {
		n++
	}
	return n%2 == 1
}

// boundaryAt reports whether a word ends before s[i].
func boundaryAt(s []byte, i int) bool {
	return i >= len(s) || !alnum[s[i]] && s[i] != '_'
}

// runs memoises the last run of each character set, so that matchers
// tried at many positions inside one long run (say "sk-sk-sk-...") scan it
// once instead of once per position.
type runs struct {
	from, end [numSets]int
	valid     [numSets]bool
}

// The character sets runs memoises.
const (
	setAlnum = iota
	setAlnumDash
	setB64
	setHex
	setDomain
	setToken
	setUpperNum
	numSets
)

var sets = [numSets]*[256]bool{&alnum, &alnumDash, &b64, &hexSet, &domainSet, &tokenSet, &upperNum}

// run returns the end of the run of bytes of set id starting at i.
func (m *runs) run(s []byte, i int, id int) int {
	if m.valid[id] && i >= m.from[id] && i <= m.end[id] {
		return m.end[id]
	}
	set := sets[id]
	e := i
	for e < len(s) && set[s[e]] {
		e++
	}
	m.from[id], m.end[id], m.valid[id] = i, e, true
	return e
}

// tail checks for at least min bytes of set id at s[i:] and returns their
// end.
func (m *runs) tail(s []byte, i, min int, id int) int {
	if e := m.run(s, i, id); e-i >= min {
		return e
	}
	return 0
}

func at(s []byte, i int, c byte) bool { return i < len(s) && s[i] == c }

func apiKey(s []byte, i int, c byte, m *runs) int {
	switch c {
	case 's', 'r':
		if at(s, i+1, 'k') {
			// OpenAI/Anthropic style: sk-..., sk-proj-..., sk-ant-...
			if c == 's' && at(s, i+2, '-') {
				return m.tail(s, i+3, 20, setAlnumDash)
			}
			// Stripe secret and restricted keys: sk_live_, sk_test_,
			// rk_live_, rk_test_.
			if at(s, i+2, '_') && i+8 <= len(s) && (string(s[i+3:i+8]) == "live_" || string(s[i+3:i+8]) == "test_") {
				return m.tail(s, i+8, 16, setAlnum)
			}
		}
	case 'g':
		// GitHub tokens: ghp_ (classic PAT), gho_, ghu_, ghs_, ghr_; and
		// fine-grained github_pat_.
		if at(s, i+1, 'h') && at(s, i+3, '_') && strings.IndexByte("pousr", s[i+2]) >= 0 {
			if e := m.run(s, i+4, setAlnum); e-(i+4) >= 30 && boundaryAt(s, e) {
				return e
			}
		}
		if i+11 <= len(s) && string(s[i:i+11]) == "github_pat_" {
			return m.tail(s, i+11, 22, setAlnumDash)
		}
	case 'x':
		// Slack tokens.
		if at(s, i+1, 'o') && at(s, i+2, 'x') && at(s, i+4, '-') && strings.IndexByte("bpars", s[i+3]) >= 0 {
			return m.tail(s, i+5, 10, setAlnumDash)
		}
	case 'A':
		if i+4 > len(s) {
			return 0
		}
		// AWS access key ids: AKIA/ASIA + 16 upper-case letters or digits.
		if (s[i+1] == 'K' || s[i+1] == 'S') && s[i+2] == 'I' && s[i+3] == 'A' {
			if e := m.run(s, i+4, setUpperNum); e-(i+4) == 16 && boundaryAt(s, e) {
				return e
			}
		}
		// Google API keys: AIza + 35 characters.
		if s[i+1] == 'I' && s[i+2] == 'z' && s[i+3] == 'a' {
			return m.tail(s, i+4, 35, setAlnumDash)
		}
	}
	return 0
}

// jwt matches header.payload[.signature] where the header starts "eyJ".
func jwt(s []byte, i int, m *runs) int {
	if !at(s, i+1, 'y') || !at(s, i+2, 'J') {
		return 0
	}
	e := m.run(s, i+3, setAlnumDash)
	if e-i < 10 || !at(s, e, '.') {
		return 0
	}
	p := m.run(s, e+1, setAlnumDash)
	if p-(e+1) < 10 {
		return 0
	}
	if at(s, p, '.') {
		p = m.run(s, p+1, setAlnumDash)
	}
	return p
}

// bearer matches "Bearer <token>" (any case, token of at least 16 token
// characters) and masks the token only.
func bearer(s []byte, i int, m *runs) (start, end int) {
	if i+7 > len(s) || s[i]|0x20 != 'b' || s[i+1]|0x20 != 'e' || s[i+2]|0x20 != 'a' ||
		s[i+3]|0x20 != 'r' || s[i+4]|0x20 != 'e' || s[i+5]|0x20 != 'r' || (s[i+6] != ' ' && s[i+6] != '\t') {
		return 0, 0
	}
	j := i + 6
	for j < len(s) && j-i < 14 && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	e := m.run(s, j, setToken)
	if e-j < 16 {
		return 0, 0
	}
	return j, e
}

// pemBlock masks a PEM private key block from "-----BEGIN ... PRIVATE
// KEY-----" through the matching END line; when the block is cut off it
// masks up to the end of the JSON string (or of the text).
func pemBlock(s []byte, i int) int {
	const begin = "-----BEGIN "
	if i+len(begin) > len(s) || string(s[i:i+len(begin)]) != begin {
		return 0
	}
	j := i + len(begin)
	k := j
	for k < len(s) && k-j < 40 && (s[k] >= 'A' && s[k] <= 'Z' || s[k] == ' ') {
		k++
	}
	if !strings.HasSuffix(string(s[j:k]), "PRIVATE KEY") || k+5 > len(s) || string(s[k:k+5]) != "-----" {
		return 0
	}
	for e := k + 5; e < len(s); e++ {
		switch s[e] {
		case '\\':
			e++ // skip the escaped byte
		case '"':
			return e // end of the JSON string
		case '-':
			if e+9 <= len(s) && string(s[e:e+9]) == "-----END " {
				e += 9
				for e < len(s) && (s[e] >= 'A' && s[e] <= 'Z' || s[e] == ' ') {
					e++
				}
				if e+5 <= len(s) && string(s[e:e+5]) == "-----" {
					e += 5
				}
				return e
			}
		}
	}
	return len(s)
}

// email expands around the '@' at s[at]; the local part never reaches
// before floor (text already emitted).
func email(s []byte, at, floor int, m *runs) (start, end int) {
	start = at
	for start > floor && emailLocal[s[start-1]] && at-start < 64 {
		start--
	}
	for start < at && escaped(s, start) {
		// Do not eat into an escape sequence such as \u0040.
		if s[start] == 'u' {
			start += 5
		} else {
			start++
		}
	}
	for start < at && (s[start] == '.' || s[start] == '-') {
		start++ // a local part does not start with '.'
	}
	if start >= at {
		return 0, 0
	}
	if start == at {
		return 0, 0
	}
	end = m.run(s, at+1, setDomain)
	for end > at+1 && (s[end-1] == '.' || s[end-1] == '-') {
		end--
	}
	if end == at+1 || s[at+1] == '.' || s[at+1] == '-' {
		return 0, 0
	}
	// The top-level domain: two or more letters after the last dot, and no
	// empty labels.
	dot := -1
	for k := at + 1; k < end; k++ {
		if s[k] == '.' {
			if s[k-1] == '.' {
				return 0, 0
			}
			dot = k
		}
	}
	if dot < 0 || end-dot-1 < 2 {
		return 0, 0
	}
	for _, c := range s[dot+1 : end] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return 0, 0
		}
	}
	return start, end
}

// card reports whether a payment card number starts at s[i]: 13-19 digits
// in groups of at least three separated by single spaces or dashes (the
// same separator throughout), a card network prefix (2-6), and a valid Luhn
// checksum.
func card(s []byte, i int) (end int, ok bool) {
	var digits [19]byte
	n, group := 0, 0
	j := i
	sep := byte(0)
	for j < len(s) {
		c := s[j]
		if c >= '0' && c <= '9' {
			if n == len(digits) {
				return 0, false // too long to be a card
			}
			digits[n] = c - '0'
			n++
			group++
			j++
			continue
		}
		if (c == ' ' || c == '-') && group >= 3 && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' && (sep == 0 || sep == c) {
			sep = c
			group = 0
			j++
			continue
		}
		break
	}
	if n < 13 || group < 3 || !boundaryAt(s, j) || digits[0] < 2 || digits[0] > 6 {
		return 0, false
	}
	sum := 0
	for k := 0; k < n; k++ {
		d := int(digits[n-1-k])
		if k%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return j, sum%10 == 0
}

// customAt checks the configured tokens and literals at s[i].
func (r *Redactor) customAt(s []byte, i int, m *runs) int {
	for _, t := range r.tokens {
		if t.word && !wordStart(s, i) {
			continue
		}
		if len(s)-i >= len(t.prefix) && string(s[i:i+len(t.prefix)]) == string(t.prefix) {
			if e := m.tail(s, i+len(t.prefix), t.min, t.set); e > 0 {
				return e
			}
		}
	}
	for _, l := range r.literals {
		if len(s)-i >= len(l) && string(s[i:i+len(l)]) == string(l) {
			return i + len(l)
		}
	}
	return 0
}
