package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
)

// maxNameLen is the longest function name OpenAI accepts.
const maxNameLen = 64

// hashLen is the number of hex digits of the suffix that keeps truncated or
// colliding names distinct.
const hashLen = 8

// Namer maps MCP tool names to OpenAI function names and back. OpenAI names
// must match ^[a-zA-Z0-9_-]{1,64}$, MCP names need not.
//
// A name that is already valid is kept as it is. Otherwise every invalid
// character (rune) becomes '_', an empty name becomes "tool", and a name
// longer than 64 characters is cut to 55 and given the suffix "_" plus 8 hex
// digits of the SHA-256 of the MCP name, so distinct long names stay
// distinct. When that leaves two names the same, or equal to a name that was
// valid to begin with, every such changed name gets the hash suffix instead
// (names that were valid never change). The mapping depends only on the set
// of names, not their order, and is one-to-one. A Namer is immutable and safe
// for concurrent use.
type Namer struct {
	toOpenAI map[string]string
	toMCP    map[string]string
}

// NewNamer builds the mapping for mcpNames. Duplicates are ignored.
func NewNamer(mcpNames []string) *Namer {
	names := slices.Clone(mcpNames)
	slices.Sort(names)
	names = slices.Compact(names)

	n := &Namer{
		toOpenAI: make(map[string]string, len(names)),
		toMCP:    make(map[string]string, len(names)),
	}
	// Valid names keep themselves; they cannot collide with one another.
	candidates := make(map[string][]string) // sanitised name → changed names
	for _, name := range names {
		if validName(name) {
			n.assign(name, name)
			continue
		}
		c := sanitize(name)
		candidates[c] = append(candidates[c], name)
	}
	// Changed names, in sorted order, take their sanitised form when it is
	// theirs alone, the hashed form otherwise.
	for _, name := range names {
		if validName(name) {
			continue
		}
		c := sanitize(name)
		if _, taken := n.toMCP[c]; taken || len(candidates[c]) > 1 {
			c = withHash(c, name)
		}
		// A hashed name can still clash, with negligible probability: count up.
		for i := 2; ; i++ {
			if _, taken := n.toMCP[c]; !taken {
				break
			}
			c = withSuffix(c, "_"+strconv.Itoa(i))
		}
		n.assign(name, c)
	}
	return n
}

func (n *Namer) assign(mcpName, openaiName string) {
	n.toOpenAI[mcpName] = openaiName
	n.toMCP[openaiName] = mcpName
}

// OpenAI returns the OpenAI function name for mcpName. A name the Namer was
// not built with is converted by the same rules as if it were alone (always
// valid, but not guaranteed distinct, and MCP does not map it back).
func (n *Namer) OpenAI(mcpName string) string {
	if name, ok := n.toOpenAI[mcpName]; ok {
		return name
	}
	if validName(mcpName) {
		return mcpName
	}
	return sanitize(mcpName)
}

// MCP returns the MCP tool name that openaiName stands for, and whether there
// is one.
func (n *Namer) MCP(openaiName string) (string, bool) {
	name, ok := n.toMCP[openaiName]
	return name, ok
}

// validName reports whether s is a valid OpenAI function name.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i := range len(s) {
		if !validByte(s[i]) {
			return false
		}
	}
	return true
}

func validByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// sanitize replaces each rune of name that is not allowed with '_' and
// shortens the result to maxNameLen with a hash suffix when needed.
func sanitize(name string) string {
	if name == "" {
		return "tool"
	}
	b := make([]byte, 0, len(name))
	for _, r := range name {
		if r < 0x80 && validByte(byte(r)) {
			b = append(b, byte(r))
		} else {
			b = append(b, '_')
		}
	}
	if len(b) > maxNameLen {
		return withHash(string(b), name)
	}
	return string(b)
}

// withHash returns base with the suffix "_" + hash of mcpName, shortened to
// fit maxNameLen.
func withHash(base, mcpName string) string {
	sum := sha256.Sum256([]byte(mcpName))
	return withSuffix(base, "_"+hex.EncodeToString(sum[:])[:hashLen])
}

// withSuffix appends suffix to base, cutting base so the result fits
// maxNameLen.
func withSuffix(base, suffix string) string {
	if len(base)+len(suffix) > maxNameLen {
		base = base[:maxNameLen-len(suffix)]
	}
	return base + suffix
}
