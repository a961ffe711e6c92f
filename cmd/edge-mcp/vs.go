package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// This file is edge-mcp vs ls|show: the virtual servers of a running
// gateway and what each serves now.

func vsCommands() []*command {
	return []*command{
		{name: "vs ls", define: adminOnly(vsList),
			summary: "list the virtual servers: path, title, how many tools, prompts and resources each serves now",
			example: "edge-mcp vs ls"},
		{name: "vs show", args: "NAME", nargs: 1, define: adminOnly(vsShow),
			summary: "show what one virtual server serves: each tool with the catalogue's tool and server it is, overridden or not",
			example: "edge-mcp vs show triage"},
	}
}

func vsList(ctx context.Context, c *adminClient, _ []string, stdout io.Writer) error {
	var l struct {
		VirtualServers []admin.VirtualServer `json:"virtual_servers"`
	}
	if err := c.call(ctx, http.MethodGet, "/admin/virtual-servers", nil, &l); err != nil {
		return fmt.Errorf("listing virtual servers: %w", err)
	}
	if len(l.VirtualServers) == 0 {
		fmt.Fprintln(stdout, "no virtual servers (virtual_servers in the config)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPATH\tTITLE\tTOOLS\tPROMPTS\tRESOURCES\tALLOW")
	for _, vs := range l.VirtualServers {
		allow := strings.Join(vs.Allow, ",")
		if allow == "" {
			allow = "everyone"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", vs.Name, vs.Path, vs.Title, len(vs.Tools), len(vs.Prompts), len(vs.Resources), allow)
	}
	return tw.Flush()
}

func vsShow(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	var vs admin.VirtualServer
	if err := c.call(ctx, http.MethodGet, "/admin/virtual-servers/"+url.PathEscape(args[0]), nil, &vs); err != nil {
		return fmt.Errorf("virtual server %s: %w", args[0], err)
	}
	fmt.Fprintf(stdout, "%s at %s", vs.Name, vs.Path)
	if vs.Title != "" {
		fmt.Fprintf(stdout, " (%s)", vs.Title)
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tIS\tSERVER\tOVERRIDDEN")
	for _, t := range vs.Tools {
		over := ""
		if t.Overridden {
			over = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Tool, t.Server, over)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "prompts: %s\nresources: %s\n", orNone(vs.Prompts), orNone(vs.Resources))
	return nil
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
