package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// holdScope takes the policy generation deciding the call. When a later
// stage may wait (modules, people and queues take time), the rest of the
// pipeline runs off the session's read loop, and the scope (the generation
// and the concurrency slot) is released once the call has been answered.
func holdScope(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		s, it := tc.s, tc.it
		tc.scope = policyScope(&s.g.pol, kindTools, it.Up.name, it.Name)
		tc.approval = tc.ts.Approval
		if !tc.scope.Held() && !tc.approval && tc.gd.Concurrency(it.Up.name) == nil && !it.Up.needsUserAuthorization(s) && s.g.icept.Load() == nil {
			return next(tc)
		}
		go func() {
			defer tc.scope.Release()
			tc.respond(next(tc))
			if tc.done != nil {
				<-tc.done
			}
		}()
		return nil, nil
	}
}
