package policy

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/internal/jsonx"
)

// Recorded is one hook call handed to EngineConfig.Recorder.
type Recorded struct {
	Module string // the name the module was loaded under
	Hook   Hook
	// Input is a copy of the exact bytes the guest is handed: a valid
	// TestVector input for Hook. It may hold secrets; see RedactInput.
	Input json.RawMessage
	Time  time.Time
}

// redacted replaces secrets in RedactInput's output.
const redacted = "[REDACTED]"

// sensitiveKeys are the parts of member names whose string values
// RedactInput replaces, compared with names in lower case without '_' and
// '-' (so api_key, apiKey and X-Api-Key all contain "apikey").
var sensitiveKeys = []string{"password", "passwd", "secret", "token", "authorization",
	"apikey", "cookie", "credential", "privatekey"}

// secretPattern matches well-known secret formats inside any string: JSON
// web tokens, bearer credentials, AWS access key ids, GitHub tokens and
// sk- API keys of at least 20 characters.
var secretPattern = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+` +
	`|\b(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*` +
	`|\bAKIA[0-9A-Z]{16}\b` +
	`|\bgh[opusr]_[A-Za-z0-9]{20,}` +
	`|\bgithub_pat_[A-Za-z0-9_]{20,}` +
	`|\bsk-[A-Za-z0-9_-]{17,}`)

var keySeparators = strings.NewReplacer("_", "", "-", "")

func sensitiveKey(key string) bool {
	key = keySeparators.Replace(strings.ToLower(key))
	for _, k := range sensitiveKeys {
		if strings.Contains(key, k) {
			return true
		}
	}
	return false
}

// redactString replaces the well-known secrets inside s; a bearer
// credential keeps its "Bearer " prefix.
func redactString(s string) string {
	return secretPattern.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) > 6 && strings.EqualFold(m[:6], "bearer") {
			i := 6
			for i < len(m) && strings.ContainsRune(" \t\r\n\f\v", rune(m[i])) {
				i++
			}
			return m[:i] + redacted
		}
		return redacted
	})
}

// RedactInput returns input with secrets replaced by "[REDACTED]", for
// storing recorded hook inputs (see EngineConfig.Recorder). It replaces
//
//   - the string value of every member whose name, in lower case, contains
//     password, passwd, secret, token, authorization, api_key, apikey,
//     cookie, credential or private_key, ignoring '_' and '-' (so apiKey,
//     X-Api-Key and privateKey match too), and the strings inside arrays
//     that are such a member's value;
//   - inside every other string, the substrings that look like well-known
//     secrets: JSON web tokens (eyJ….….…), bearer credentials ("Bearer "
//     is kept), AWS access key ids (AKIA…), GitHub tokens (ghp_, gho_,
//     ghu_, ghs_, ghr_, github_pat_) and sk-… keys of 20 characters or more.
//
// Everything else keeps its bytes: input without secrets comes back
// unchanged, and a changed string is re-encoded on its own. Input that is
// not valid JSON is returned as it is. RedactInput is idempotent.
func RedactInput(input json.RawMessage) json.RawMessage {
	if !jsonx.Valid(input) {
		return input
	}
	var out []byte // nil until the first change
	copied := 0    // input[:copied] is in out
	replace := func(start, end int, s string) {
		out = append(out, input[copied:start]...)
		out = jsonx.AppendString(out, s)
		copied = end
	}
	type frame struct {
		object    bool
		sensitive bool // an array under a sensitive key
	}
	var stack []frame
	expectKey := false // the next string in an object is a key
	keySensitive := false
	for i := 0; i < len(input); {
		c := input[i]
		switch c {
		case '{':
			stack = append(stack, frame{object: true})
			expectKey = true
			i++
		case '[':
			sens := keySensitive && len(stack) > 0 && stack[len(stack)-1].object
			if len(stack) > 0 && !stack[len(stack)-1].object {
				sens = stack[len(stack)-1].sensitive
			}
			stack = append(stack, frame{sensitive: sens})
			i++
		case '}', ']':
			stack = stack[:len(stack)-1]
			i++
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1].object
			i++
		case '"':
			end := stringEnd(input, i)
			lit := input[i:end]
			s, err := jsonx.Unquote(lit)
			inObject := len(stack) > 0 && stack[len(stack)-1].object
			switch {
			case err != nil:
				// Cannot happen for valid JSON; leave the literal alone.
			case inObject && expectKey:
				keySensitive = sensitiveKey(s)
				expectKey = false
			case (inObject && keySensitive) || (!inObject && len(stack) > 0 && stack[len(stack)-1].sensitive):
				if s != redacted || string(lit) != `"`+redacted+`"` {
					replace(i, end, redacted)
				}
			default:
				if r := redactString(s); r != s {
					replace(i, end, r)
				}
			}
			i = end
		default:
			i++
		}
	}
	if out == nil {
		return input
	}
	return append(out, input[copied:]...)
}

// stringEnd returns the index just past the JSON string literal starting
// at b[i] (a '"'), which must be terminated.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}
