package metrics

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A strict parser of the text exposition format for the tests: every
// sample must belong to a family declared by a TYPE line before it, label
// values must be well escaped, a series must not repeat, and histogram
// buckets must be cumulative and end in a +Inf bucket equal to the count.

type tfamily struct {
	typ, help string
	metrics   []*tmetric
}

type tmetric struct {
	labels map[string]string
	value  float64
	hist   *thist // histograms only
}

type thist struct {
	count   float64
	sum     float64
	buckets []tbucket // finite upper bounds only
	inf     float64
	seenInf bool
}

type tbucket struct {
	le  float64
	cum float64
}

func parseText(r io.Reader) (map[string]*tfamily, error) {
	families := map[string]*tfamily{}
	seen := map[string]bool{} // series already parsed, name + labels
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if err := parseLine(families, seen, sc.Text()); err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n, sc.Text(), err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for name, f := range families {
		for _, m := range f.metrics {
			if h := m.hist; h != nil && (!h.seenInf || h.inf != h.count) {
				return nil, fmt.Errorf("histogram %s%v: +Inf bucket %v, count %v", name, m.labels, h.inf, h.count)
			}
		}
	}
	return families, nil
}

func parseLine(families map[string]*tfamily, seen map[string]bool, line string) error {
	if line == "" {
		return nil
	}
	if rest, ok := strings.CutPrefix(line, "# "); ok {
		kw, rest, _ := strings.Cut(rest, " ")
		name, text, _ := strings.Cut(rest, " ")
		switch kw {
		case "HELP":
			if families[name] != nil {
				return fmt.Errorf("HELP after TYPE or repeated")
			}
			families[name] = &tfamily{help: text}
		case "TYPE":
			f := families[name]
			if f == nil {
				f = &tfamily{}
				families[name] = f
			}
			if f.typ != "" || len(f.metrics) > 0 {
				return fmt.Errorf("TYPE repeated or after samples")
			}
			if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, text) {
				return fmt.Errorf("unknown type %q", text)
			}
			f.typ = text
		}
		return nil
	}
	name, labels, value, err := splitSample(line)
	if err != nil {
		return err
	}
	key := name + fmt.Sprint(labels)
	if seen[key] {
		return fmt.Errorf("repeated series")
	}
	seen[key] = true
	if f := families[name]; f != nil && f.typ != "" && f.typ != "histogram" {
		f.metrics = append(f.metrics, &tmetric{labels: labels, value: value})
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if f := families[base]; ok && f != nil && f.typ == "histogram" {
			return addHistogramSample(f, suffix, labels, value)
		}
	}
	return fmt.Errorf("sample of no declared family")
}

func addHistogramSample(f *tfamily, suffix string, labels map[string]string, value float64) error {
	le, hasLE := labels["le"]
	if suffix == "_bucket" != hasLE {
		return fmt.Errorf("le label on %s", suffix)
	}
	delete(labels, "le")
	var m *tmetric
	// A series' samples come together: look at the last series first (a
	// scan of every series per line made a 2,000-tool scrape quadratic:
	// 16 s of TestToolNameCap under -race).
	if n := len(f.metrics); n > 0 && maps.Equal(f.metrics[n-1].labels, labels) {
		m = f.metrics[n-1]
	}
	for _, c := range f.metrics {
		if m != nil {
			break
		}
		if maps.Equal(c.labels, labels) {
			m = c
		}
	}
	if m == nil {
		m = &tmetric{labels: labels, hist: &thist{}}
		f.metrics = append(f.metrics, m)
	}
	h := m.hist
	switch suffix {
	case "_sum":
		h.sum = value
	case "_count":
		h.count = value
	case "_bucket":
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return fmt.Errorf("le %q: %w", le, err)
		}
		if n := len(h.buckets); h.seenInf || n > 0 && (bound <= h.buckets[n-1].le || value < h.buckets[n-1].cum) {
			return fmt.Errorf("bucket le=%s out of order or not cumulative", le)
		}
		if math.IsInf(bound, 1) {
			h.inf, h.seenInf = value, true
		} else {
			h.buckets = append(h.buckets, tbucket{le: bound, cum: value})
		}
	}
	return nil
}

// splitSample parses `name{a="x",b="y"} value`.
func splitSample(line string) (name string, labels map[string]string, value float64, err error) {
	labels = map[string]string{}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", nil, 0, fmt.Errorf("no name")
	}
	name, rest := line[:i], line[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			var k, v string
			k, rest, _ = strings.Cut(rest, `="`)
			if k == "" || strings.ContainsAny(k, ` ,{}"`) {
				return "", nil, 0, fmt.Errorf("bad label name %q", k)
			}
			if v, rest, err = unescapeValue(rest); err != nil {
				return "", nil, 0, err
			}
			if _, dup := labels[k]; dup {
				return "", nil, 0, fmt.Errorf("label %s repeated", k)
			}
			labels[k] = v
			rest = strings.TrimPrefix(rest, ",")
		}
		rest = rest[1:]
	}
	vs, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return "", nil, 0, fmt.Errorf("no space before the value")
	}
	value, err = strconv.ParseFloat(vs, 64)
	return name, labels, value, err
}

// unescapeValue reads an escaped label value up to its closing quote.
func unescapeValue(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\n':
			return "", "", fmt.Errorf("raw newline in a label value")
		case '\\':
			i++
			if i == len(s) {
				return "", "", fmt.Errorf("dangling backslash")
			}
			switch s[i] {
			case '\\', '"':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", fmt.Errorf("bad escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated label value")
}
