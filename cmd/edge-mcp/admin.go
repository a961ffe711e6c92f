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
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klauspost/compress/zstd"
)

// This file is the admin client: edge-mcp module push|ls|rm|rollback
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
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w (is the gateway running with its admin API on %s?)", method, path, err, c.base)
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
	url := fs.String("admin", envOr("EDGE_MCP_ADMIN_URL", defaultAdminURL), "admin API base URL (env EDGE_MCP_ADMIN_URL)")
	token := fs.String("token", "", "admin token (default: env EDGE_MCP_ADMIN_TOKEN)")
	return func() *adminClient {
		t := *token
		if t == "" {
			t = os.Getenv("EDGE_MCP_ADMIN_TOKEN")
		}
		return &adminClient{base: *url, token: t, http: &http.Client{Timeout: 5 * time.Minute}}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
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

func moduleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: edge-mcp module push|ls|rm|rollback ... (see edge-mcp module push -h)")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("module "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	client := adminFlags(fs)
	switch sub {
	case "push":
		name := fs.String("name", "", "module name (default: the file name without .wasm)")
		vectors := fs.String("vectors", "", "JSON file of test vectors the module must pass before it is activated")
		signKey := fs.String("sign", "", "ed25519 private key (PEM PKCS#8, or base64 of the 64-byte key) to sign the module with")
		compress := fs.Bool("compress", true, "send the module zstd-compressed")
		pos, err := splitArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return errors.New("usage: edge-mcp module push FILE.wasm [--name NAME] [--vectors FILE] [--sign KEY]")
		}
		return modulePush(ctx, client(), pos[0], *name, *vectors, *signKey, *compress, stdout)
	case "ls":
		if _, err := splitArgs(fs, args); err != nil {
			return err
		}
		return moduleList(ctx, client(), stdout)
	case "rm", "rollback":
		pos, err := splitArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return fmt.Errorf("usage: edge-mcp module %s NAME", sub)
		}
		c := client()
		method, path := http.MethodDelete, "/admin/modules/"+pos[0]
		if sub == "rollback" {
			method, path = http.MethodPost, path+"/rollback"
		}
		code, raw, err := c.do(ctx, method, path, nil, nil)
		if err != nil {
			return err
		}
		if err := check(code, raw); err != nil {
			return err
		}
		if sub == "rm" {
			fmt.Fprintf(stdout, "removed %s\n", pos[0])
			return nil
		}
		var info struct{ Name, Digest string }
		json.Unmarshal(raw, &info)
		fmt.Fprintf(stdout, "rolled back %s to %s\n", info.Name, info.Digest)
		return nil
	default:
		return fmt.Errorf("unknown module command %q (want push, ls, rm or rollback)", sub)
	}
}

func modulePush(ctx context.Context, c *adminClient, file, name, vectorsFile, signKey string, compress bool, stdout io.Writer) error {
	wasm, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(file), ".wasm")
	}
	sum := sha256.Sum256(wasm)
	h := http.Header{}
	h.Set("Content-Type", "application/wasm")
	h.Set("X-Module-SHA256", "sha256:"+hex.EncodeToString(sum[:]))
	if vectorsFile != "" {
		v, err := os.ReadFile(vectorsFile)
		if err != nil {
			return err
		}
		if !json.Valid(v) {
			return fmt.Errorf("%s is not valid JSON", vectorsFile)
		}
		h.Set("X-Module-Test-Vectors", base64.StdEncoding.EncodeToString(v))
	}
	if signKey != "" {
		key, err := readPrivateKey(signKey)
		if err != nil {
			return fmt.Errorf("--sign %s: %w", signKey, err)
		}
		h.Set("X-Module-Signature", base64.StdEncoding.EncodeToString(ed25519.Sign(key, wasm)))
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
		return fmt.Errorf("pushing %s as %q: %w", file, name, err)
	}
	var info struct {
		Name, Digest string
		AttachedAs   []string `json:"attached_as"`
	}
	json.Unmarshal(raw, &info)
	fmt.Fprintf(stdout, "pushed %s as %s (%s), active", file, info.Name, info.Digest)
	if len(info.AttachedAs) > 0 {
		fmt.Fprintf(stdout, "; attached as %s", strings.Join(info.AttachedAs, ", "))
	}
	fmt.Fprintln(stdout)
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

func moduleList(ctx context.Context, c *adminClient, stdout io.Writer) error {
	code, raw, err := c.do(ctx, http.MethodGet, "/admin/modules", nil, nil)
	if err != nil {
		return err
	}
	if err := check(code, raw); err != nil {
		return err
	}
	var doc struct {
		Modules []struct {
			Name        string    `json:"name"`
			Digest      string    `json:"digest"`
			Size        int64     `json:"size"`
			ABIVersion  string    `json:"abi_version"`
			ActivatedAt time.Time `json:"activated_at"`
			Healthy     bool      `json:"healthy"`
			Calls       uint64    `json:"calls"`
			Failures    uint64    `json:"failures"`
			AttachedAs  []string  `json:"attached_as"`
			History     []any     `json:"history"`
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
	return tw.Flush()
}
