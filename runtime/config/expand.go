package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// expand replaces ${VAR} and ${VAR:-default} with values from the
// environment and $$ with $. Any other $ is kept as it is. Errors name the
// variable, never the value.
func (d *decoder) expand(cs configString) (string, *Error) {
	s := cs.s
	if strings.IndexByte(s, '$') < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) || (s[i+1] != '$' && s[i+1] != '{') {
			b.WriteByte(c)
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", d.fail(cs.path, `has "${" without a closing "}" (write $$ for a literal $)`)
		}
		ref := s[i+2 : i+2+end]
		if file, ok := strings.CutPrefix(ref, "file:"); ok {
			// ${file:/run/secrets/token} is the file's content, trimmed:
			// secrets stay out of the config and the environment.
			if !filepath.IsAbs(file) && d.file != "" {
				file = filepath.Join(filepath.Dir(d.file), file)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return "", d.fail(cs.path, "reading ${file:%s}: %v", file, errors.Unwrap(err))
			}
			b.WriteString(strings.TrimSpace(string(data)))
			i += 2 + end + 1
			continue
		}
		name, def, hasDef := strings.Cut(ref, ":-")
		if !configValidVar(name) {
			return "", d.fail(cs.path, `has an invalid variable reference ${%s}: a name is letters, digits and _, not starting with a digit; write $$ for a literal $`, configTrim(name))
		}
		v, ok := os.LookupEnv(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", d.fail(cs.path, "environment variable %s is not set (set it, or write ${%s:-default})", name, name)
		}
		b.WriteString(v)
		i += 2 + end + 1
	}
	return b.String(), nil
}

// configTrim shortens s for an error message.
func configTrim(s string) string {
	q := configQuote(s)
	return q[1 : len(q)-1]
}

func configValidVar(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}
