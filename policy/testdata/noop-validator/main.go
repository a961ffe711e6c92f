//go:build wasip1

// Command noop-validator is an ABI 1.1 module with one validator that
// passes everything: the floor of a Go guest interceptor, for benchmarks.
package main

import "github.com/edge-mcp/edge-mcp/guest"

func init() {
	guest.Validator(guest.InterceptorInfo{Name: "noop", Events: []string{"*"}}, func(*guest.Invocation) guest.Validation {
		return guest.Pass()
	})
}

func main() {}
