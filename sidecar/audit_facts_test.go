package sidecar_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
)

// chained is an audit record as GET /v1/audit answers it.
type chained struct {
	Kind     string         `json:"kind"`
	Actor    string         `json:"actor"`
	Workflow string         `json:"workflow"`
	N        int            `json:"n"`
	Version  int            `json:"version"`
	Detail   map[string]any `json:"detail"`
}

// every audit record, once the fleet's sequencer has chained all of them
// (at once on bbolt).
func (e *env) chain(t *testing.T) []chained {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var v struct {
			OK          bool `json:"ok"`
			Unsequenced int  `json:"unsequenced"`
		}
		e.call(t, http.MethodGet, "/v1/audit/verify", "ops-ida", nil).decode(t, &v)
		if v.Unsequenced == 0 {
			if !v.OK {
				t.Fatal("the audit chain does not verify")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audit records still unsequenced after 30 s: is the sequencer running?", v.Unsequenced)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not a timed assertion
	}
	var page struct {
		Records []chained `json:"records"`
	}
	e.call(t, http.MethodGet, "/v1/audit?limit=1000", "ops-ida", nil).decode(t, &page)
	return page.Records
}

// Every fact of a call is in the hash chain, on either store: the
// workflow's opening (who, which agent and version, which ticket, the
// bounds), and for its step the bundle's digest and the decision log's id
// in the decision record, and the agent in the decision and the dispatch.
func TestEveryFactOfACallIsInTheChain(t *testing.T) {
	for _, backend := range []string{"bbolt", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			o := devstack.Options{}
			if backend == "postgres" {
				kek, err := credential.NewKeyEncryptionKey()
				if err != nil {
					t.Fatal(err)
				}
				o.StoreURL, o.KeyEncryptionKey = pgtest.URL(t), kek
			}
			e := start(t, o)
			e.call(t, http.MethodPost, "/v1/workflows", "rep-ana", map[string]any{
				"id": "W-facts", "ticket": "T-4711", "agent_version": "2.3.1", "bounds": map[string]any{"max_steps": 4},
			}).want(t, http.StatusCreated, "")
			r, _ := e.propose(t, "rep-ana", "W-facts", "issue_refund", refund("O-1001", 3000))
			r.want(t, http.StatusOK, "")
			// A call that opens its workflow (ticket on the step) records the
			// opening too.
			e.call(t, http.MethodPost, "/v1/workflows/W-opened/steps", "rep-ana", map[string]any{
				"ticket": "T-4712", "tool": "lookup_order", "args": map[string]any{"order": "O-1001"},
			}).want(t, http.StatusOK, "")
			var active struct {
				Digest string `json:"digest"`
			}
			e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &active)
			var log struct {
				Decisions []struct {
					ID string `json:"decision_id"`
				} `json:"decisions"`
			}
			e.call(t, http.MethodGet, "/v1/decisions?workflow=W-facts", "ops-ida", nil).decode(t, &log)
			if len(log.Decisions) != 1 || active.Digest == "" {
				t.Fatalf("decisions %+v, active digest %q", log.Decisions, active.Digest)
			}

			found := map[string]chained{}
			opened := false
			for _, rec := range e.chain(t) {
				if rec.Workflow == "W-facts" {
					found[rec.Kind] = rec
				}
				opened = opened || rec.Kind == "workflow" && rec.Workflow == "W-opened" && rec.Detail["ticket"] == "T-4712"
				if rec.Version != 1 {
					t.Errorf("a %s record of version %d, want 1 (RFC 8785)", rec.Kind, rec.Version)
				}
			}
			w, ok := found["workflow"]
			bounds, _ := w.Detail["bounds"].(map[string]any)
			if !ok || w.Actor != "rep-ana" || w.Detail["ticket"] != "T-4711" || w.Detail["agent"] != devstack.AgentID ||
				w.Detail["agent_version"] != "2.3.1" || bounds["max_steps"] != 4.0 || bounds["deadline"] == nil || bounds["max_spend"] == nil {
				t.Errorf("workflow record %+v", w)
			}
			d := found["decision"]
			if d.Detail["digest"] != active.Digest || d.Detail["decision_id"] != log.Decisions[0].ID ||
				d.Detail["agent"] != devstack.AgentID || d.Detail["agent_version"] != "2.3.1" {
				t.Errorf("decision record %+v; want digest %s, decision_id %s", d, active.Digest, log.Decisions[0].ID)
			}
			if !opened {
				t.Error("no workflow record for W-opened, opened by its first call")
			}
			if p := found["dispatch"]; p.Detail["agent"] != devstack.AgentID {
				t.Errorf("dispatch record %+v", p)
			}
		})
	}
}
