package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// This file is the command tree: every command's synopsis, summary, flags
// and example live in one place (commands), and both running a command
// and its --help are derived from it.

// streams are the standard streams of a command.
type streams struct {
	stdin          io.ReadCloser
	stdout, stderr io.Writer
}

// runFunc runs a command with its positional arguments, its flags parsed.
type runFunc func(ctx context.Context, args []string, s streams) error

// command is one command or group of subcommands.
type command struct {
	name    string // as typed after edge-mcp: "module push"
	args    string // the positional arguments of the synopsis: "FILE.wasm"
	nargs   int    // how many positional arguments; -1: one or more
	summary string // one line
	example string
	// define declares the command's flags on fs and returns what runs the
	// command; nil for a group and for version.
	define func(fs *flag.FlagSet) runFunc
	subs   []*command
}

// usageError is a command line that names no command or misuses one; the
// process exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// commands is the command tree, in the order help lists it.
func commands() []*command {
	return []*command{
		{name: "serve", summary: "serve the servers of a config file (the default command; no --config: the built-in demo)",
			example: "edge-mcp serve --config gw.json --listen 127.0.0.1:8080 --admin 127.0.0.1:9090", define: serveFlags},
		{name: "stdio", summary: "serve one MCP client on stdin/stdout (logs on stderr)",
			example: "edge-mcp stdio --config gw.json", define: stdioFlags},
		{name: "status", summary: "show the upstreams of a running gateway",
			example: "edge-mcp status --url http://127.0.0.1:8080", define: statusFlags},
		{name: "module", summary: "manage the policy modules uploaded to a running gateway",
			example: "edge-mcp module push redact.wasm && edge-mcp policy attach redact", subs: moduleCommands()},
		{name: "policy", summary: "attach, order and promote policies of a running gateway; test a module offline",
			example: "edge-mcp policy ls", subs: policyCommands()},
		{name: "pins", summary: "review tool definitions that changed since they were pinned",
			example: "edge-mcp pins ls", subs: pinsCommands()},
		{name: "vs", summary: "show the virtual servers of a running gateway and what each serves",
			example: "edge-mcp vs show triage", subs: vsCommands()},
		{name: "auth", summary: "authorize the gateway at upstream servers that want OAuth: login, status, logout",
			example: "edge-mcp auth login github --config gw.json", subs: authCommands()},
		{name: "interceptors", summary: "list a config's SEP-2624 interceptors; run a conformance fixture against one (no gateway needed)",
			example: "edge-mcp interceptors ls --config gw.json", subs: interceptorCommands()},
		{name: "version", summary: "print the version", example: "edge-mcp version"},
	}
}

// find returns the command named by the words of path, descending into
// groups as far as the words name subcommands, and the words left over.
func find(path []string) (*command, []string) {
	var c *command
	list := commands()
	for len(path) > 0 {
		next := lookup(list, path[0])
		if next == nil {
			break
		}
		c, list, path = next, next.subs, path[1:]
	}
	return c, path
}

func lookup(list []*command, word string) *command {
	for _, c := range list {
		if c.name[strings.LastIndexByte(c.name, ' ')+1:] == word {
			return c
		}
	}
	return nil
}

// wantsHelp reports whether args ask for help (-h, -help or --help before
// any "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// dispatch runs the command named by name and the leading words of args.
func dispatch(ctx context.Context, name string, args []string, s streams) error {
	c, rest := find(append([]string{name}, args...))
	if c == nil {
		return usagef("unknown command %q; run 'edge-mcp help' for the list", name)
	}
	if c.subs != nil {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return usagef("edge-mcp %s needs a command: %s; run 'edge-mcp help %s'", c.name, subNames(c), c.name)
		}
		return usagef("unknown command \"%s %s\" (want %s); run 'edge-mcp help %s'", c.name, rest[0], subNames(c), c.name)
	}
	fs := flag.NewFlagSet("edge-mcp "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.define(fs)
	pos, err := splitArgs(fs, rest)
	if err != nil {
		return usagef("edge-mcp %s: %v; run 'edge-mcp %s --help'", c.name, err, c.name)
	}
	if (c.nargs >= 0 && len(pos) != c.nargs) || (c.nargs < 0 && len(pos) == 0) {
		return usagef("usage: %s; run 'edge-mcp %s --help'", c.synopsis(), c.name)
	}
	return run(ctx, pos, s)
}

func subNames(c *command) string {
	names := make([]string, len(c.subs))
	for i, sc := range c.subs {
		names[i] = sc.name[len(c.name)+1:]
	}
	return strings.Join(names, ", ")
}

// synopsis is the command's usage line.
func (c *command) synopsis() string {
	s := "edge-mcp " + c.name
	if c.subs != nil {
		return s + " COMMAND [flags]"
	}
	if c.args != "" {
		s += " " + c.args
	}
	if c.define != nil {
		s += " [flags]"
	}
	return s
}

// help writes the help of the command named by path (the overview when
// path names none) to w.
func help(w io.Writer, path []string) error {
	if len(path) == 0 {
		overview(w)
		return nil
	}
	c, rest := find(path)
	if c == nil || (len(rest) > 0 && !strings.HasPrefix(rest[0], "-")) {
		return usagef("no command %q; run 'edge-mcp help' for the list", strings.Join(path, " "))
	}
	c.help(w)
	return nil
}

// help writes the command's summary, synopsis, flags or subcommands, and
// example.
func (c *command) help(w io.Writer) {
	fmt.Fprintf(w, "edge-mcp %s: %s\n\nUsage: %s\n", c.name, c.summary, c.synopsis())
	if c.define != nil {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.define(fs)
		fs.SetOutput(w)
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	if c.subs != nil {
		fmt.Fprintln(w, "\nCommands:")
		list(w, c.subs)
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n", c.example)
	if c.subs != nil {
		fmt.Fprintf(w, "\nRun 'edge-mcp %s COMMAND --help' for a command's flags.\n", c.name)
	}
}

// overview lists every command.
func overview(w io.Writer) {
	fmt.Fprint(w, "edge-mcp: one MCP endpoint in front of many MCP servers.\n\nUsage: edge-mcp [COMMAND] [flags]   (no command: serve)\n\nCommands:\n")
	list(w, commands())
	fmt.Fprint(w, "\nRun 'edge-mcp help COMMAND' or 'edge-mcp COMMAND --help' for its flags and an example.\n")
}

// list writes one line per command, descending into groups.
func list(w io.Writer, cmds []*command) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var walk func([]*command)
	walk = func(cmds []*command) {
		for _, c := range cmds {
			if c.subs != nil {
				walk(c.subs)
				continue
			}
			fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.args, c.summary)
		}
	}
	walk(cmds)
	tw.Flush()
}

// splitArgs separates positional arguments from flags, so flags may come
// after them (edge-mcp module push FILE --name NAME).
func splitArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	return pos, nil
}
