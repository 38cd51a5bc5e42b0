package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/engine"
	"github.com/countersign/countersign/executor/tool"
)

// Ids, tickets and comments are refused at the door when they break the
// contract, carry a token, or would break a page or a log line.
func TestFieldsAreCheckedOnArrival(t *testing.T) {
	const jwt = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln"
	h := newHarness(t, engine.DefaultControls())
	ctx := context.Background()
	for _, tc := range []struct {
		name, id, ticket, field string
	}{
		{"an id shaped like a JWT", jwt, "T-1", "id"},
		{"a ticket shaped like a JWT", "W-jwt", jwt, "ticket"},
		{"an id of 65 characters", strings.Repeat("a", 65), "T-1", "id"},
		{"an id with a slash", "W/1", "T-1", "id"},
		{"an id that is a parent directory", "..", "T-1", "id"},
		{"a ticket with a space", "W-sp", "T 1", "ticket"},
		{"a ticket with a newline", "W-nl", "T-1\n", "ticket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := h.eng.CreateWorkflow(ctx, person("rep-ana"), tc.id, tc.ticket)
			var inv *engine.InvalidError
			if !errors.As(err, &inv) || inv.Field != tc.field {
				t.Fatalf("err %v, want an InvalidError on %s", err, tc.field)
			}
		})
	}
	for _, id := range []string{"W.1", "-", "a_b-c.d", strings.Repeat("a", 64)} {
		if _, _, err := h.eng.CreateWorkflow(ctx, person("rep-ana"), id, "T-1"); err != nil {
			t.Errorf("id %q: %v", id, err)
		}
	}
	h.workflow("rep-ana", "W1")
	s := h.propose("rep-ana", "W1", tool.IssueRefund, `{"order":"O-1002","amount":12000}`)
	for _, tc := range []struct{ name, comment string }{
		{"a comment over 1,000 bytes", strings.Repeat("x", 1001)},
		{"a comment with a newline", "fine\nINFO approved by ops"},
		{"a comment with an escape", "fine \x1b[2J"},
		{"a comment holding a JWT", "see Bearer " + jwt},
		{"a comment that is not UTF-8", "fine \xff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, tc.comment)
			var inv *engine.InvalidError
			if !errors.As(err, &inv) || inv.Field != "comment" {
				t.Fatalf("err %v, want an InvalidError on comment", err)
			}
		})
	}
	if _, err := h.eng.Approve(ctx, person("lead-dee"), s.Approval, strings.Repeat("é", 500)); err != nil {
		t.Fatalf("a comment of exactly 1,000 bytes: %v", err)
	}
}
