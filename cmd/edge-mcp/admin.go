package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// This file is the admin client, and edge-mcp module push|ls|rm|rollback
// against a running gateway's admin API.

const defaultAdminURL = "http://127.0.0.1:9090"

// adminClient talks to a gateway's admin API.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

func (c *adminClient) do(ctx context.Context, method, path string, body []byte, header http.Header) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return 0, nil, fmt.Errorf("no gateway's admin API answers at %s (%s %s: connection refused): start one (edge-mcp serve), or point at it with --admin URL or EDGE_MCP_ADMIN_URL", c.base, method, path)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w (is the gateway running with its admin API on %s? --admin URL or EDGE_MCP_ADMIN_URL points elsewhere)", method, path, err, c.base)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, raw, err
}

// check turns an admin error answer into an error with its reason.
func check(code int, raw []byte) error {
	if code < 300 {
		return nil
	}
	var e struct{ Error, Reason string }
	if json.Unmarshal(raw, &e) == nil && e.Reason != "" {
		return fmt.Errorf("%s (HTTP %d %s)", e.Reason, code, e.Error)
	}
	return fmt.Errorf("HTTP %d: %s", code, bytes.TrimSpace(raw))
}

// adminFlags adds --admin and --token to fs.
func adminFlags(fs *flag.FlagSet) func() *adminClient {
	base := fs.String("admin", envOr("EDGE_MCP_ADMIN_URL", defaultAdminURL), "admin API base URL (env EDGE_MCP_ADMIN_URL)")
	token := fs.String("token", "", "admin token (default: env EDGE_MCP_ADMIN_TOKEN)")
	return func() *adminClient {
		t := *token
		if t == "" {
			t = os.Getenv(admin.TokenEnv)
		}
		return &adminClient{base: *base, token: t, http: &http.Client{Timeout: 5 * time.Minute}}
	}
}

