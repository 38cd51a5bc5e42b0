package mcpfront

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/executor/strictjson"
	"github.com/countersign/countersign/sidecar/client"
)

// errorBody is the structured content of an error result: the API's error
// object, as /v1 answers it, and the HTTP status /v1 answered it with.
type errorBody struct {
	Error  *client.Error `json:"error"`
	Status int           `json:"status"`
}

// errorResult is the error result of err: an API error keeps its code,
// message and rule; anything else (the sidecar unreachable) is said in
// text only, since no API code describes it.
func errorResult(err error) *mcp.CallToolResult {
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code == "" {
		return &mcp.CallToolResult{IsError: true, Content: text("countersign could not answer: %v", err)}
	}
	msg := fmt.Sprintf("error %s (HTTP %d): %s", ae.Code, ae.Status, ae.Message)
	if ae.Rule != "" {
		msg += " (rule " + ae.Rule + ")"
	}
	return &mcp.CallToolResult{IsError: true, Content: text("%s", msg), StructuredContent: errorBody{Error: ae, Status: ae.Status}}
}

// argsError is the API's answer to arguments strictjson refuses: 400
// malformed_json, or 422 invalid_request for an unknown field or a wrong
// type, as the sidecar's error mapping answers the same refusals.
func argsError(err error) *client.Error {
	if errors.Is(err, strictjson.ErrMalformed) {
		return &client.Error{Status: http.StatusBadRequest, Code: "malformed_json", Message: err.Error()}
	}
	return &client.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_request", Message: err.Error()}
}

// stepResult answers a proposed step: the step is the structured content
// whatever its status; a denied step is an error result.
func stepResult(st client.Step, err error) *mcp.CallToolResult {
	if err != nil && st.Status != client.StepDenied {
		return errorResult(err)
	}
	return &mcp.CallToolResult{IsError: st.Status == client.StepDenied, Content: text("%s", stepText(st)), StructuredContent: st}
}

// stepText says what happened to a step, in words a model acts on, and
// then why, as the step's reason and a lead's comment say it.
func stepText(st client.Step) string {
	var b strings.Builder
	b.WriteString(outcomeText(st))
	if r := st.Reason; r != nil && r.Text != "" {
		fmt.Fprintf(&b, " Why: %s", sentence(r.Text))
	}
	if r := st.Reason; r != nil && r.Next != "" {
		fmt.Fprintf(&b, " Next: %s", sentence(r.Next))
	}
	if st.ApprovalComment != "" {
		fmt.Fprintf(&b, " The lead's comment: %q.", st.ApprovalComment)
	}
	return b.String()
}

// sentence is s ending with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// outcomeText says what happened to a step and what to do about it.
func outcomeText(st client.Step) string {
	call := fmt.Sprintf("%s step %d (%s)", st.Workflow, st.N, st.Tool)
	switch st.Status {
	case client.StepDone:
		return fmt.Sprintf("done: %s ran (rule %s). Result: %s", call, st.Rule, orNone(string(st.Result)))
	case client.StepWaitingApproval:
		if st.Approval == nil {
			return fmt.Sprintf("waiting_approval: %s waits for a lead's approval; nothing has run. Call countersign_wait.", call)
		}
		return fmt.Sprintf("waiting_approval: %s needs a lead's approval (rule %s); nothing has run. Approval %s: %q, "+
			"expires %s. Call countersign_wait to wait for the lead's answer: it resumes the workflow and says what ran. "+
			"Do not call the tool again.", call, st.Rule, st.Approval.ID, st.Approval.Summary, st.Approval.Expires.Format("2006-01-02T15:04:05Z07:00"))
	case client.StepDenied:
		why := st.Rule
		if st.Error != nil {
			why = st.Error.Code + ": " + st.Error.Message
		}
		return fmt.Sprintf("denied: %s was refused and did not run (rule %s; %s). Do not retry it; tell the person why.", call, st.Rule, why)
	case client.StepHeld:
		reason := "the tool is switched off by an operator"
		if st.Note != "" {
			reason = st.Note
		}
		return fmt.Sprintf("held: %s did not run: %s. Call countersign_wait later to resume it once it may run.", call, reason)
	case client.StepSuppressed:
		return fmt.Sprintf("suppressed: %s is the same call as step %d of this workflow, which already ran; nothing ran again.", call, st.DuplicateOf)
	case client.StepUnknown:
		return fmt.Sprintf("unknown: %s was sent but its outcome is not confirmed (%s). countersign resolves it on the workflow's "+
			"next resume: call countersign_wait. Do not retry the call.", call, orNone(st.Note))
	case client.StepShadowed:
		return fmt.Sprintf("shadowed: %s runs in shadow mode; nothing was executed. The policy would have decided %s (rule %s).",
			call, st.Decision, st.Rule)
	}
	return fmt.Sprintf("%s: %s (decision %s, rule %s).", st.Status, call, orNone(st.Decision), orNone(st.Rule))
}

// workflowText says where a workflow and each of its steps stand.
func workflowText(w client.Workflow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow %s (ticket %s) is %s with %d steps.", w.ID, w.Ticket, w.Status, len(w.Steps))
	for _, st := range w.Steps {
		b.WriteString("\n- ")
		b.WriteString(stepText(st))
	}
	return b.String()
}

func text(format string, args ...any) []mcp.Content {
	return []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
