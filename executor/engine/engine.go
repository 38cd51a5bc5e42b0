package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/policy"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

// Controls are the engine's safety controls, each of which a test removes to
// show it is load-bearing. DefaultControls turns all of them on; no flag,
// file or endpoint can change them.
type Controls struct {
	// IdempotencyKeys sends the ledger one stable key per logical refund;
	// removed, every attempt sends a fresh key.
	IdempotencyKeys bool
	// RunDedupe suppresses the same call proposed again in one workflow.
	RunDedupe bool
	// WriteAhead marks a step started, with its baseline, before dispatch.
	WriteAhead bool
	// BindApproval consumes an approval only for the exact call it names.
	BindApproval bool
	// Cumulative counts prior refunds on the order toward the approval
	// threshold (and the amount paid); removed, each call stands alone.
	Cumulative bool
	// StrictSchema refuses unknown fields in tool arguments; removed, a
	// model-written approved_by is taken as an approval.
	StrictSchema bool
	// DownstreamCeiling puts the rep's refund ceiling in the actor token;
	// removed, the token carries no effective ceiling.
	DownstreamCeiling bool
	// CheckSwitchAtExecution reads the tool's switch at the moment of
	// effect; removed, it is read only when the step is first proposed.
	CheckSwitchAtExecution bool
	// SingleUseTokens has the systems of record accept each actor token's
	// jti once; removed, a captured token can be replayed. The receivers
	// enforce it, not the engine: whoever starts them passes it on.
	SingleUseTokens bool
	// ReshipHistory tells the policy how often the order was already
	// reshipped in any workflow (totals.order_reships); removed, the count
	// is always 0 and every reship looks like the first.
	ReshipHistory bool
	// NarrowDelegation runs each step under the narrower of the workflow's
	// delegation and the presenting token's, and holds steps past the
	// delegation's expiry; removed, the delegation copied at creation is
	// used forever.
	NarrowDelegation bool
	// ResolveByReference resolves a reshipment whose outcome was not
	// recorded by the reference it carries; removed, by counting the
	// order's shipments against the baseline, which cannot tell its own
	// shipment from another workflow's.
	ResolveByReference bool
	// RestrictedBuiltins compiles every bundle under a capabilities
	// allowlist (no network, clock, randomness); removed, a bundle may call
	// http.send or read the wall clock. The policy engine enforces it:
	// whoever builds it passes it on.
	RestrictedBuiltins bool
	// Breaker counts each agent version's semantic failures per tool and,
	// over the bundle's thresholds, runs that tool for that version in
	// approval_only; removed, an agent that keeps failing keeps its
	// autonomy.
	Breaker bool
	// LinePricing prices a line-item refund from the order record: the
	// amount is the line's unit amount times the quantity, an amount the
	// agent sends beside them must equal it (ErrAmountMismatch), the
	// policy sees the line (R12) and the actor token binds line and
	// quantity, which the ledger books against the order's line. Removed,
	// the engine is the first wave's: it drops the line and quantity and
	// refunds the amount the agent asked for on the order, which nobody
	// then checks against any line.
	LinePricing bool
	// ApprovalRoleFloor lets only a lead approve or reject, and never the
	// requester (the same person by identity.Same, however the sub is
	// spelled), checked in Go before the active bundle's approver rules,
	// which then only narrow (region, limit, expiry). Removed, the
	// approver rules alone decide: a bundle that accepts a rep lets her
	// approve another rep's refund, and it pays.
	ApprovalRoleFloor bool
	// ReferenceKeys has the order system treat a reshipment's reference as
	// its idempotency key: a request under a reference already shipped
	// answers that shipment; removed, every accepted request ships. The
	// receivers enforce it, not the engine: whoever starts them passes it
	// on (as SingleUseTokens).
	ReferenceKeys bool
	// EffectFence takes an effect as absent only once no request that
	// could carry it can still land: every actor token minted for the step
	// has expired (plus the receivers' clock skew) and the lookup by key or
	// reference still finds nothing. Until then the step keeps its
	// reservation, and a 5xx, a timeout or a refusal of a later attempt
	// releases nothing (fence.go). Removed, the engine is the second
	// wave's: absent on lookup is taken at once, and a 5xx releases the
	// reservation.
	EffectFence bool
	// LeaseFencing checks, in every write of a step, the fencing number of
	// the workflow's lease this sidecar took (lease.go), so a sidecar held
	// up past its lease cannot overwrite what the one that took the
	// workflow over recorded. Removed, step writes do not check it.
	// Without Options.Leases there is nothing to check.
	LeaseFencing bool
	// TwoPersonLoosening has a bundle go live on one operator only when
	// it is a pure tightening of the active one (the same rules, the same
	// data keys, limits moved the tightening way); anything else waits
	// for a second operator. Removed, only a declared limit change that
	// loosens needs two, so a new allow rule goes live on one. The policy
	// engine enforces it: whoever builds it passes it on.
	TwoPersonLoosening bool
}

