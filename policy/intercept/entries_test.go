package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestListScope: on a list's response phase with EntryServers, a scoped
// member sees only the entries of its scope (its context naming their
// servers), its mutation replaces only them, its refusal or fail-closed
// failure withholds only them; the other entries pass untouched in their
// order; the request phase of a list skips scoped members.
func TestListScope(t *testing.T) {
	const page = `{"tools":[{"name":"gh_a"},{"name":"fs_a"},{"name":"gh_b"},{"name":"local"}],"nextCursor":"c"}`
	servers := []string{"github", "files", "github", ""}
	var seen []string
	var seenCtx *Context
	upper := &Func{Desc: Descriptor{Name: "upper", Type: Mutation, Hooks: []Hook{{Events: []string{"tools/list"}, Phase: Response}}},
		Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
			seen, seenCtx = append(seen, string(inv.Payload)), inv.Context
			return Replace(json.RawMessage(strings.ReplaceAll(string(inv.Payload), `"gh_`, `"GH_`))), nil
		}}
	// dropOne takes the first entry out and adds one.
	reshape := &Func{Desc: Descriptor{Name: "reshape", Type: Mutation, Hooks: []Hook{{Events: []string{"tools/list"}, Phase: Response}}},
		Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
			return Replace(json.RawMessage(`{"tools":[{"name":"gh_b"},{"name":"gh_new"}]}`)), nil
		}}
	deny := &Func{Desc: Descriptor{Name: "deny", Type: Validation, Hooks: []Hook{{Events: []string{"tools/list"}, Phase: Response}}},
		Fn: func(context.Context, *Invocation) (*Result, error) { return Deny("not these"), nil }}
	broken := &Func{Desc: Descriptor{Name: "broken", Type: Validation, Hooks: []Hook{{Events: []string{"tools/list"}, Phase: Request}, {Events: []string{"tools/list"}, Phase: Response}}},
		Fn: func(context.Context, *Invocation) (*Result, error) { return nil, errors.New("down") }}
	tests := []struct {
		name     string
		member   Member
		servers  []string // EntryServers; nil: the gateway does not say
		want     string   // the payload after the chain; "" refused
		withheld int
	}{
		{name: "server-scoped mutator", member: Member{Interceptor: upper, Servers: []string{"github"}}, servers: servers,
			want: `{"tools":[{"name":"GH_a"},{"name":"fs_a"},{"name":"GH_b"},{"name":"local"}],"nextCursor":"c"}`},
		{name: "tool-scoped mutator", member: Member{Interceptor: upper, Tools: []string{"gh_b"}}, servers: servers,
			want: `{"tools":[{"name":"gh_a"},{"name":"fs_a"},{"name":"GH_b"},{"name":"local"}],"nextCursor":"c"}`},
		{name: "unscoped mutator sees all", member: Member{Interceptor: upper}, servers: servers,
			want: `{"tools":[{"name":"GH_a"},{"name":"fs_a"},{"name":"GH_b"},{"name":"local"}],"nextCursor":"c"}`},
		{name: "no entry in scope", member: Member{Interceptor: upper, Servers: []string{"none"}}, servers: servers, want: page},
		{name: "without EntryServers a scoped member sees all", member: Member{Interceptor: upper, Servers: []string{"github"}},
			want: `{"tools":[{"name":"GH_a"},{"name":"fs_a"},{"name":"GH_b"},{"name":"local"}],"nextCursor":"c"}`},
		{name: "fewer and extra entries take the places", member: Member{Interceptor: reshape, Servers: []string{"github"}}, servers: servers,
			want: `{"tools":[{"name":"gh_b"},{"name":"fs_a"},{"name":"gh_new"},{"name":"local"}],"nextCursor":"c"}`},
		{name: "scoped validator withholds its entries", member: Member{Interceptor: deny, Servers: []string{"github"}}, servers: servers,
			want: `{"tools":[{"name":"fs_a"},{"name":"local"}],"nextCursor":"c"}`, withheld: 1},
		{name: "scoped fail-closed failure withholds its entries", member: Member{Interceptor: broken, Servers: []string{"files"}}, servers: servers,
			want: `{"tools":[{"name":"gh_a"},{"name":"gh_b"},{"name":"local"}],"nextCursor":"c"}`, withheld: 1},
		{name: "unscoped validator refuses the page", member: Member{Interceptor: deny}, servers: servers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, seenCtx = nil, nil
			c, err := NewChain(Options{}, tt.member)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Run(context.Background(), Event{Event: "tools/list", Phase: Request, Payload: json.RawMessage(`{}`)}); err != nil && tt.member.Servers != nil {
				t.Fatalf("request phase: %v, want scoped members skipped", err)
			}
			out, err := c.Run(context.Background(), Event{Event: "tools/list", Phase: Response, Payload: json.RawMessage(page),
				Context: &Context{SessionID: "s1"}, EntryServers: tt.servers})
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %s, want a refusal", out.Payload)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Payload) != tt.want {
				t.Fatalf("payload\n %s\nwant\n %s", out.Payload, tt.want)
			}
			if len(out.Withheld) != tt.withheld {
				t.Fatalf("withheld %v, want %d", out.Withheld, tt.withheld)
			}
		})
	}
	t.Run("view and context", func(t *testing.T) {
		seen, seenCtx = nil, nil
		c, _ := NewChain(Options{}, Member{Interceptor: upper, Servers: []string{"git*"}})
		if _, err := c.Run(context.Background(), Event{Event: "tools/list", Phase: Response, Payload: json.RawMessage(page),
			Context: &Context{SessionID: "s1"}, EntryServers: servers}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 1 || seen[0] != `{"tools":[{"name":"gh_a"},{"name":"gh_b"}],"nextCursor":"c"}` {
			t.Fatalf("the mutator saw %q", seen)
		}
		if seenCtx == nil || seenCtx.SessionID != "s1" || seenCtx.Server != "github" || !slices.Equal(seenCtx.Servers, []string{"github"}) {
			t.Fatalf("context %+v", seenCtx)
		}
	})
	t.Run("an unscoped mutator then a scoped one", func(t *testing.T) {
		drop := &Func{Desc: Descriptor{Name: "a-drop", Type: Mutation, Hooks: []Hook{{Events: []string{"tools/list"}, Phase: Response}}},
			Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
				return Replace(json.RawMessage(strings.Replace(string(inv.Payload), `{"name":"gh_a"},`, "", 1))), nil
			}}
		c, _ := NewChain(Options{}, Member{Interceptor: drop}, Member{Interceptor: upper, Servers: []string{"files"}})
		out, err := c.Run(context.Background(), Event{Event: "tools/list", Phase: Response, Payload: json.RawMessage(`{"tools":[{"name":"gh_a"},{"name":"fs_a"},{"name":"gh_x"}]}`),
			EntryServers: []string{"github", "files", "github"}})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"tools":[{"name":"fs_a"},{"name":"gh_x"}]}`; string(out.Payload) != want {
			t.Fatalf("payload %s, want %s (the files mutator saw only fs_a)", out.Payload, want)
		}
	})
}

// TestListScopeKinds: the other lists' entries are matched by their URI
// (resources/list) or URI template (resources/templates/list) and name
// (prompts/list).
func TestListScopeKinds(t *testing.T) {
	deny := &Func{Desc: Descriptor{Name: "deny", Type: Validation, Hooks: []Hook{{Events: []string{"*"}, Phase: Response}}},
		Fn: func(context.Context, *Invocation) (*Result, error) { return Deny("no"), nil }}
	for _, tc := range []struct{ event, page, tools, want string }{
		{"resources/list", `{"resources":[{"uri":"mem://a"},{"uri":"file:///b"}]}`, "mem://*", `{"resources":[{"uri":"file:///b"}]}`},
		{"resources/templates/list", `{"resourceTemplates":[{"uriTemplate":"mem://t/{id}"},{"uriTemplate":"x://{y}"}]}`, "x://*", `{"resourceTemplates":[{"uriTemplate":"mem://t/{id}"}]}`},
		{"prompts/list", `{"prompts":[{"name":"p_one"},{"name":"q_two"}]}`, "q_*", `{"prompts":[{"name":"p_one"}]}`},
	} {
		t.Run(tc.event, func(t *testing.T) {
			c, err := NewChain(Options{}, Member{Interceptor: deny, Tools: []string{tc.tools}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Run(context.Background(), Event{Event: tc.event, Phase: Response, Payload: json.RawMessage(tc.page), EntryServers: []string{"s1", "s2"}})
			if err != nil || string(out.Payload) != tc.want {
				t.Fatalf("%s, %v; want %s", out.Payload, err, tc.want)
			}
		})
	}
}
