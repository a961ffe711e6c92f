// Package natstest starts real NATS servers in-process for tests: one
// JetStream server, or a JetStream cluster whose members a test can kill.
package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Server is one in-process NATS server and the options it was started
// with, so that a test can start it again after Shutdown.
type Server struct {
	*server.Server
	opts *server.Options
}

// Start runs one JetStream-enabled NATS server on 127.0.0.1 with its store
// in a temporary folder, and shuts it down when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: freePort(t), JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	srv := &Server{Server: run(t, opts), opts: opts}
	t.Cleanup(func() { srv.Server.Shutdown() }) // the server Restart started, if it did
	return srv
}

// Restart starts the server again on the same port and store after
// Shutdown: NATS coming back. Start's cleanup shuts it down when the test
// ends, after what the test started after Start (cleanups run last in,
// first out): replicas leave a NATS that is still there, instead of each
// waiting out its leave and drain timeouts against a server a later
// cleanup had already shut down.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Server = run(t, s.opts.Clone())
}

// Cluster is n JetStream servers routed to each other.
type Cluster struct {
	Servers []*server.Server
}

// URL lists every member's client URL, comma-separated (the form of
// cluster.nats_url).
func (c *Cluster) URL() string {
	urls := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		urls = append(urls, s.ClientURL())
	}
	return strings.Join(urls, ",")
}

// StartCluster runs an n-member JetStream cluster on 127.0.0.1 and waits
// until JetStream has a meta leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	c := &Cluster{}
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1, JetStream: true,
			StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "edge-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		c.Servers = append(c.Servers, s)
		t.Cleanup(s.Shutdown)
	}
	for _, s := range c.Servers {
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("NATS server %s not ready", s.Name())
		}
	}
	c.waitJetStream(t)
	return c
}

// waitJetStream waits until every live member sees a JetStream meta leader.
func (c *Cluster) waitJetStream(t testing.TB) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ready := true
		for _, s := range c.Servers {
			if s.Running() && !s.JetStreamIsCurrent() {
				ready = false
			}
		}
		if ready {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("JetStream cluster has no meta leader after 20s")
}

func run(t testing.TB, opts *server.Options) *server.Server {
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	return s
}

// Auth is a server that lets in only the users of its nkeys, each with
// the permissions of a fleet's replica (FleetPermissions).
type Auth struct {
	*Server
	// SeedFile holds the nkey seed of the fleet's user (cluster.nats_nkey).
	SeedFile string
}

// StartAuth runs one JetStream server, as Start, that refuses clients
// without credentials: its one user is an nkey, written to SeedFile,
// allowed what a replica of the fleet called prefix needs.
func StartAuth(t testing.TB, prefix string) *Auth {
	t.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	file := filepath.Join(t.TempDir(), "fleet.nk")
	if err := os.WriteFile(file, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := &server.Options{Host: "127.0.0.1", Port: freePort(t), JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Nkeys: []*server.NkeyUser{{Nkey: pub, Permissions: FleetPermissions(prefix)}}}
	srv := &Server{Server: run(t, opts), opts: opts}
	t.Cleanup(func() { srv.Server.Shutdown() }) // the server Restart started, if it did
	return &Auth{Server: srv, SeedFile: file}
}

// FleetPermissions are a replica's: the fleet's subjects and buckets, the
// JetStream API, replies. deploy/fleet/fleet.sh and docs/fleet.md grant the
// same.
func FleetPermissions(prefix string) *server.Permissions {
	allow := []string{prefix + ".>", "_INBOX.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$O." + prefix + "_modules.>"}
	for _, b := range []string{"control", "sessions", "members", "rates", "oauth", "icstate"} {
		allow = append(allow, "$KV."+prefix+"_"+b+".>")
	}
	return &server.Permissions{Publish: &server.SubjectPermission{Allow: allow}, Subscribe: &server.SubjectPermission{Allow: allow}}
}
