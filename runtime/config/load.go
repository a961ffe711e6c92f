package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
)

// Error is returned for invalid configs. It names the file, the dotted
// key path of the offending value (for example
// "mcpServers.weather.headers.X-Api-Key") and the reason. It never contains
// secret values such as header values, bearer tokens or environment values.
type Error struct {
	File, Key, Reason string
}

// Error formats the error as "config FILE: KEY: REASON".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.File != "" {
		b.WriteString(" ")
		b.WriteString(e.File)
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Load reads and validates the file at path. A file that cannot be read
// yields a wrapped I/O error (errors.Is(err, fs.ErrNotExist) works); an
// invalid one yields a *Error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data)
}

// Parse validates data, the contents of the config file at path; path
// is used in error messages and stored as Config.Path. Every error is a
// *Error. A leading UTF-8 byte order mark is ignored.
func Parse(path string, data []byte) (*Config, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark, as some editors write
	d := &decoder{file: path, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	cfg, cerr := d.parse()
	if cerr != nil {
		return nil, cerr
	}
	cfg.Path = path
	return cfg, nil
}

// UploadedModule reports whether a policy's module names an uploaded module
// (a plain name) rather than a file (a path, or a name ending in .wasm)
// or an oci:// reference (OCIModule).
func UploadedModule(module string) (string, bool) {
	if module == "" || strings.ContainsAny(module, `/\`) || strings.HasSuffix(module, ".wasm") {
		return "", false
	}
	return module, true
}

// OCIModule reports whether a policy's module is an oci:// reference to
// pull from a registry (policy/store's Resolve).
func OCIModule(module string) bool { return ociwasm.IsRef(module) }

// LoopbackAddr reports whether a listen address binds only to loopback.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RegistryOptions are the options of pulling the oci:// module reference:
// plain-HTTP registries, credentials, the size cap and timeout, and the
// cosign keys of the longest admin.require_signature prefix that covers
// the reference (none: no signature is required).
func (a *Admin) RegistryOptions(reference string) (ociwasm.Options, error) {
	ref, err := ociwasm.ParseRef(reference)
	if err != nil {
		return ociwasm.Options{}, err
	}
	o := ociwasm.Options{
		MaxBytes: a.MaxModuleBytes, Insecure: a.InsecureRegistries, DockerConfig: a.DockerConfig,
		Timeout: time.Duration(a.PullTimeout * float64(time.Second)),
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxModuleBytes
	}
	name := ref.Registry + "/" + ref.Repository
	best := -1
	for i, r := range a.RequireSignature {
		p := strings.TrimSuffix(r.Prefix, "/")
		if (name == p || strings.HasPrefix(name, p+"/")) && (best < 0 || len(p) > len(strings.TrimSuffix(a.RequireSignature[best].Prefix, "/"))) {
			best = i
		}
	}
	if best >= 0 {
		if o.Keys, err = a.RequireSignature[best].Keys(); err != nil {
			return ociwasm.Options{}, fmt.Errorf("admin.require_signature[%d]: %w", best, err)
		}
	}
	return o, nil
}

// Keys are the keys and keyless identities the rule accepts.
func (r *SignatureRule) Keys() (*ociwasm.Keys, error) {
	var keys *ociwasm.Keys
	if len(r.CosignKeys) > 0 {
		k, err := ociwasm.ParseKeys(r.CosignKeys...)
		if err != nil {
			return nil, fmt.Errorf("cosign_keys: %w", err)
		}
		keys = k
	}
	if r.TrustedRoot == "" && r.CertificateIdentity == "" && r.CertificateIdentityRegexp == "" && r.CertificateOIDCIssuer == "" {
		return keys, nil
	}
	root, err := ociwasm.ParseTrustedRoot([]byte(r.TrustedRoot))
	if err != nil {
		return nil, fmt.Errorf("trusted_root: %w", err)
	}
	id := ociwasm.Identity{SAN: r.CertificateIdentity, Issuer: r.CertificateOIDCIssuer}
	if r.CertificateIdentityRegexp != "" {
		if id.SANRegexp, err = regexp.Compile(r.CertificateIdentityRegexp); err != nil {
			return nil, fmt.Errorf("certificate_identity_regexp: %w", err)
		}
	}
	if (id.SAN == "") == (id.SANRegexp == nil) || id.Issuer == "" {
		return nil, errors.New("keyless: want certificate_oidc_issuer and one of certificate_identity, certificate_identity_regexp")
	}
	return keys.WithKeyless(root, id), nil
}
