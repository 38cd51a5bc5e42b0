package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/countersign/countersign/sidecar/client"
	"github.com/countersign/countersign/sidecar/mcpfront"
)

// mcpFlags are the flags of `countersign mcp`.
type mcpFlags struct {
	sidecar, tokenFile string
	workflow, ticket   string
	lead               bool
}

// newMCPCmd serves the MCP front on stdio, forwarding to a sidecar over
// HTTP: for agents that launch their tools as a process.
func newMCPCmd() *cobra.Command {
	var f mcpFlags
	cmd := &cobra.Command{
		Use:   "mcp --sidecar URL --token-file F [--workflow W --ticket T] [--lead]",
		Short: "Serve countersign's governed tools to an agent over MCP on stdio",
		Long: `Serve the Model Context Protocol on stdin/stdout for an agent that launches its
tools as a process (Claude Desktop, Claude Code, IDEs), forwarding every call
to the sidecar at URL with the bearer token in file F (a rep's for the agent's
tools; a lead's with --lead for the approval tools). The tools and answers are
those of the sidecar's /mcp endpoint: the catalog, countersign_status and
countersign_wait, or with --lead approvals_pending, approval_get,
approval_approve and approval_reject.

Every tool of a rep takes optional workflow and ticket arguments, so one
server handles many tickets; a call that names neither works in the
default workflow, the one --workflow and --ticket name (opened or found
again at the first call), or else one opened for the server's session.

The token is read once at start; restart the server with a new one.`,
		Example: `  countersign mcp --sidecar http://127.0.0.1:8080 --token-file ~/.countersign/rep.jwt --workflow W-4711 --ticket T-4711
  countersign mcp --sidecar https://countersign.internal --token-file ~/.countersign/lead.jwt --lead`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv, err := f.server(cmd.Context())
			if err != nil {
				return err
			}
			err = srv.Run(cmd.Context(), &mcp.StdioTransport{})
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil // the agent closed stdin, or a signal ended the server
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.sidecar, "sidecar", "", "the sidecar's base URL, e.g. http://127.0.0.1:8080")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the person's bearer token (a JWT)")
	cmd.Flags().StringVar(&f.workflow, "workflow", "", "id of the default workflow, for calls that name none (with --ticket)")
	cmd.Flags().StringVar(&f.ticket, "ticket", "", "ticket of the default workflow, for calls that name none")
	cmd.Flags().BoolVar(&f.lead, "lead", false, "serve the approval tools instead of the catalog")
	_ = cmd.MarkFlagRequired("sidecar")
	_ = cmd.MarkFlagRequired("token-file")
	return cmd
}

// server checks the flags, reads the token and the catalog (so that a wrong
// URL or a refused token is said now, not at the agent's first call), and
// builds the session's server.
func (f mcpFlags) server(ctx context.Context) (*mcp.Server, error) {
	switch {
	case f.lead && (f.workflow != "" || f.ticket != ""):
		return nil, errors.New("--lead serves the approval tools, which work in no workflow: leave out --workflow and --ticket")
	case f.workflow != "" && f.ticket == "":
		return nil, errors.New("--workflow needs --ticket: the workflow is opened, or found again, by its id and ticket together")
	}
	c, err := clientWithTokenFile(f.sidecar, f.tokenFile)
	if err != nil {
		return nil, err
	}
	catalog, err := c.Tools(ctx)
	var ae *client.Error
	switch {
	case errors.As(err, &ae):
		return nil, fmt.Errorf("the sidecar at %s refused the token of %s: %w", f.sidecar, f.tokenFile, err)
	case err != nil:
		return nil, fmt.Errorf("reaching the sidecar at %s: %w", f.sidecar, err)
	}
	return mcpfront.NewServer(mcpfront.Config{
		Client:   func(*mcp.CallToolRequest) (*client.Client, error) { return c, nil },
		Lead:     f.lead,
		Catalog:  catalog,
		Workflow: f.workflow,
		Ticket:   f.ticket,
	}), nil
}
