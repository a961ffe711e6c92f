package natstest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// TestFleetPermissionsDocumented checks that what docs/fleet.md ("Who may
// reach the fleet's NATS") and deploy/fleet/fleet.sh grant a replica's
// NATS user is FleetPermissions, the permissions the fleet tests run
// replicas under.
func TestFleetPermissionsDocumented(t *testing.T) {
	perms := FleetPermissions("edge")
	quoted := regexp.MustCompile(`"([^"]+)"`)
	subjects := func(s string) []string {
		var out []string
		for _, m := range quoted.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "fleet.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)publish:\\s*\\{ allow: (\\[.*?\\])\\s*\\}\\s*subscribe:\\s*\\{ allow: (\\[.*?\\])").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/fleet.md has no authorization block with publish and subscribe allow lists")
	}
	script, err := os.ReadFile(filepath.Join(root, "deploy", "fleet", "fleet.sh"))
	if err != nil {
		t.Fatal(err)
	}
	allow := regexp.MustCompile(`(?s)\nallow='(\[.*?\])'`).FindSubmatch(script)
	if allow == nil {
		t.Fatal("deploy/fleet/fleet.sh sets no allow list")
	}
	for _, c := range []struct {
		where string
		got   []string
		want  []string
	}{
		{"docs/fleet.md publish", subjects(string(block[1])), perms.Publish.Allow},
		{"docs/fleet.md subscribe", subjects(string(block[2])), perms.Subscribe.Allow},
		{"deploy/fleet/fleet.sh", subjects(string(allow[1])), perms.Publish.Allow},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s allows\n%q\nFleetPermissions(\"edge\"):\n%q", c.where, c.got, c.want)
		}
	}
}
