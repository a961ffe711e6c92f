package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is edge-mcp policy attach|detach|ls|promote|reorder|rollback against a
// running gateway's admin API (policy test is in policytest.go).

func policyCommands() []*command {
	return []*command{
		{name: "policy ls", define: adminOnly(policyLs),
			summary: "list the attached policies in chain order: source, mode, module digest, health, calls",
			example: "edge-mcp policy ls"},
		{name: "policy attach", args: "NAME", nargs: 1, define: policyAttachFlags,
			summary: "attach an uploaded module as policy NAME (run-time attachment, kept across restarts)",
			example: "edge-mcp policy attach redact --module redact --tools 'gh_*' --config '{\"replacement\":\"[REDACTED]\"}' --shadow"},
		{name: "policy detach", args: "NAME", nargs: 1, define: adminOnly(policyDetach),
			summary: "remove a run-time policy",
			example: "edge-mcp policy detach redact"},
		{name: "policy promote", args: "NAME", nargs: 1, define: adminOnly(policyPromote),
			summary: "make a shadow policy enforce its decisions",
			example: "edge-mcp policy promote redact"},
		{name: "policy rollback", args: "NAME", nargs: 1, define: adminOnly(policyRollback),
			summary: "run the previous version of the uploaded module that policy NAME attaches",
			example: "edge-mcp policy rollback redact"},
		{name: "policy reorder", args: "NAME...", nargs: -1, define: adminOnly(policyReorder),
			summary: "set the order of the run-time policies (name each exactly once)",
			example: "edge-mcp policy reorder router redact"},
		{name: "policy test", args: "MODULE.wasm", nargs: 1, define: policyTestFlags,
			summary: "run one hook of a module on a recorded input and print the decision, or run its test vectors (no gateway needed)",
			example: "edge-mcp policy test redact.wasm --hook tool_call --input case.json\n  edge-mcp policy test redact.wasm --vectors vectors.json"},
	}
}

// policyList is the answer of the policy endpoints.
type policyList struct {
	Generation uint64             `json:"generation"`
	Policies   []admin.PolicyInfo `json:"policies"`
}

func (l *policyList) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tNAME\tMODULE\tSOURCE\tMODE\tDIGEST\tHEALTHY\tCALLS\tFAILURES\tSHADOW DIFFS")
	for i, p := range l.Policies {
		mode := p.Mode
		if mode == "" {
			mode = policy.ModeEnforce
		}
		diffs := "-"
		if mode == policy.ModeShadow {
			diffs = fmt.Sprintf("%d/%d", p.ShadowDiffs, p.ShadowRuns)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%v\t%d\t%d\t%s\n", i, p.Name, p.Module, p.Source, mode, shortDigest(p.Digest),
			p.Healthy, p.Calls, p.Failures, diffs)
	}
	fmt.Fprintf(tw, "generation %d, %d policies\n", l.Generation, len(l.Policies))
	return tw.Flush()
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func policyLs(ctx context.Context, c *adminClient, _ []string, stdout io.Writer) error {
	var l policyList
	if err := c.call(ctx, http.MethodGet, "/admin/policies", nil, &l); err != nil {
		return fmt.Errorf("listing policies: %w", err)
	}
	return l.print(stdout)
}

type attachOptions struct {
	module, tools, servers, config, onError string
	shadow                                  bool
	position, timeoutMS, memoryMB           int
}

func policyAttachFlags(fs *flag.FlagSet) runFunc {
	client := adminFlags(fs)
	var o attachOptions
	fs.StringVar(&o.module, "module", "", "the uploaded module to run (default: NAME)")
	fs.StringVar(&o.tools, "tools", "", "comma-separated globs of the tools it applies to (default: all)")
	fs.StringVar(&o.servers, "servers", "", "comma-separated globs of the servers it applies to (default: all)")
	fs.StringVar(&o.config, "config", "", "the module's config: a JSON object, or @FILE")
	fs.StringVar(&o.onError, "on-error", "", "what a failing module means for the call: deny (default) or allow")
	fs.BoolVar(&o.shadow, "shadow", false, "shadow mode: run on live traffic and log its decisions, apply none (see policy promote)")
	fs.IntVar(&o.position, "position", -1, "insert at this index among the run-time policies (default: last)")
	fs.IntVar(&o.timeoutMS, "timeout-ms", 0, "deadline of one hook call in milliseconds (default: the gateway's)")
	fs.IntVar(&o.memoryMB, "memory-mb", 0, "memory cap of the module in MiB (default: the gateway's)")
	return func(ctx context.Context, args []string, s streams) error {
		return policyAttach(ctx, client(), args[0], o, s.stdout)
	}
}

