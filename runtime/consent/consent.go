// Package consent is the wording of a person's approval of a tool call
// (a tool rule or a policy module's "needs approval"): the question a
// client asks its user through elicitation/create (Question), the reading
// of the answer into the decision the audit log records and the error the
// call is refused with (Decide), and the refusals when no one can be
// asked. Pure functions; the gateway asks, waits at most Timeout, audits
// and answers.
package consent

import (
	"encoding/json"
	"fmt"
	"time"
)

// Timeout bounds how long a call waits for a person.
const Timeout = 10 * time.Minute

// Decisions on a call, as the audit log records them.
const (
	Approved    = "approved"
	Declined    = "declined"
	Cancelled   = "cancelled"
	Invalid     = "invalid"     // an answer that does not decode
	Unavailable = "unavailable" // the client cannot ask (no elicitation)
	Failed      = "failed"      // asking failed
)

// schema is what the person is asked to fill in.
var schema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Allow this call","description":"Check to let the tool call go ahead."}},"required":["approve"]}`)

// Question is the elicitation/create params asking a person to allow the
// call of tool on server with the arguments shown (secrets already masked;
// nil or empty: none).
func Question(tool, server string, shown json.RawMessage) json.RawMessage {
	if len(shown) == 0 {
		shown = json.RawMessage(`{}`)
	}
	msg := fmt.Sprintf("edge-mcp: allow the call of tool %q on server %q?\nArguments (secrets masked): %s", tool, server, shown)
	params, _ := json.Marshal(struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}{msg, schema})
	return params
}

// Decide reads a person's answer res (an elicitation/create result) to
// Question for tool: the decision, and unless it is Approved the error
// the call is refused with.
func Decide(tool string, res json.RawMessage) (string, error) {
	var answer struct {
		Action  string `json:"action"`
		Content struct {
			Approve bool `json:"approve"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &answer); err != nil {
		return Invalid, fmt.Errorf("edge-mcp: the approval answer for tool %q was not understood; the call was not made", tool)
	}
	switch {
	case answer.Action == "accept" && answer.Content.Approve:
		return Approved, nil
	case answer.Action == "accept":
		return Declined, fmt.Errorf("edge-mcp: the user did not approve the call of tool %q", tool)
	case answer.Action == "decline":
		return Declined, fmt.Errorf("edge-mcp: the user declined the call of tool %q", tool)
	default:
		return Cancelled, fmt.Errorf("edge-mcp: the user cancelled the approval of tool %q; the call was not made", tool)
	}
}

// NoElicitation is the refusal of a call of tool whose client cannot ask
// its user (decision Unavailable).
func NoElicitation(tool string) error {
	return fmt.Errorf("edge-mcp: tool %q needs a person's approval, but this client cannot ask for it (no elicitation support); the call was not made", tool)
}

// AskFailed is the refusal of a call of tool whose client answered the
// question with an error, msg (decision Failed).
func AskFailed(tool, msg string) error {
	return fmt.Errorf("edge-mcp: asking for approval of tool %q failed (%s); the call was not made", tool, msg)
}
