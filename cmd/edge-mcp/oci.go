package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is edge-mcp module pull, and module push to a registry.

// registryFlags adds the flags that say how a registry is reached.
func registryFlags(fs *flag.FlagSet) func() ociwasm.Options {
	insecure := fs.String("insecure-registry", "", "comma-separated registries (host or host:port) reached over plain HTTP; loopback ones always are")
	dockerConfig := fs.String("docker-config", "", "Docker config.json to take registry credentials from (default: $DOCKER_CONFIG/config.json or ~/.docker/config.json)")
	timeout := fs.Duration("timeout", ociwasm.DefaultTimeout, "bound on the whole pull or push")
	return func() ociwasm.Options {
		o := ociwasm.Options{DockerConfig: *dockerConfig, Timeout: *timeout}
		for _, r := range strings.Split(*insecure, ",") {
			if r = strings.TrimSpace(r); r != "" {
				o.Insecure = append(o.Insecure, r)
			}
		}
		return o
	}
}

func modulePullFlags(fs *flag.FlagSet) runFunc {
	client := adminFlags(fs)
	reg := registryFlags(fs)
	var o pushOptions
	fs.StringVar(&o.name, "name", "", "module name (default: the repository's last element)")
	fs.StringVar(&o.vectors, "vectors", "", "JSON file of test vectors the module must pass before it is stored")
	fs.StringVar(&o.signKey, "sign", "", "ed25519 private key to sign the upload with, for a gateway with admin.require_signed")
	o.compress = true
	out := fs.String("out", "", "write the verified module to this file instead of uploading it")
	sig := signatureFlags(fs)
	maxBytes := fs.Int64("max-bytes", config.DefaultMaxModuleBytes, "largest module accepted; a larger layer is refused before it is downloaded")
	return func(ctx context.Context, args []string, s streams) error {
		ro := reg()
		ro.MaxBytes = *maxBytes
		var err error
		if ro.Keys, err = sig(); err != nil {
			return err
		}
		return modulePull(ctx, client(), args[0], ro, o, *out, s.stdout)
	}
}

// signatureFlags adds the flags that require a signature of a pulled
// module: by a cosign key, or keyless (cosign's flag names), checked by
// the verifier of admin.require_signature.
func signatureFlags(fs *flag.FlagSet) func() (*ociwasm.Keys, error) {
	key := fs.String("key", "", "cosign public key file (PEM): require a signature of the manifest by it (cosign .sig tag or Sigstore bundle)")
	root := fs.String("trusted-root", "", "Sigstore trusted_root.json: accept keyless bundles whose certificate chains to its CAs (with --certificate-identity(-regexp) and --certificate-oidc-issuer)")
	var r config.SignatureRule
	fs.StringVar(&r.CertificateIdentity, "certificate-identity", "", "keyless: the signing certificate's SAN (URI, e-mail or Fulcio username), exactly")
	fs.StringVar(&r.CertificateIdentityRegexp, "certificate-identity-regexp", "", "keyless: a Go regexp the signing certificate's SAN must match")
	fs.StringVar(&r.CertificateOIDCIssuer, "certificate-oidc-issuer", "", "keyless: the signing certificate's OIDC issuer, exactly")
	return func() (*ociwasm.Keys, error) {
		if *key != "" {
			pemData, err := os.ReadFile(*key)
			if err != nil {
				return nil, fmt.Errorf("--key: %w", err)
			}
			r.CosignKeys = []string{string(pemData)}
		}
		keyless := r.CertificateIdentity != "" || r.CertificateIdentityRegexp != "" || r.CertificateOIDCIssuer != ""
		switch {
		case *root == "" && keyless:
			return nil, usagef("--certificate-identity(-regexp) and --certificate-oidc-issuer need --trusted-root")
		case *root != "" && (r.CertificateOIDCIssuer == "" || (r.CertificateIdentity == "") == (r.CertificateIdentityRegexp == "")):
			return nil, usagef("--trusted-root needs --certificate-oidc-issuer and one of --certificate-identity, --certificate-identity-regexp")
		case *root != "":
			b, err := os.ReadFile(*root)
			if err != nil {
				return nil, fmt.Errorf("--trusted-root: %w", err)
			}
			r.TrustedRoot = string(b)
		}
		if len(r.CosignKeys) == 0 && r.TrustedRoot == "" {
			return nil, nil
		}
		keys, err := r.Keys()
		if err != nil {
			return nil, fmt.Errorf("signature flags: %w", err)
		}
		return keys, nil
	}
}

// modulePull pulls and verifies reference, then writes it to out or
// uploads it.
func modulePull(ctx context.Context, c *adminClient, reference string, ro ociwasm.Options, o pushOptions, out string, stdout io.Writer) error {
	ref, err := ociwasm.ParseRef(reference)
	if err != nil {
		return usagef("edge-mcp module pull: %v", err)
	}
	a, err := ociwasm.Pull(ctx, ref, ro)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pulled %s: %d bytes, %s", a.Ref, len(a.Wasm), a.WasmDigest)
	if by, ok := strings.CutPrefix(a.SignedBy, "keyless:"); ok {
		fmt.Fprintf(stdout, ", signed keylessly by %s", by)
	} else if a.SignedBy != "" {
		fmt.Fprintf(stdout, ", signed by cosign key %s", a.SignedBy)
	}
	fmt.Fprintln(stdout)
	if out != "" {
		if err := os.WriteFile(out, a.Wasm, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", out)
		return nil
	}
	if o.name == "" {
		o.name = ref.Repository[strings.LastIndexByte(ref.Repository, '/')+1:]
	}
	return uploadModule(ctx, c, a.Ref.String(), a.Wasm, o, stdout)
}

// moduleRegistryPush pushes file to reference, signing it when keyFile is
// set.
func moduleRegistryPush(ctx context.Context, file, reference, keyFile string, ro ociwasm.Options, stdout io.Writer) error {
	ref, err := ociwasm.ParseRef(reference)
	if err != nil {
		return usagef("edge-mcp module push: %v", err)
	}
	var key *ecdsa.PrivateKey
	if keyFile != "" {
		if key, err = readECDSAKey(keyFile); err != nil {
			return fmt.Errorf("--cosign-key %s: %w", keyFile, err)
		}
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	pinned, err := ociwasm.Push(ctx, wasm, ref, ro)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pushed %s to %s\n", file, pinned)
	if key != nil {
		if err := ociwasm.Sign(ctx, pinned, key, ro); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "signed %s with cosign key %s\n", pinned, ociwasm.KeyID(&key.PublicKey))
	}
	return nil
}

// readECDSAKey reads an unencrypted PEM ECDSA P-256 private key (PKCS#8
// or SEC 1).
func readECDSAKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("not PEM")
	}
	var k any
	switch block.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q: want an unencrypted PRIVATE KEY or EC PRIVATE KEY (cosign's encrypted keys are not read)", block.Type)
	}
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("a %T, want ECDSA P-256", k)
	}
	return ek, nil
}