// DefaultControls is the designed system: every control on.
func DefaultControls() Controls {
	return Controls{
		IdempotencyKeys: true, RunDedupe: true, WriteAhead: true, BindApproval: true,
		Cumulative: true, StrictSchema: true, DownstreamCeiling: true, CheckSwitchAtExecution: true,
		SingleUseTokens: true, ReshipHistory: true, NarrowDelegation: true, ResolveByReference: true, RestrictedBuiltins: true,
		Breaker: true, LinePricing: true, ApprovalRoleFloor: true, ReferenceKeys: true, EffectFence: true, LeaseFencing: true,
		TwoPersonLoosening: true,
	}
}

// Policy is the active bundle as the engine uses it.
type Policy interface {
	Decide(ctx context.Context, in policy.Input) (policy.Result, error)
	CheckApprover(ctx context.Context, in policy.ApproverInput) (policy.Refusal, error)
	Limits() (policy.Limits, error)
	// Autonomy is the active bundle's default modes and breaker
	// thresholds.
	Autonomy() (policy.Autonomy, error)
	Revision() string
	// Active is the active bundle (nil: none), whose digest the decision
	// log records.
	Active() *policy.Bundle
}

// Actor is the rep whose delegation an effect uses.
type Actor struct {
	Rep     string
	Ceiling money.Cents
}

// Call is one effect to dispatch.
type Call struct {
	Tool tool.Name
	Args tool.Args
	// Key is the ledger's idempotency key ("" for the order system).
	Key string
	// Reference names a reshipment ("" for other tools): the order system
	// stores it with the shipment, and ShipmentByReference finds it.
	Reference string
	// FreshKeyPerAttempt sends a new key on every attempt. Only the engine
	// with its IdempotencyKeys control removed sets it.
	FreshKeyPerAttempt bool
	// NotAfter is the step's token deadline: no actor token minted for
	// the call may expire after it (fence.go).
	NotAfter time.Time
}

// Systems is what the engine needs from the systems of record. Errors from
// Execute are classified by the implementation: *Refused when the system
// said no (never retried), ErrOutcomeUnknown when the effect may or may not
// have happened, anything else when nothing happened (ErrUnavailable).
type Systems interface {
	// Order reads the order record; ErrOrderNotFound when there is none.
	Order(ctx context.Context, as Actor, order string) (policy.Order, error)
	// Shipments counts the order's shipments (the reship baseline).
	Shipments(ctx context.Context, order string) (int, error)
	// RefundByKey finds the ledger entry made with an idempotency key.
	RefundByKey(ctx context.Context, key string) (json.RawMessage, bool, error)
	// ShipmentByReference finds the order's shipment made under a
	// reference.
	ShipmentByReference(ctx context.Context, order, ref string) (json.RawMessage, bool, error)
	// Execute performs the call with a fresh actor token per attempt.
	Execute(ctx context.Context, as Actor, c Call) (json.RawMessage, error)
	// Reverse posts a reversal of a ledger entry (idempotent by key).
	Reverse(ctx context.Context, as Actor, entry, key string) (json.RawMessage, error)
}

// Refused is a system of record refusing a call (a 4xx with its reason).
type Refused struct {
	Status  int
	Code    string
	Message string
}

func (e *Refused) Error() string {
	return "refused by the system of record: " + e.Code + ": " + e.Message
}

// Errors a Systems implementation returns.
var (
	ErrOutcomeUnknown = errors.New("outcome unknown: the call was sent and no answer came back")
	ErrOrderNotFound  = errors.New("order not found")
)