// attachCommand is the command line that attaches the uploaded module name
// as a policy of the same name through this client's admin API (the token
// is never shown).
func (c *adminClient) attachCommand(name string) string {
	cmd := "edge-mcp policy attach " + name + " --module " + name
	if c.base != defaultAdminURL {
		cmd += " --admin " + c.base
	}
	return cmd
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// moduleCommands are edge-mcp module push|ls|rm|rollback.
func moduleCommands() []*command {
	return []*command{
		{name: "module new", args: "NAME", nargs: 1, define: moduleNewFlags,
			summary: "write a ready-to-build policy project: the SDK inside it, test vectors, a build script (no network)",
			example: "edge-mcp module new hello && cd hello && ./build.sh"},
		{name: "module push", args: "FILE.wasm [oci://REF]", nargs: -1, define: modulePushFlags,
			summary: "upload a module: verified and stored; it runs once a policy attaches it (with oci://REF: push it to a registry instead)",
			example: "edge-mcp module push redact.wasm --name redact --sign key.pem --vectors vectors.json"},
		{name: "module pull", args: "oci://REF", nargs: 1, define: modulePullFlags,
			summary: "pull a module from an OCI registry, verify its digest (and cosign signature or Sigstore bundle), then upload it (or --out FILE)",
			example: "edge-mcp module pull oci://ghcr.io/acme/redact:v1 --key cosign.pub --name redact"},
		{name: "module ls", define: adminOnly(moduleList),
			summary: "list uploaded modules: digest, ABI, health, calls, where attached, versions kept",
			example: "edge-mcp module ls --admin http://127.0.0.1:9090"},
		{name: "module rm", args: "NAME", nargs: 1, define: adminOnly(moduleRemove),
			summary: "delete an uploaded module that no policy attaches",
			example: "edge-mcp module rm redact"},
		{name: "module rollback", args: "NAME", nargs: 1, define: adminOnly(moduleRollback),
			summary: "make the previous version of a module the active one",
			example: "edge-mcp module rollback redact"},
	}
}

// adminOnly defines a command whose only flags are --admin and --token.
func adminOnly(fn func(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error) func(*flag.FlagSet) runFunc {
	return func(fs *flag.FlagSet) runFunc {
		client := adminFlags(fs)
		return func(ctx context.Context, args []string, s streams) error { return fn(ctx, client(), args, s.stdout) }
	}
}

// call sends one admin request and decodes a successful JSON answer into
// out (when not nil).
func (c *adminClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	var h http.Header
	if body != nil {
		h = http.Header{"Content-Type": {"application/json"}}
	}
	code, raw, err := c.do(ctx, method, path, body, h)
	if err != nil {
		return err
	}
	if err := check(code, raw); err != nil {
		return err
	}
	if out == nil || code == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding the answer to %s %s: %w", method, path, err)
	}
	return nil
}

func moduleRemove(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	if err := c.call(ctx, http.MethodDelete, "/admin/modules/"+url.PathEscape(args[0]), nil, nil); err != nil {
		return fmt.Errorf("removing module %s: %w", args[0], err)
	}
	fmt.Fprintf(stdout, "removed %s\n", args[0])
	return nil
}

func moduleRollback(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
	var info struct{ Name, Digest string }
	if err := c.call(ctx, http.MethodPost, "/admin/modules/"+url.PathEscape(args[0])+"/rollback", nil, &info); err != nil {
		return fmt.Errorf("rolling back module %s: %w", args[0], err)
	}
	fmt.Fprintf(stdout, "rolled back %s to %s\n", info.Name, info.Digest)
	return nil
}

func modulePushFlags(fs *flag.FlagSet) runFunc {
	client := adminFlags(fs)
	var o pushOptions
	fs.StringVar(&o.name, "name", "", "module name (default: the file name without .wasm)")
	fs.StringVar(&o.vectors, "vectors", "", "JSON file of test vectors the module must pass before it is stored")
	fs.StringVar(&o.signKey, "sign", "", "ed25519 private key (PEM PKCS#8, or base64 of the 64-byte key) to sign the module with")
	fs.BoolVar(&o.compress, "compress", true, "send the module zstd-compressed")
	reg := registryFlags(fs)
	cosignKey := fs.String("cosign-key", "", "with oci://REF: an unencrypted PEM ECDSA P-256 private key to sign the pushed manifest with, as cosign sign --key does")
	return func(ctx context.Context, args []string, s streams) error {
		switch {
		case len(args) == 2 && ociwasm.IsRef(args[1]):
			return moduleRegistryPush(ctx, args[0], args[1], *cosignKey, reg(), s.stdout)
		case len(args) != 1:
			return usagef("usage: edge-mcp module push FILE.wasm [oci://REF] [flags]; run 'edge-mcp module push --help'")
		}
		return modulePush(ctx, client(), args[0], o, s.stdout)
	}
}

type pushOptions struct {
	name, vectors, signKey string
	compress               bool
}

// modulePush uploads file and says where it runs: nowhere until a policy
// attaches it (with the command that does), or as the policies that
// already attach its name.
func modulePush(ctx context.Context, c *adminClient, file string, o pushOptions, stdout io.Writer) error {
	wasm, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if o.name == "" {
		o.name = strings.TrimSuffix(filepath.Base(file), ".wasm")
	}
	return uploadModule(ctx, c, file, wasm, o, stdout)
}

// uploadModule uploads wasm, read from what (a file, a reference), as
// o.name.
func uploadModule(ctx context.Context, c *adminClient, what string, wasm []byte, o pushOptions, stdout io.Writer) error {
	name, vectorsFile, signKey, compress := o.name, o.vectors, o.signKey, o.compress
	sum := sha256.Sum256(wasm)
	h := http.Header{}
	h.Set("Content-Type", "application/wasm")
	h.Set(admin.HeaderModuleDigest, "sha256:"+hex.EncodeToString(sum[:]))
	if vectorsFile != "" {
		v, err := os.ReadFile(vectorsFile)
		if err != nil {
			return err
		}
		if !json.Valid(v) {
			return fmt.Errorf("%s is not valid JSON", vectorsFile)
		}
		h.Set(admin.HeaderModuleVectors, base64.StdEncoding.EncodeToString(v))
	}
	if signKey != "" {
		key, err := readPrivateKey(signKey)
		if err != nil {
			return fmt.Errorf("--sign %s: %w", signKey, err)
		}
		h.Set(admin.HeaderModuleSignature, base64.StdEncoding.EncodeToString(ed25519.Sign(key, wasm)))
	}
	body := wasm
	if compress {
		enc, _ := zstd.NewWriter(nil)
		body = enc.EncodeAll(wasm, nil)
		enc.Close()
		h.Set("Content-Encoding", "zstd")
	}
	code, raw, err := c.do(ctx, http.MethodPut, "/admin/modules/"+name, body, h)
	if err != nil {
		return err
	}
	if err := check(code, raw); err != nil {
		return fmt.Errorf("pushing %s as %q: %w", what, name, err)
	}
	var info struct {
		Name, Digest string
		AttachedAs   []string `json:"attached_as"`
	}
	json.Unmarshal(raw, &info)
	fmt.Fprintf(stdout, "pushed %s as %s (%s): stored", what, info.Name, info.Digest)
	if len(info.AttachedAs) > 0 {
		fmt.Fprintf(stdout, "; now running as policy %s\n", strings.Join(info.AttachedAs, ", "))
		return nil
	}
	fmt.Fprintf(stdout, "; not running until attached. Attach with:\n  %s\n", c.attachCommand(info.Name))
	return nil
}

// readPrivateKey reads an ed25519 private key: PEM (PKCS#8) or base64 of
// the 64-byte key (or its 32-byte seed).
func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if block, _ := pem.Decode(data); block != nil {
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("not an ed25519 key but %T", k)
		}
		return ek, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, errors.New("neither PEM nor base64")
	}
	switch len(raw) {
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(raw), nil
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	}
	return nil, fmt.Errorf("base64 key is %d bytes, want 64 (or a 32-byte seed)", len(raw))
}

func moduleList(ctx context.Context, c *adminClient, _ []string, stdout io.Writer) error {
	code, raw, err := c.do(ctx, http.MethodGet, "/admin/modules", nil, nil)
	if err != nil {
		return err
	}
	if err := check(code, raw); err != nil {
		return err
	}
	var doc struct {
		Modules []struct {
			Name        string                `json:"name"`
			Digest      string                `json:"digest"`
			Size        int64                 `json:"size"`
			ABIVersion  string                `json:"abi_version"`
			ActivatedAt time.Time             `json:"activated_at"`
			Healthy     bool                  `json:"healthy"`
			Calls       uint64                `json:"calls"`
			Failures    uint64                `json:"failures"`
			AttachedAs  []string              `json:"attached_as"`
			History     []any                 `json:"history"`
			Replicas    []admin.ModuleReplica `json:"replicas"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("decoding the module list: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tABI\tACTIVATED\tHEALTHY\tCALLS\tFAILURES\tATTACHED AS\tROLLBACKS")
	for _, m := range doc.Modules {
		d := m.Digest
		if len(d) > 19 {
			d = d[:19]
		}
		attached := strings.Join(m.AttachedAs, ",")
		if attached == "" {
			attached = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%v\t%d\t%d\t%s\t%d\n", m.Name, d, m.Size, m.ABIVersion,
			m.ActivatedAt.Local().Format(time.DateTime), m.Healthy, m.Calls, m.Failures, attached, len(m.History))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range doc.Modules {
		printReplicaDrift(stdout, m.Name, m.Digest, m.Replicas)
	}
	return nil
}
