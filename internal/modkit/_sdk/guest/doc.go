// Package guest is the SDK for writing edge-mcp policy modules in Go.
//
// A module is a main package with an empty main function whose init
// function registers typed handlers:
//
//	func init() {
//		guest.OnConfigure(func(cfg []byte) error { ... })
//		guest.OnToolCall(func(c *guest.ToolCall) guest.Decision {
//			if c.Tool == "delete_repo" {
//				return guest.Deny("deleting repositories is not allowed")
//			}
//			return guest.Allow()
//		})
//	}
//
//	func main() {}
//
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
//
// Handlers must be registered from init: a reactor never runs main. The SDK
// provides every export of the policy ABI (policy/ABI.md in the edge-mcp
// repository): the version, the input allocator, the per-hook entry points
// and the hook bitmask that tells the host which handlers exist, so the host
// calls only those. Handler inputs are slices into a buffer the SDK reuses;
// copy anything that must outlive the call.
//
// Outside WebAssembly the package builds too, without the exports: a
// module's tests run its handlers natively with guest/guesttest.
package guest
