package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// This file is edge-mcp pins ls|approve|reject: tool definitions an
// upstream changed after they were pinned, and the operator's decision.

func pinsCommands() []*command {
	return []*command{
		{name: "pins ls", define: pinsListFlags,
			summary: "list tool definitions changed since pinned, awaiting a decision, with a diff summary",
			example: "edge-mcp pins ls --diff"},
		{name: "pins approve", args: "SERVER TOOL", nargs: 2, define: adminOnly(pinDecision("approve")),
			summary: "accept the changed definition as the new pin; the tool returns to clients",
			example: "edge-mcp pins approve github create_issue"},
		{name: "pins reject", args: "SERVER TOOL", nargs: 2, define: adminOnly(pinDecision("reject")),
			summary: "refuse the changed definition: the old pin stays, the tool stays withheld until the server changes it again",
			example: "edge-mcp pins reject github create_issue"},
	}
}

// pendingList is the answer of GET /admin/tools/pending.
type pendingList struct {
	Pending []admin.PendingToolChange `json:"pending"`
}

func pinsListFlags(fs *flag.FlagSet) runFunc {
	client := adminFlags(fs)
	full := fs.Bool("diff", false, "print each change's full diff after the table")
	return func(ctx context.Context, _ []string, s streams) error {
		return pinsList(ctx, client(), *full, s.stdout)
	}
}

func pinsList(ctx context.Context, c *adminClient, full bool, stdout io.Writer) error {
	var l pendingList
	if err := c.call(ctx, http.MethodGet, "/admin/tools/pending", nil, &l); err != nil {
		return fmt.Errorf("listing pending tool changes: %w", err)
	}
	if len(l.Pending) == 0 {
		fmt.Fprintln(stdout, "no tool changes awaiting a decision")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOL\tCHANGED\tSTATE\tDIFF")
	for _, p := range l.Pending {
		state := "flagged"
		if p.Withheld {
			state = "withheld"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Server, p.Tool, p.ChangedAt.Local().Format(time.DateTime), state, diffSummary(p.Diff))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range l.Pending {
		if full {
			fmt.Fprintf(stdout, "\n%s\n", strings.TrimRight(p.Diff, "\n"))
		}
	}
	fmt.Fprintln(stdout, "\napprove with: edge-mcp pins approve SERVER TOOL   reject with: edge-mcp pins reject SERVER TOOL")
	return nil
}

// diffSummary counts the changed lines of a diff ("- " removed, "+ "
// added) and names the first changed line.
func diffSummary(diff string) string {
	var added, removed int
	first := ""
	for _, line := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "+ "):
			added++
		case strings.HasPrefix(line, "- "):
			removed++
		default:
			continue
		}
		if first == "" {
			first = strings.TrimSpace(line)
		}
	}
	if len(first) > 60 {
		first = first[:57] + "..."
	}
	return fmt.Sprintf("+%d -%d  %s", added, removed, first)
}

// pinDecision runs pins approve or pins reject.
func pinDecision(verb string) func(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	return func(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
		path := "/admin/tools/" + url.PathEscape(args[0]) + "/" + url.PathEscape(args[1]) + "/" + verb
		if err := c.call(ctx, http.MethodPost, path, nil, nil); err != nil {
			return fmt.Errorf("%s %s/%s: %w", verb, args[0], args[1], err)
		}
		if verb == "approve" {
			fmt.Fprintf(stdout, "approved %s/%s: the new definition is pinned and the tool is offered again\n", args[0], args[1])
		} else {
			fmt.Fprintf(stdout, "rejected %s/%s: the old pin stays and the tool stays withheld\n", args[0], args[1])
		}
		return nil
	}
}
