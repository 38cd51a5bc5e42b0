package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/sidecar/client"
)

// Version is the implementation version the servers announce.
const Version = "1"

// DefaultPollInterval is the longest countersign_wait waits for a change
// before it reads the workflow again.
const DefaultPollInterval = 5 * time.Second

// maxWait is the longest countersign_wait blocks.
const maxWait = 60 * time.Second

// minGap is the least time between two reads of countersign_wait.
const minGap = 200 * time.Millisecond

// ClientFunc gives the client that speaks for the caller of one tool call.
type ClientFunc func(req *mcp.CallToolRequest) (*client.Client, error)

// Config is one session's server.
type Config struct {
	// Client speaks to the sidecar for each call. Required.
	Client ClientFunc
	// Lead gives the session the approval tools instead of the catalog.
	Lead bool
	// Catalog is GET /v1/tools, the tools a rep's session offers besides
	// countersign_status and countersign_wait. Unused for a lead.
	Catalog []client.Tool
	// Workflow and Ticket name the session's default workflow, for calls
	// that name none (see the package documentation, "One session, many
	// workflows", for what is opened when they are empty).
	Workflow, Ticket string
	// PollInterval is the longest countersign_wait waits for a change
	// before it reads the workflow again; DefaultPollInterval when zero.
	PollInterval time.Duration
	// Clock tells countersign_wait when an approval has expired; the wall
	// clock when nil.
	Clock clock.Clock
}

// NewServer builds the MCP server of one session.
func NewServer(cfg Config) *mcp.Server {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Wall{}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "countersign", Version: Version},
		&mcp.ServerOptions{Instructions: instructions(cfg.Lead), Capabilities: &mcp.ServerCapabilities{}})
	var tools map[string]mcp.ToolHandler
	if cfg.Lead {
		tools = addLeadTools(s, cfg)
	} else {
		tools = addRepTools(s, &rep{cfg: cfg})
	}
	s.AddReceivingMiddleware(unknownTools(slices.Sorted(maps.Keys(tools))))
	return s
}

func instructions(lead bool) string {
	if lead {
		return "Approval tools of countersign: approvals_pending lists what you may approve, approval_approve and " +
			"approval_reject decide as you (the token's subject). The sidecar's approver rules decide; a refusal names its code."
	}
	return "Governed tools of countersign. Every call is authorized by policy and runs at most once. A call that waits " +
		"for a lead's approval is not an error: call countersign_wait, never the same tool again."
}

// add registers a tool whose arguments the handler decodes itself. Its
// title is its annotations' (nil: none).
func add(s *mcp.Server, tools map[string]mcp.ToolHandler, name, description string, schema json.RawMessage, hints *mcp.ToolAnnotations, h mcp.ToolHandler) {
	t := &mcp.Tool{Name: name, Description: description, InputSchema: schema, Annotations: hints}
	if hints != nil {
		t.Title = hints.Title
	}
	s.AddTool(t, h)
	tools[name] = h
}

// hints are a tool's annotations. Every tool of the front reaches only the
// sidecar and the company's own systems of record behind it, so none is
// open-world.
func hints(title string, readOnly, destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, DestructiveHint: &destructive,
		IdempotentHint: idempotent, OpenWorldHint: new(bool)}
}

// unknownTools answers a call of a tool the session does not offer as the
// API answers an unknown tool (404 unknown_tool), instead of the SDK's
// protocol error, which a model never sees.
func unknownTools(names []string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if call, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && !slices.Contains(names, call.Params.Name) {
				return errorResult(&client.Error{Status: 404, Code: "unknown_tool",
					Message: fmt.Sprintf("unknown tool %q: this session's tools are %s", call.Params.Name, strings.Join(names, ", "))}), nil
			}
			return next(ctx, method, req)
		}
	}
}

// clientFor returns the caller's client, or the error result that says why
// there is none.
func clientFor(cfg Config, req *mcp.CallToolRequest) (*client.Client, *mcp.CallToolResult) {
	c, err := cfg.Client(req)
	if err != nil {
		return nil, errorResult(err)
	}
	return c, nil
}
