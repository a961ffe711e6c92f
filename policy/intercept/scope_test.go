package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMemberScope(t *testing.T) {
	tests := []struct {
		name           string
		servers, tools []string
		ctx            *Context
		refused        bool
	}{
		{name: "no scope", ctx: &Context{Server: "github", Subject: "search"}, refused: true},
		{name: "server in scope", servers: []string{"git*"}, ctx: &Context{Server: "github"}, refused: true},
		{name: "server out of scope", servers: []string{"git*"}, ctx: &Context{Server: "files"}},
		{name: "tool out of scope", tools: []string{"delete_*"}, ctx: &Context{Server: "files", Subject: "read"}},
		{name: "tool in scope", tools: []string{"delete_*"}, ctx: &Context{Server: "files", Subject: "delete_all"}, refused: true},
		{name: "unknown server is in scope", servers: []string{"github"}, ctx: &Context{Subject: "x"}, refused: true},
		{name: "no context is in scope", servers: []string{"github"}, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewChain(Options{}, Member{Interceptor: validator("v", "", "*"), Servers: tt.servers, Tools: tt.tools},
				Member{Interceptor: &Func{Desc: desc("deny", Validation, "*"), Fn: func(context.Context, *Invocation) (*Result, error) { return Deny("no"), nil }}, Servers: tt.servers, Tools: tt.tools})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Run(context.Background(), Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(`{}`), Context: tt.ctx})
			if (err != nil) != tt.refused {
				t.Fatalf("err = %v, want refused %v", err, tt.refused)
			}
		})
	}
	if _, err := NewChain(Options{}, Member{Interceptor: validator("v", "", "*"), Tools: []string{""}}); err == nil || !strings.Contains(err.Error(), "scope glob") {
		t.Fatalf("empty glob: %v", err)
	}
}

func TestSelectAndUnavailable(t *testing.T) {
	ics := []Interceptor{validator("pii/a", "", "*"), validator("pii/b", "", "*"), validator("other", "", "*")}
	var names []string
	for _, ic := range Select(ics, []string{"pii/*"}) {
		names = append(names, ic.Describe().Name)
	}
	if strings.Join(names, ",") != "pii/a,pii/b" {
		t.Fatalf("selected %v", names)
	}
	down := Unavailable("pii", errors.New(`interceptor server "pii" never reached`))
	for _, open := range []bool{false, true} {
		c, err := NewChain(Options{}, Member{Interceptor: down, FailOpen: &open})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Run(context.Background(), Event{Event: "resources/read", Phase: Response, Payload: json.RawMessage(`{}`)})
		if open != (err == nil) || !open && !strings.Contains(err.Error(), `interceptor server "pii" never reached`) {
			t.Fatalf("failOpen %v: err = %v", open, err)
		}
	}
}
