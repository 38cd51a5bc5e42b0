package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/sim/ledger"
	"github.com/countersign/countersign/executor/sim/orders"
	"github.com/countersign/countersign/executor/tool"
)

// glue is the baseline: the order looked up in the order system, an OPA
// server's REST decision on it, then a direct ledger call with a minted
// token and an idempotency key.
type glue struct {
	opa     string // base URL of the OPA server
	ledger  string
	minter  *credential.Authority
	manager *plugins.Manager
	http    *http.Server
}

var _ system = (*glue)(nil)

func (*glue) name() string { return "glue" }

// startGlue serves OPA's own REST API on loopback over the bundle the
// in-process sidecar has active.
func startGlue(ctx context.Context, t *target) (*glue, error) {
	st := t.stack
	b, err := bundle.NewCustomReader(bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(st.Policy.Active().Archive()), "")).Read()
	if err != nil {
		return nil, fmt.Errorf("bench: glue: read the active bundle: %w", err)
	}
	store := inmem.New()
	quiet := logging.NewNoOpLogger()
	m, err := plugins.New(nil, "countersign-bench-glue", store, plugins.InitBundles(map[string]*bundle.Bundle{"active": &b}),
		plugins.Logger(quiet), plugins.ConsoleLogger(quiet))
	if err != nil {
		return nil, fmt.Errorf("bench: glue: OPA plugin manager: %w", err)
	}
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("bench: glue: load the bundle into OPA: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("bench: glue: start OPA: %w", err)
	}
	g := &glue{ledger: st.Endpoints.Ledger, minter: st.Authority, manager: m}
	srv, err := server.New().WithStore(store).WithManager(m).Init(ctx)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("bench: glue: OPA server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.close()
		return nil, fmt.Errorf("bench: glue: listen for OPA: %w", err)
	}
	g.opa, g.http = "http://"+ln.Addr().String(), &http.Server{Handler: srv.Handler, ReadHeaderTimeout: 10 * time.Second}
	go g.http.Serve(ln)
	return g, nil
}

func (g *glue) close() {
	if g.http != nil {
		_ = g.http.Close()
	}
	g.manager.Stop(context.Background())
}

// opaInput is the call policy's input as the engine builds it
// (executor/policy callInput), with the totals the glue has no history
// for left at zero.
type opaInput struct {
	User struct {
		ID            string   `json:"id"`
		Role          string   `json:"role"`
		Region        string   `json:"region"`
		Scopes        []string `json:"scopes"`
		RefundCeiling int64    `json:"refund_ceiling"`
	} `json:"user"`
	Tool  tool.Name `json:"tool"`
	Args  tool.Args `json:"args"`
	Order struct {
		ID       string `json:"id"`
		Region   string `json:"region"`
		Customer string `json:"customer"`
		Paid     int64  `json:"paid"`
		Status   string `json:"status"`
	} `json:"order"`
	Totals struct {
		OrderRefunded int64 `json:"order_refunded"`
		RepDay        int64 `json:"rep_day"`
		AgentHour     int64 `json:"agent_hour"`
		OrderReships  int   `json:"order_reships"`
	} `json:"totals"`
}

func (a *agent) opaInput(o orders.Order) opaInput {
	var in opaInput
	in.User.ID, in.User.Role, in.User.Region = a.rep.ID, a.rep.Role, a.rep.Region
	in.User.Scopes, in.User.RefundCeiling = a.rep.Scopes, int64(a.rep.RefundCeiling)
	in.Tool, in.Args = tool.IssueRefund, tool.Args{Order: a.order, Amount: refundCents}
	in.Order.ID, in.Order.Region, in.Order.Customer = o.ID, o.Region, o.Customer
	in.Order.Paid, in.Order.Status = o.Paid, o.Status
	return in
}

// opaAnswer is OPA's REST answer for the decision document.
type opaAnswer struct {
	Result *struct {
		Decision string `json:"decision"`
		Rule     string `json:"rule"`
	} `json:"result"`
}

// step looks the order up, as the policy needs its region, payment and
// status and a team's glue has no other source for them, then asks OPA,
// then calls the ledger.
func (g *glue) step(ctx context.Context, t *target, a *agent) outcome {
	t0 := time.Now()
	o, problem := g.lookup(ctx, t, a)
	if problem != "" {
		return outcome{problem: problem}
	}
	var d opaAnswer
	status, err := t.post(ctx, g.opa+"/v1/data/countersign/call/decision", "", nil, map[string]any{"input": a.opaInput(o)}, &d)
	switch {
	case err != nil || status != http.StatusOK:
		return outcome{problem: "decision: " + describe(status, err, stepAnswer{})}
	case d.Result == nil:
		return outcome{problem: "decision: undefined"}
	case d.Result.Decision != "ALLOW":
		return outcome{problem: "decision: " + d.Result.Decision + " " + d.Result.Rule}
	}
	key := a.nextID()
	args := tool.Args{Order: a.order, Amount: refundCents}
	token, err := g.minter.Mint(ctx, credential.Claims{
		Subject: a.rep.ID, Agent: devstack.AgentID, Audience: ledger.Audience, Scope: ledger.ScopeRefund,
		Max: a.rep.RefundCeiling, Call: tool.CallHash(tool.IssueRefund, args), Key: key,
	})
	if err != nil {
		return outcome{problem: "mint: no token"}
	}
	var e struct {
		Error *errorAnswer `json:"error"`
	}
	status, err = t.post(ctx, g.ledger+"/refunds", token, http.Header{ledger.HeaderIdempotencyKey: {key}}, args, &e)
	if err != nil || status != http.StatusCreated {
		return outcome{problem: "ledger: " + describe(status, err, stepAnswer{Error: e.Error})}
	}
	return outcome{propose: time.Since(t0)}
}

// lookup reads a's order from the order system (GET /orders/{id}) with
// an actor token minted for that one lookup, as the sidecar's dispatcher
// does; a problem names what went wrong.
func (g *glue) lookup(ctx context.Context, t *target, a *agent) (orders.Order, string) {
	token, err := g.minter.Mint(ctx, credential.Claims{
		Subject: a.rep.ID, Agent: devstack.AgentID, Audience: orders.Audience, Scope: orders.ScopeLookup,
		Max: a.rep.RefundCeiling, Call: tool.CallHash(tool.LookupOrder, tool.Args{Order: a.order}),
	})
	if err != nil {
		return orders.Order{}, "mint: no token"
	}
	var ans struct {
		orders.Order
		Error *errorAnswer `json:"error"`
	}
	status, err := t.get(ctx, t.orders+"/orders/"+url.PathEscape(a.order), token, &ans)
	if err != nil || status != http.StatusOK {
		return orders.Order{}, "lookup: " + describe(status, err, stepAnswer{Error: ans.Error})
	}
	return ans.Order, ""
}
