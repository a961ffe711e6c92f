package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docPages are the pages whose relative links and anchors
// TestDocLinks checks: the README, every page of docs/ and the other
// pages they send readers to.
func docPages(t *testing.T, root string) []string {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/ (%v)", err)
	}
	for _, p := range []string{"README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "examples/README.md", "deploy/README.md"} {
		pages = append(pages, filepath.Join(root, p))
	}
	return pages
}

var (
	mdFence    = regexp.MustCompile("^\\s*```")
	mdCode     = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdAnchor   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLinkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	urlScheme  = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// mdLines returns the lines of a Markdown page outside fenced code blocks,
// by number.
func mdLines(doc []byte) map[int]string {
	lines := map[int]string{}
	fence := false
	for i, line := range strings.Split(string(doc), "\n") {
		if mdFence.MatchString(line) {
			fence = !fence
			continue
		}
		if !fence {
			lines[i+1] = line
		}
	}
	return lines
}

// anchors returns the anchors of a Markdown page as GitHub makes them:
// each heading lower-cased, with what is not a letter, digit, space, '-'
// or '_' dropped and spaces turned into '-'; a repeated one gets "-1",
// "-2", …; and every <a id> or <a name>.
func anchors(doc []byte) map[string]bool {
	got := map[string]bool{}
	seen := map[string]int{}
	for _, line := range mdLines(doc) {
		for _, m := range mdAnchor.FindAllStringSubmatch(line, -1) {
			got[m[1]] = true
		}
	}
	// Headings in page order, for the numbering of repeats.
	lines := mdLines(doc)
	for i := 1; i <= len(strings.Split(string(doc), "\n")); i++ {
		line, ok := lines[i]
		if !ok {
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			got[slug+"-"+strconv.Itoa(n)] = true
		} else {
			got[slug] = true
		}
		seen[slug]++
	}
	return got
}

func slugify(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocLinks checks every relative link of the README and of the docs
// pages: the file or folder it names exists, and an #anchor names a
// heading (or an <a id>) of the page it points into. Links to other sites
// are not followed.
func TestDocLinks(t *testing.T) {
	root := RepoRoot(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(doc)
		return cache[path], nil
	}
	checked := 0
	for _, page := range docPages(t, root) {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		lines := mdLines(doc)
		for n := 1; n <= len(strings.Split(string(doc), "\n")); n++ {
			line, ok := lines[n]
			if !ok {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(mdCode.ReplaceAllString(line, "``"), -1) {
				target := m[1]
				if urlScheme.MatchString(target) {
					continue // another site, mailto:, …
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: no %s", rel, n, target, file)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", rel, n, target)
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, n, target, err)
					continue
				}
				if !a[anchor] {
					t.Errorf("%s:%d: link %q: no heading or <a id> makes #%s there", rel, n, target, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: is the link pattern still right?", checked)
	}
}

// TestREADMEFitsOnAScreen holds the README to what a newcomer needs: at
// most 300 lines, its first two commands the gateway with no config (the
// built-in demo) and the tests, its config the five lines of
// examples/minimal.json (which TestExamples starts), and a link to every
// page of docs/.
func TestREADMEFitsOnAScreen(t *testing.T) {
	root := RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines, want at most 300: move the reference into docs/", n)
	}
	blocks := regexp.MustCompile("(?s)```(sh|json)\n(.*?)```").FindAllSubmatch(readme, -1)
	var sh []string
	var config string
	for _, b := range blocks {
		if string(b[1]) == "sh" {
			sh = append(sh, string(b[2]))
		} else if config == "" {
			config = string(b[2])
		}
	}
	if len(sh) < 2 || sh[0] != "go run ./cmd/edge-mcp\n" || !strings.HasPrefix(sh[1], "go tool task test ") {
		t.Errorf("README.md's first two commands are %q, want the built-in demo (go run ./cmd/edge-mcp) and the tests (go tool task test)", sh[:min(len(sh), 2)])
	}
	minimal, err := os.ReadFile(filepath.Join(root, "examples", "minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	if config != string(minimal) || bytes.Count(minimal, []byte("\n")) > 5 {
		t.Errorf("README.md's first config is\n%s\nwant examples/minimal.json, five lines:\n%s", config, minimal)
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range pages {
		link := "](docs/" + filepath.Base(p) + ")"
		if !bytes.Contains(readme, []byte(link)) {
			t.Errorf("README.md does not link docs/%s", filepath.Base(p))
		}
	}
}

// TestLimitsTableTests checks what docs/limits.md says of its last
// column: every test it names exists, and `go tool task hostile` runs it
// (a -run pattern of the task's go test commands matches the name, over a
// package list that holds the test's package).
func TestLimitsTableTests(t *testing.T) {
	root := RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "limits.md"))
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	testName := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 5 {
			continue
		}
		for _, m := range testName.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			named = append(named, m[1])
		}
	}
	if len(named) < 30 {
		t.Fatalf("only %d tests named in docs/limits.md's table", len(named))
	}
	where := testFuncs(t, root)
	runs := hostileRuns(t, root)
	for _, name := range named {
		dirs := where[name]
		if len(dirs) == 0 {
			t.Errorf("docs/limits.md names %s, which no _test.go file defines", name)
			continue
		}
		if !slices.ContainsFunc(runs, func(r hostileRun) bool { return r.covers(name, dirs) }) {
			t.Errorf("docs/limits.md names %s (%s), which go tool task hostile does not run", name, strings.Join(dirs, ", "))
		}
	}
}

// testFuncs maps each top-level test function of the module to the
// folders (relative to root, slash-separated) that define it.
func testFuncs(t *testing.T, root string) map[string][]string {
	funcs := map[string][]string{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range decl.FindAllSubmatch(src, -1) {
			funcs[string(m[1])] = append(funcs[string(m[1])], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// hostileRun is one go test command of the hostile task.
type hostileRun struct {
	run  *regexp.Regexp
	pkgs []string // ./p or ./p/...
}

func (r hostileRun) covers(name string, dirs []string) bool {
	if !r.run.MatchString(name) {
		return false
	}
	for _, d := range dirs {
		for _, p := range r.pkgs {
			p = strings.TrimPrefix(p, "./")
			if base, ok := strings.CutSuffix(p, "/..."); ok && (d == base || strings.HasPrefix(d, base+"/")) || d == p {
				return true
			}
		}
	}
	return false
}

// hostileRuns reads the go test commands of Taskfile.yml's hostile task.
func hostileRuns(t *testing.T, root string) []hostileRun {
	data, err := os.ReadFile(filepath.Join(root, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	task := regexp.MustCompile(`(?ms)^  hostile:\n(.*?)(?:^  \S|\z)`).FindSubmatch(data)
	if task == nil {
		t.Fatal("Taskfile.yml has no hostile task")
	}
	body := strings.ReplaceAll(string(task[1]), "\\\n", " ")
	cmd := regexp.MustCompile(`go test [^\n]*-run '([^']+)'((?:\s+\./\S+)+)`)
	var runs []hostileRun
	for _, m := range cmd.FindAllStringSubmatch(body, -1) {
		re, err := regexp.Compile(m[1])
		if err != nil {
			t.Fatalf("hostile task: -run %q: %v", m[1], err)
		}
		runs = append(runs, hostileRun{run: re, pkgs: strings.Fields(m[2])})
	}
	if len(runs) == 0 {
		t.Fatal("no go test command with -run in the hostile task")
	}
	return runs
}