// Options wire an Engine. Store, Policy and Systems are required.
type Options struct {
	Store   *store.DB
	Policy  Policy
	Systems Systems
	// Clock tells the time; the drill and the tests inject a simulated one.
	// Nil means the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
	// Agent is the agent's id, the act.sub of every actor token.
	Agent string
	// Controls default to DefaultControls when left zero.
	Controls *Controls
	// Failpoint, when set, is called at after_open (inside the transaction
	// that opens a workflow with its first step, before it commits),
	// before_dispatch, after_dispatch and after_record; returning
	// ErrCrashed stops the step there as a crash would. Production leaves
	// it nil.
	Failpoint func(point string) error
	// Observer receives what happened, for metrics. Optional.
	Observer Observer
	// Notifier is told of each approval transition once it has committed
	// (package notify posts them to a webhook). Optional.
	Notifier Notifier
	// Audit records every decision, approval transition, dispatch, result,
	// switch change and compensation in the same transaction as the change.
	// Optional only for unit tests.
	Audit *audit.Log
	// Follow, when set, is for a store that several sidecars share: every
	// decision transaction reads the store's active bundle digest, and
	// when it is not the bundle Policy holds, the transaction is dropped,
	// Follow loads the store's active bundle into Policy, and the decision
	// is made again. So no decision is made under a bundle another
	// sidecar superseded before the decision committed. Nil (one sidecar,
	// which activates its bundles itself): no check.
	Follow func(ctx context.Context) error
	// PollChanges, when positive, is how often Await reads the workflow
	// again while it waits, for a store that several sidecars share: a
	// change committed by another sidecar wakes no reader here. Zero: only
	// this engine's own commits wake readers.
	PollChanges time.Duration
	// Leases, when set, is for a store that several sidecars share: a
	// workflow is driven by one of them at a time, under a lease in the
	// store (lease.go). Nil (one sidecar): the in-process locks suffice.
	Leases *Leases
	// TokenTTL is the longest life of an actor token minted for a step's
	// effect: the step's token deadline is set this far ahead (or the
	// active bundle's token_ttl_seconds, when shorter). Default
	// DefaultTokenTTL. The minter's own TTL should be the same.
	TokenTTL time.Duration
	// ReceiverSkew is how far the systems of record's clocks may be
	// behind this sidecar's: a token is taken to be able to land until its
	// exp plus this. Default DefaultReceiverSkew.
	ReceiverSkew time.Duration
}

// DefaultTokenTTL is Options.TokenTTL when left zero: short, because a
// step whose effect is not found is taken as absent only after it.
const DefaultTokenTTL = 15 * time.Second

// DefaultReceiverSkew is Options.ReceiverSkew when left zero: the skew
// the shipped receivers allow a minter's clock (an iat up to 5 s ahead).
const DefaultReceiverSkew = 5 * time.Second

// Observer is told of each outcome as it is recorded.
type Observer interface {
	Decided(d store.Decision)
	StepFinished(s store.Step, took time.Duration)
	ApprovalChanged(a store.Approval)
	// DispatchFailed is told the tool and one of DispatchClasses.
	DispatchFailed(tool tool.Name, class string)
	// BreakerTripped is told once per trip, after it is durable.
	BreakerTripped(b store.Breaker)
}

// Notifier is told of each approval that changed, after the change has
// committed: requested (pending), approved, rejected, expired, void or
// used. It is called on the goroutine that made the change, a lead's
// approve included, so it must return at once: it queues, it never sends.
type Notifier interface {
	ApprovalChanged(a store.Approval)
}

// The classes of dispatch errors Observer.DispatchFailed is told.
const (
	// DispatchRefused: the system of record refused the call (a Refused).
	DispatchRefused = "refused"
	// DispatchOutcomeUnknown: the call may or may not have taken effect.
	DispatchOutcomeUnknown = "outcome_unknown"
	// DispatchTransient: the call failed before it could take effect.
	DispatchTransient = "transient"
	// DispatchReversal: a compensating reversal of a refund failed.
	DispatchReversal = "reversal"
)

// DispatchClasses lists every class, so that a metric can show each at
// zero before the first error.
func DispatchClasses() []string {
	return []string{DispatchRefused, DispatchOutcomeUnknown, DispatchTransient, DispatchReversal}
}

type nopObserver struct{}

func (nopObserver) Decided(store.Decision)                 {}
func (nopObserver) StepFinished(store.Step, time.Duration) {}
func (nopObserver) ApprovalChanged(store.Approval)         {}
func (nopObserver) DispatchFailed(tool.Name, string)       {}
func (nopObserver) BreakerTripped(store.Breaker)           {}

