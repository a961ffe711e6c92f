package guest

import "github.com/edge-mcp/edge-mcp/guest/glob"

// Glob reports whether name matches pattern, in which '*' matches any run of
// characters (including none) and '?' matches exactly one byte. Every other
// byte matches itself. It is the matcher the host uses for the "tools" and
// "servers" attachment globs (package guest/glob).
func Glob(pattern, name string) bool { return glob.Match(pattern, name) }

// GlobAny reports whether name matches any of patterns.
func GlobAny(patterns []string, name string) bool { return glob.MatchAny(patterns, name) }