// spec builds the attachment the flags describe.
func (o attachOptions) spec(name string) (policy.Spec, error) {
	sp := policy.Spec{Name: name, Module: o.module, Tools: splitList(o.tools), Servers: splitList(o.servers),
		OnError: o.onError, TimeoutMS: o.timeoutMS, MemoryMB: o.memoryMB}
	if sp.Module == "" {
		sp.Module = name
	}
	if o.shadow {
		sp.Mode = policy.ModeShadow
	}
	cfg := o.config
	if file, ok := strings.CutPrefix(cfg, "@"); ok {
		raw, err := os.ReadFile(file)
		if err != nil {
			return sp, fmt.Errorf("--config: %w", err)
		}
		cfg = string(raw)
	}
	if cfg != "" {
		if !json.Valid([]byte(cfg)) {
			return sp, fmt.Errorf("--config is not valid JSON: %.60q", cfg)
		}
		sp.Config = json.RawMessage(cfg)
	}
	return sp, sp.Validate()
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func policyAttach(ctx context.Context, c *adminClient, name string, o attachOptions, stdout io.Writer) error {
	sp, err := o.spec(name)
	if err != nil {
		return err
	}
	body, err := json.Marshal(sp)
	if err != nil {
		return fmt.Errorf("encoding the attachment: %w", err)
	}
	path := "/admin/policies"
	if o.position >= 0 {
		path += "?position=" + strconv.Itoa(o.position)
	}
	var l policyList
	if err := c.call(ctx, http.MethodPost, path, body, &l); err != nil {
		return fmt.Errorf("attaching %s (module %s): %w", name, sp.Module, err)
	}
	fmt.Fprintf(stdout, "attached %s (module %s, %s)\n\n", name, sp.Module, modeName(sp.Mode))
	return l.print(stdout)
}

func modeName(m string) string {
	if m == "" {
		return policy.ModeEnforce
	}
	return m
}

func policyDetach(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	var l policyList
	if err := c.call(ctx, http.MethodDelete, "/admin/policies/"+url.PathEscape(args[0]), nil, &l); err != nil {
		return fmt.Errorf("detaching %s: %w", args[0], err)
	}
	fmt.Fprintf(stdout, "detached %s\n\n", args[0])
	return l.print(stdout)
}

func policyPromote(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	var l policyList
	if err := c.call(ctx, http.MethodPost, "/admin/policies/"+url.PathEscape(args[0])+"/promote", nil, &l); err != nil {
		return fmt.Errorf("promoting %s: %w", args[0], err)
	}
	fmt.Fprintf(stdout, "promoted %s: it now enforces its decisions\n\n", args[0])
	return l.print(stdout)
}

func policyReorder(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	body, _ := json.Marshal(map[string][]string{"order": args})
	var l policyList
	if err := c.call(ctx, http.MethodPut, "/admin/policies/order", body, &l); err != nil {
		return fmt.Errorf("reordering policies: %w", err)
	}
	fmt.Fprintf(stdout, "reordered: %s\n\n", strings.Join(args, ", "))
	return l.print(stdout)
}

// policyRollback rolls back the uploaded module policy NAME attaches (the
// module's previous version becomes active for every policy using it).
func policyRollback(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	var l policyList
	if err := c.call(ctx, http.MethodGet, "/admin/policies", nil, &l); err != nil {
		return fmt.Errorf("listing policies: %w", err)
	}
	i := slices.IndexFunc(l.Policies, func(p admin.PolicyInfo) bool { return p.Name == args[0] })
	if i < 0 {
		return fmt.Errorf("no policy named %q is attached (edge-mcp policy ls lists them)", args[0])
	}
	module := l.Policies[i].Module
	if _, uploaded := config.UploadedModule(module); !uploaded {
		return fmt.Errorf("policy %q runs the module file %s from the config, not an uploaded module: there is no earlier version to roll back to", args[0], module)
	}
	if err := moduleRollback(ctx, c, []string{module}, stdout); err != nil {
		return fmt.Errorf("policy %s: %w", args[0], err)
	}
	return nil
}
