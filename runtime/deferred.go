package gateway

import "net/http"

// metaTools returns the gateway's own tools a session sees besides its
// catalogue, given the tools deferred out of its list.
func (g *Gateway) metaTools(s *session, deferred []*item) []*item { return nil }

// openAIHandler serves the OpenAI-style tool API under /v1/.
func (g *Gateway) openAIHandler() http.Handler { return http.NotFoundHandler() }
