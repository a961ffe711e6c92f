// Package oauth makes edge-mcp an OAuth 2.1 client of the upstream MCP
// servers it fronts, using go-sdk's auth package.
//
// A Manager holds, for each server with an "oauth" section, one Handler
// per upstream identity ("" for a shared server; the downstream identity
// for "identity": "per_client"). A Handler is a go-sdk auth.OAuthHandler:
// the upstream transports ask it for a token on every request and call
// Authorize on a 401 or a 403 insufficient_scope, then retry once.
//
// Tokens live in a Store, sealed with AES-256-GCM under the key of the
// top-level "oauth" section (or one generated in the state folder); the
// record of a server and identity is bound to them as additional data, so
// a record copied under another name does not open. Tokens never appear
// in logs, status, audit lines or errors: Record has no String method
// that shows them and every error names the server, not the token.
//
// Where a person must approve (first login, step-up, a refresh token that
// no longer works), the authorization is pending: its URL is listed by
// Status, and the authorization server's redirect completes it at the
// gateway's /oauth/callback (CallbackHandler), or at a loopback listener
// the Manager opens for a redirect URL such as http://localhost:3118/callback
// (callbackPort). The call that needed it waits Options.PendingWait, then
// fails with a *NeedsAuthorizationError naming the server.
package oauth