// Engine runs workflows. It is safe for concurrent use; steps of one
// workflow run one at a time.
type Engine struct {
	db       *store.DB
	policy   Policy
	systems  Systems
	clock    clock.Clock
	log      *slog.Logger
	agent    string
	controls Controls
	fail     func(string) error
	obs      Observer
	notify   Notifier
	audit    *audit.Log
	locks    workflowLocks
	changes  changes
	follow   func(context.Context) error
	poll     time.Duration
	leases   *Leases
	tokenTTL time.Duration
	skew     time.Duration
	// releasing counts the lease deletions under way (lease.go).
	releasing sync.WaitGroup
	// heldMu guards held, the leases this sidecar holds (for the fence
	// its writes check), and awaiting, per workflow held, the earliest
	// time a step left waiting may be resolved (for parking the lease).
	heldMu   sync.Mutex
	held     map[string]taking
	awaiting map[string]time.Time
}

// New returns an engine over opts.
func New(opts Options) *Engine {
	e := &Engine{
		db: opts.Store, policy: opts.Policy, systems: opts.Systems, clock: opts.Clock,
		log: opts.Logger, agent: opts.Agent, fail: opts.Failpoint, obs: opts.Observer, notify: opts.Notifier, audit: opts.Audit,
		controls: DefaultControls(), follow: opts.Follow, poll: opts.PollChanges,
		tokenTTL: opts.TokenTTL, skew: opts.ReceiverSkew,
		held: map[string]taking{}, awaiting: map[string]time.Time{},
	}
	if e.tokenTTL <= 0 {
		e.tokenTTL = DefaultTokenTTL
	}
	if e.skew <= 0 {
		e.skew = DefaultReceiverSkew
	}
	if opts.Controls != nil {
		e.controls = *opts.Controls
	}
	if e.clock == nil {
		e.clock = clock.Wall{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.log = e.log.With("component", "engine")
	if e.agent == "" {
		e.agent = "support-agent"
	}
	if e.fail == nil {
		e.fail = func(string) error { return nil }
	}
	if e.obs == nil {
		e.obs = nopObserver{}
	}
	if e.notify == nil {
		e.notify = nopObserver{}
	}
	if opts.Leases != nil {
		l := *opts.Leases
		if l.TTL <= 0 {
			l.TTL = DefaultLeaseTTL
		}
		if l.RenewEvery <= 0 {
			l.RenewEvery = l.TTL / 3
		}
		if l.Holder == "" {
			l.Holder = NewHolder()
		}
		e.leases = &l
	}
	return e
}

// approvalsChanged tells the observer and the notifier of approvals whose
// change has committed.
func (e *Engine) approvalsChanged(as ...store.Approval) {
	for _, a := range as {
		e.obs.ApprovalChanged(a)
		e.notify.ApprovalChanged(a)
	}
}

// auditTx appends an audit record inside tx, so it commits with the change
// it records or not at all.
func (e *Engine) auditTx(tx *store.Tx, r audit.Record) error {
	_, err := e.appendAudit(tx, r)
	return err
}

// appendAudit is auditTx returning the record as appended: its id on
// bbolt, its pending number on a shared store (audit.Log.Append); the zero
// record without an audit log.
func (e *Engine) appendAudit(tx *store.Tx, r audit.Record) (audit.Record, error) {
	if e.audit == nil {
		return audit.Record{}, nil
	}
	if r.At.IsZero() {
		r.At = e.clock.Now()
	}
	return e.audit.Append(tx, r)
}

// stepRecord is an audit record about step s.
func stepRecord(kind audit.Kind, actor string, s store.Step, detail map[string]any) audit.Record {
	return audit.Record{Kind: kind, Actor: actor, Workflow: s.Workflow, N: s.N, Tool: string(s.Tool),
		Args: tool.Canonical(s.Tool, s.Args), Detail: detail}
}

func approvalRecord(actor string, a store.Approval) audit.Record {
	detail := map[string]any{"approval": a.ID, "status": string(a.Status),
		"call_hash": a.CallHash, "retroactive": a.Retroactive, "expires": a.Expires.UTC().Format(time.RFC3339)}
	if a.Comment != "" {
		detail["comment"] = a.Comment
	}
	return audit.Record{Kind: audit.KindApproval, Actor: actor, Workflow: a.Workflow, N: a.N, Tool: string(a.Tool),
		Args: tool.Canonical(a.Tool, a.Args), Detail: detail}
}

// RecordEvent appends an audit record of something that happened outside
// the engine's own transactions (an epoch raise, an alert).
func (e *Engine) RecordEvent(ctx context.Context, r audit.Record) error {
	return e.db.Update(func(tx *store.Tx) error { return e.auditTx(tx, r) })
}
