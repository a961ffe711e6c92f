package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCLIDoc checks docs/cli.md's synopsis against the command tree: every
// command and subcommand has a line there ("edge-mcp GROUP SUB … | SUB …"),
// no line names a command that does not exist, and every flag a command
// defines is written (--name) somewhere on the page.
func TestCLIDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```\n(edge-mcp .*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/cli.md has no synopsis block starting with edge-mcp")
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(block[1]), "\n") {
		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "edge-mcp" || strings.HasPrefix(line, "edge-mcp  ") {
			continue // a continuation of flags, the demo line (edge-mcp, then what it does)
		}
		group := words[1]
		segments := strings.Split(strings.Join(words[1:], " "), " | ")
		first := strings.Fields(segments[0])
		if len(first) > 1 && regexp.MustCompile(`^[a-z]+$`).MatchString(first[1]) {
			documented[group+" "+first[1]] = true
		} else {
			documented[group] = true
		}
		for _, s := range segments[1:] {
			documented[group+" "+strings.Fields(s)[0]] = true
		}
	}
	exists := map[string]bool{"help": true}
	var walk func([]*command)
	walk = func(cmds []*command) {
		for _, c := range cmds {
			exists[c.name] = true
			if c.subs != nil {
				walk(c.subs)
				continue
			}
			if !documented[c.name] {
				t.Errorf("docs/cli.md has no synopsis line for edge-mcp %s", c.name)
			}
			if c.define == nil {
				continue
			}
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.define(fs)
			fs.VisitAll(func(f *flag.Flag) {
				if !regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `\b`).Match(doc) {
					t.Errorf("docs/cli.md does not mention --%s of edge-mcp %s", f.Name, c.name)
				}
			})
		}
	}
	walk(commands())
	for name := range documented {
		if !exists[name] {
			t.Errorf("docs/cli.md documents edge-mcp %s, which is no command", name)
		}
	}
}
