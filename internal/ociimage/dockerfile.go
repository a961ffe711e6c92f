// Package ociimage assembles the edge-mcp container image without a
// container engine: the final stage of the repository's Dockerfile (its
// USER, ENV, VOLUME, EXPOSE, LABEL, ENTRYPOINT, CMD and COPY lines) applied
// to a release binary, on an empty base that stands in for distroless
// static (an /etc/passwd naming the nonroot user, CA certificates, /tmp).
// CI builds it (go run ./internal/cmd/image) where no engine can pull the
// Dockerfile's base images, and Check verifies the config either way.
package ociimage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Stage is what the Dockerfile's final stage says about the image.
type Stage struct {
	From       string
	User       string
	Env        []string // KEY=VALUE, in order
	Volumes    []string
	Expose     []string // "8080/tcp"
	Labels     map[string]string
	Entrypoint []string
	Cmd        []string
	Copies     []Copy
}

// Copy is a COPY --from=… of the final stage.
type Copy struct {
	Src, Dst string
	Chown    string // "65532:65532", "" for root
}

// ParseDockerfile reads the final stage of a Dockerfile. args are the
// build arguments (${NAME} in LABEL values); unknown instructions are
// errors, so that a change to the Dockerfile is a change here too.
func ParseDockerfile(r io.Reader, args map[string]string) (*Stage, error) {
	lines, err := logicalLines(r)
	if err != nil {
		return nil, err
	}
	final := -1 // the final stage's FROM
	for i, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			final = i
		}
	}
	if final < 0 {
		return nil, fmt.Errorf("Dockerfile: no FROM")
	}
	from := strings.Fields(lines[final])
	st := &Stage{From: from[1], Labels: map[string]string{}}
	for _, f := range from[1:] {
		if !strings.HasPrefix(f, "--") {
			st.From = f
			break
		}
	}
	for _, l := range lines[final+1:] {
		word, rest, _ := strings.Cut(l, " ")
		word = strings.ToUpper(word)
		if word == "ARG" {
			continue // values come from args
		}
		if err := st.apply(word, strings.TrimSpace(rest), args); err != nil {
			return nil, fmt.Errorf("Dockerfile: %s %s: %w", word, rest, err)
		}
	}
	return st, nil
}

func (st *Stage) apply(word, rest string, args map[string]string) error {
	switch word {
	case "USER":
		st.User = rest
	case "ENV":
		for _, kv := range strings.Fields(rest) {
			if !strings.Contains(kv, "=") {
				return fmt.Errorf("want KEY=VALUE pairs")
			}
			st.Env = append(st.Env, kv)
		}
	case "VOLUME":
		return json.Unmarshal([]byte(rest), &st.Volumes)
	case "EXPOSE":
		for _, p := range strings.Fields(rest) {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			st.Expose = append(st.Expose, p)
		}
	case "LABEL":
		return st.labels(rest, args)
	case "ENTRYPOINT":
		return json.Unmarshal([]byte(rest), &st.Entrypoint)
	case "CMD":
		return json.Unmarshal([]byte(rest), &st.Cmd)
	case "COPY":
		return st.copy(rest)
	default:
		return fmt.Errorf("instruction not known to internal/ociimage")
	}
	return nil
}

func (st *Stage) copy(rest string) error {
	var c Copy
	var paths []string
	for _, f := range strings.Fields(rest) {
		switch {
		case strings.HasPrefix(f, "--from="):
		case strings.HasPrefix(f, "--chown="):
			c.Chown = strings.TrimPrefix(f, "--chown=")
		case strings.HasPrefix(f, "--"):
			return fmt.Errorf("flag %s not known to internal/ociimage", f)
		default:
			paths = append(paths, f)
		}
	}
	if len(paths) != 2 {
		return fmt.Errorf("want one source and one destination")
	}
	c.Src, c.Dst = paths[0], paths[1]
	st.Copies = append(st.Copies, c)
	return nil
}

// labels reads KEY="VALUE" pairs, expanding ${ARG}.
func (st *Stage) labels(rest string, args map[string]string) error {
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || !strings.HasPrefix(after, `"`) {
			return fmt.Errorf("want KEY=\"VALUE\" pairs")
		}
		end := strings.IndexByte(after[1:], '"')
		if end < 0 {
			return fmt.Errorf("unterminated value of %s", key)
		}
		val := after[1 : end+1]
		for k, v := range args {
			val = strings.ReplaceAll(val, "${"+k+"}", v)
		}
		st.Labels[strings.TrimSpace(key)] = val
		rest = after[end+2:]
	}
	return nil
}

// logicalLines joins continued lines and drops comments and blank lines.
func logicalLines(r io.Reader) ([]string, error) {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || l == "" && cur.Len() == 0 {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	return out, sc.Err()
}
