package reconcile_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/dispatch"
	"github.com/countersign/countersign/executor/money"
	"github.com/countersign/countersign/executor/reconcile"
	"github.com/countersign/countersign/executor/release"
	"github.com/countersign/countersign/executor/store"
	"github.com/countersign/countersign/executor/tool"
)

var t0 = time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)

// refund is a refund step of workflow wf (rep-ana's), keyed "k-<wf>-<n>".
func refund(wf string, n int, order string, amount money.Cents, status store.StepStatus) store.Step {
	s := store.Step{
		Workflow: wf, N: n, Tool: tool.IssueRefund, Args: tool.Args{Order: order, Amount: amount},
		Status: status, Key: key(wf, n), Created: t0,
	}
	if status.Spent() || status == store.StepCompensated {
		s.ReservedAt = t0.Add(time.Minute)
	}
	if status == store.StepDone || status == store.StepCompensated {
		s.Finished = t0.Add(2 * time.Minute)
	}
	return s
}

func key(wf string, n int) string { return "k-" + wf + "-" + strconv.Itoa(n) }

func reship(wf string, n int, order string, status store.StepStatus) store.Step {
	return store.Step{Workflow: wf, N: n, Tool: tool.ReshipOrder, Args: tool.Args{Order: order}, Status: status, Created: t0}
}

func refundEntry(id, k, order string, amount money.Cents) dispatch.Entry {
	return dispatch.Entry{ID: id, Kind: "refund", Key: k, Order: order, Amount: amount, By: "rep-ana", Agent: "agent", At: t0}
}

func external(id, order string, amount money.Cents, by string) dispatch.Entry {
	return dispatch.Entry{ID: id, Kind: "external", Order: order, Amount: amount, By: by, At: t0}
}

func reversal(id, of, order string, amount money.Cents) dispatch.Entry {
	return dispatch.Entry{ID: id, Kind: "reversal", Order: order, Amount: amount, Reverses: of, By: "lead-dee", Key: "rev-" + of, At: t0}
}

func approval(id string, s store.Step, amount money.Cents, status store.ApprovalStatus, retro bool) store.Approval {
	return store.Approval{
		ID: id, Workflow: s.Workflow, N: s.N, Tool: s.Tool, Args: tool.Args{Order: s.Args.Order, Amount: amount},
		Status: status, Retroactive: retro, Requester: "rep-ana", Created: t0, Expires: t0.Add(15 * time.Minute),
	}
}

func shipment(id, order, kind string) dispatch.Shipment {
	return dispatch.Shipment{ID: id, Kind: kind, Order: order, By: "x", At: t0}
}

func workflows(ids ...string) []store.Workflow {
	var out []store.Workflow
	for _, id := range ids {
		out = append(out, store.Workflow{ID: id, User: "rep-ana", Status: store.WorkflowDone})
	}
	return out
}

func ref(wf string, n int, order string) reconcile.StepRef {
	return reconcile.StepRef{Workflow: wf, N: n, Order: order}
}

func TestClassifyEdges(t *testing.T) {
	done120 := refund("W1", 1, "O-1001", 12000, store.StepDone)
	cases := []struct {
		name        string
		in          reconcile.Input
		limit       money.Cents
		matched     int
		want        reconcile.Findings
		explained   reconcile.Explained
		unexplained int
	}{
		{
			name:    "a done refund with its entry at the same amount matches",
			in:      reconcile.Input{Records: reconcile.Records{Steps: []store.Step{refund("W1", 1, "O-1001", 3000, store.StepDone)}}, Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 3000)}},
			matched: 1,
		},
		{
			name: "a done refund whose key the ledger lacks",
			in:   reconcile.Input{Records: reconcile.Records{Steps: []store.Step{refund("W1", 1, "O-1003", 1000, store.StepDone)}}},
			want: reconcile.Findings{AgentDoneLedgerMissing: []reconcile.MissingEntry{{StepRef: ref("W1", 1, "O-1003"), Amount: 1000, Key: key("W1", 1)}}},
		},
		{
			name: "a done refund recorded with another amount",
			in:   reconcile.Input{Records: reconcile.Records{Steps: []store.Step{refund("W0", 2, "O-1001", 2000, store.StepDone)}}, Entries: []dispatch.Entry{refundEntry("L4", key("W0", 2), "O-1001", 200)}},
			want: reconcile.Findings{AmountMismatch: []reconcile.AmountDifference{{StepRef: ref("W0", 2, "O-1001"), StepAmount: 2000, LedgerAmount: 200, Entry: "L4"}}},
		},
		{
			name: "an external entry is a finding; a reversal is not, and the reversed refund is explained",
			in: reconcile.Input{
				Records: reconcile.Records{Steps: []store.Step{refund("W1", 1, "O-1001", 3000, store.StepDone)}},
				Entries: []dispatch.Entry{
					refundEntry("L1", key("W1", 1), "O-1001", 3000),
					reversal("L2", "L1", "O-1001", 3000),
					external("L3", "O-1008", 5000, "finance-clerk"),
				},
			},
			want:      reconcile.Findings{LedgerEntryWithoutStep: []reconcile.UnclaimedEntry{{Entry: "L3", Kind: "external", Order: "O-1008", Amount: 5000, By: "finance-clerk"}}},
			explained: reconcile.Explained{Reversed: 1},
		},
		{
			name: "a reversed external entry has nothing left to classify",
			in: reconcile.Input{Entries: []dispatch.Entry{
				external("L1", "O-1002", 5000, "finance-clerk"), reversal("L2", "L1", "O-1002", 5000),
			}},
			explained: reconcile.Explained{Reversed: 1},
		},
		{
			name: "a refund entry whose key no step has",
			in:   reconcile.Input{Entries: []dispatch.Entry{refundEntry("L9", "k-lost", "O-1002", 700)}},
			want: reconcile.Findings{LedgerEntryWithoutStep: []reconcile.UnclaimedEntry{{Entry: "L9", Kind: "refund", Order: "O-1002", Amount: 700, By: "rep-ana", Key: "k-lost"}}},
		},
		{
			name: "an entry under the key of a step that records no effect names that step for adoption",
			in: reconcile.Input{
				Records: reconcile.Records{Steps: []store.Step{refund("W2", 1, "O-1002", 700, store.StepPending)}},
				Entries: []dispatch.Entry{refundEntry("L9", key("W2", 1), "O-1002", 700)},
			},
			want: reconcile.Findings{LedgerEntryWithoutStep: []reconcile.UnclaimedEntry{{
				Entry: "L9", Kind: "refund", Order: "O-1002", Amount: 700, By: "rep-ana", Key: key("W2", 1), Step: &reconcile.StepRef{Workflow: "W2", N: 1, Order: "O-1002"},
			}}},
		},
		{
			name: "a suppressed duplicate shares the key of the step that executed: one match, no finding",
			in: reconcile.Input{
				Records: reconcile.Records{Steps: []store.Step{
					refund("W1", 1, "O-1001", 3000, store.StepDone),
					func() store.Step {
						s := refund("W1", 2, "O-1001", 3000, store.StepSuppressed)
						s.Key = key("W1", 1)
						return s
					}(),
				}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 3000)},
			},
			matched: 1,
		},
		{
			name: "in flight, split by whether the ledger holds the key",
			in: reconcile.Input{
				Records: reconcile.Records{Steps: []store.Step{
					refund("WC", 1, "O-1007", 1500, store.StepStarted),
					refund("WD", 1, "O-1004", 1500, store.StepUnknown),
				}},
				Entries: []dispatch.Entry{refundEntry("L7", key("WC", 1), "O-1007", 1500)},
			},
			want: reconcile.Findings{
				InFlightLedgerHasIt:   []reconcile.InFlight{{StepRef: ref("WC", 1, "O-1007"), Amount: 1500, Status: store.StepStarted, Entry: "L7"}},
				InFlightLedgerLacksIt: []reconcile.InFlight{{StepRef: ref("WD", 1, "O-1004"), Amount: 1500, Status: store.StepUnknown}},
			},
		},
		{
			name: "held to the limit of the bundle that decided it: within it no finding, above it a finding naming it",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1", "W2"),
					Steps: []store.Step{refund("W1", 1, "O-1001", 7000, store.StepDone), refund("W2", 1, "O-1002", 8000, store.StepDone)},
					HeldTo: map[reconcile.StepRef]release.Held{
						ref("W1", 1, "O-1001"): {RefundAuto: 7500, Revision: "p4", Digest: "d4"},
						ref("W2", 1, "O-1002"): {RefundAuto: 7500, Revision: "p4", Digest: "d4"},
					}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 7000), refundEntry("L2", key("W2", 1), "O-1002", 8000)},
			},
			matched: 2,
			want: reconcile.Findings{RefundOverLimitWithoutApproval: []reconcile.OverLimit{{
				StepRef: ref("W2", 1, "O-1002"), Amount: 8000, Rep: "rep-ana", At: t0.Add(2 * time.Minute), Entry: "L2", Limit: 7500, Revision: "p4",
			}}},
		},
		{
			name: "a bundle the gate did not vouch for: held to the stricter of the strictest known and the designed limit, and the finding says why",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1", "W2"),
					Steps: []store.Step{refund("W1", 1, "O-1001", 6000, store.StepDone), refund("W2", 1, "O-1002", 4500, store.StepDone)},
					HeldTo: map[reconcile.StepRef]release.Held{
						ref("W1", 1, "O-1001"): {RefundAuto: 7500, Revision: "p2", Digest: "d2", Fallback: "p2 broke the glass"},
						ref("W2", 1, "O-1002"): {RefundAuto: 4000, Fallback: "no bundle named"},
					}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 6000), refundEntry("L2", key("W2", 1), "O-1002", 4500)},
			},
			matched: 2,
			want: reconcile.Findings{RefundOverLimitWithoutApproval: []reconcile.OverLimit{
				{StepRef: ref("W1", 1, "O-1001"), Amount: 6000, Rep: "rep-ana", At: t0.Add(2 * time.Minute), Entry: "L1", Limit: 5000, Revision: "p2", Note: "p2 broke the glass"},
				{StepRef: ref("W2", 1, "O-1002"), Amount: 4500, Rep: "rep-ana", At: t0.Add(2 * time.Minute), Entry: "L2", Limit: 4000, Note: "no bundle named"},
			}},
		},
		{
			name:    "above the limit without any approval: matched in the ledger and still a finding",
			in:      reconcile.Input{Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}}, Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)}},
			matched: 1,
			want: reconcile.Findings{RefundOverLimitWithoutApproval: []reconcile.OverLimit{{
				StepRef: ref("W1", 1, "O-1001"), Amount: 12000, Rep: "rep-ana", At: done120.Finished, Entry: "L1", Limit: reconcile.DefaultAutoLimit,
			}}},
		},
		{
			name: "above the limit with a used approval for exactly that call",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}, Approvals: []store.Approval{approval("AP-1", done120, 12000, store.ApprovalUsed, false)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)},
			},
			matched: 1,
		},
		{
			name: "a used approval for the call before an amendment does not count",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{func() store.Step { s := done120; s.Args.Amount = 45000; s.Approval = "AP-1"; return s }()},
					Approvals: []store.Approval{approval("AP-1", done120, 12000, store.ApprovalUsed, false)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 45000)},
			},
			matched: 1,
			want: reconcile.Findings{RefundOverLimitWithoutApproval: []reconcile.OverLimit{{
				StepRef: ref("W1", 1, "O-1001"), Amount: 45000, Rep: "rep-ana", At: done120.Finished, Entry: "L1", Approval: "AP-1", Limit: reconcile.DefaultAutoLimit,
			}}},
		},
		{
			name: "an approved but never used (prior) approval does not count",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}, Approvals: []store.Approval{approval("AP-1", done120, 12000, store.ApprovalApproved, false)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)},
			},
			matched: 1,
			want: reconcile.Findings{RefundOverLimitWithoutApproval: []reconcile.OverLimit{{
				StepRef: ref("W1", 1, "O-1001"), Amount: 12000, Rep: "rep-ana", At: done120.Finished, Entry: "L1", Limit: reconcile.DefaultAutoLimit,
			}}},
		},
		{
			name: "a lead's retroactive approval ratifies it",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}, Approvals: []store.Approval{approval("AP-7", done120, 12000, store.ApprovalApproved, true)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)},
			},
			matched:   1,
			explained: reconcile.Explained{Ratified: 1},
		},
		{
			name: "a retroactive approval that was rejected does not ratify",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}, Approvals: []store.Approval{approval("AP-7", done120, 12000, store.ApprovalRejected, true)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)},
			},
			matched: 1,
			want: reconcile.Findings{RefundOverLimitWithoutApproval: []reconcile.OverLimit{{
				StepRef: ref("W1", 1, "O-1001"), Amount: 12000, Rep: "rep-ana", At: done120.Finished, Entry: "L1", Limit: reconcile.DefaultAutoLimit,
			}}},
		},
		{
			name: "a reversed refund above the limit is explained, neither matched nor a finding",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000), reversal("L2", "L1", "O-1001", 12000)},
			},
			explained: reconcile.Explained{Reversed: 1},
		},
		{
			name: "a compensated step whose entry the ledger reversed",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{refund("W1", 1, "O-1001", 12000, store.StepCompensated)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000), reversal("L2", "L1", "O-1001", 12000)},
			},
			explained: reconcile.Explained{Reversed: 1},
		},
		{
			name: "a compensated step is never over the limit; without a reversal the ledger still agrees on the refund",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{refund("W1", 1, "O-1001", 12000, store.StepCompensated)}},
				Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)},
			},
			matched: 1,
		},
		{
			name:    "exactly at the limit is not above it",
			in:      reconcile.Input{Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{refund("W1", 1, "O-1001", 5000, store.StepDone)}}, Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 5000)}},
			matched: 1,
		},
		{
			name:    "the limit is the job's, not a bundle's",
			limit:   50000,
			in:      reconcile.Input{Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{done120}}, Entries: []dispatch.Entry{refundEntry("L1", key("W1", 1), "O-1001", 12000)}},
			matched: 1,
		},
		{
			name: "in flight above the limit: executed when the ledger has it, not when it lacks it",
			in: reconcile.Input{
				Records: reconcile.Records{Workflows: workflows("WA", "WB"), Steps: []store.Step{
					refund("WA", 1, "O-1001", 9000, store.StepStarted),
					refund("WB", 1, "O-1002", 9000, store.StepStarted),
				}},
				Entries: []dispatch.Entry{refundEntry("L1", key("WA", 1), "O-1001", 9000)},
			},
			want: reconcile.Findings{
				InFlightLedgerHasIt:   []reconcile.InFlight{{StepRef: ref("WA", 1, "O-1001"), Amount: 9000, Status: store.StepStarted, Entry: "L1"}},
				InFlightLedgerLacksIt: []reconcile.InFlight{{StepRef: ref("WB", 1, "O-1002"), Amount: 9000, Status: store.StepStarted}},
				RefundOverLimitWithoutApproval: []reconcile.OverLimit{{
					StepRef: ref("WA", 1, "O-1001"), Amount: 9000, Rep: "rep-ana", At: t0.Add(time.Minute), Entry: "L1", Limit: reconcile.DefaultAutoLimit,
				}},
			},
		},
		{
			name: "a denied refund above the limit executed nothing",
			in:   reconcile.Input{Records: reconcile.Records{Workflows: workflows("W1"), Steps: []store.Step{refund("W1", 1, "O-1001", 60000, store.StepDenied)}}},
		},
		{
			name: "shipments against done reship steps, per order",
			in: reconcile.Input{
				Records: reconcile.Records{Steps: []store.Step{
					reship("W1", 1, "O-1001", store.StepDone),    // matches S1
					reship("W2", 1, "O-1003", store.StepDone),    // the order system has none
					reship("W3", 1, "O-1002", store.StepUnknown), // not done: not counted
					reship("W4", 1, "O-1002", store.StepDenied),
				}},
				Shipments: []dispatch.Shipment{
					shipment("S1", "O-1001", "reship"),
					shipment("S2", "O-1004", "external"),
					shipment("S3", "O-1002", "reship"),
				},
			},
			want: reconcile.Findings{ShipmentCountMismatch: []reconcile.ShipmentDifference{
				{Order: "O-1002", Shipments: 1, Steps: 0},
				{Order: "O-1003", Shipments: 0, Steps: 1},
				{Order: "O-1004", Shipments: 1, Steps: 0},
			}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := reconcile.Classify(tc.in, tc.limit)
			if got := r.Count(reconcile.Matched); got != tc.matched {
				t.Errorf("matched %d, want %d", got, tc.matched)
			}
			if !reflect.DeepEqual(normalize(r.Findings), normalize(tc.want)) {
				t.Errorf("findings\n got %s\nwant %s", mustJSON(t, r.Findings), mustJSON(t, tc.want))
			}
			if r.Explained != tc.explained {
				t.Errorf("explained %+v, want %+v", r.Explained, tc.explained)
			}
			want := 0
			for _, c := range reconcile.Classes() {
				want += tc.want.Len(c)
				if c != reconcile.Matched && r.Count(c) != r.Findings.Len(c) {
					t.Errorf("%s: count %d but %d findings", c, r.Count(c), r.Findings.Len(c))
				}
			}
			if r.Unexplained != want {
				t.Errorf("unexplained %d, want %d", r.Unexplained, want)
			}
		})
	}
}

// normalize makes nil and empty lists compare equal.
func normalize(f reconcile.Findings) reconcile.Findings {
	var out reconcile.Findings
	if err := json.Unmarshal(must(json.Marshal(f)), &out); err != nil {
		panic(err)
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClassifyDeterministic: the report does not depend on the order the
// inputs arrive in, and ids sort by number (L2 before L10).
func TestClassifyDeterministic(t *testing.T) {
	var in reconcile.Input
	in.Workflows = workflows("W1", "W2", "W10")
	for i := 1; i <= 12; i++ {
		in.Entries = append(in.Entries, external("L"+strconv.Itoa(i), "O-1002", money.Cents(100*i), "finance-clerk"))
	}
	in.Steps = []store.Step{
		refund("W10", 1, "O-1001", 100, store.StepDone),
		refund("W2", 1, "O-1001", 100, store.StepDone),
		refund("W1", 2, "O-1001", 100, store.StepDone),
		refund("W1", 1, "O-1001", 100, store.StepDone),
	}
	in.Shipments = []dispatch.Shipment{shipment("S1", "O-1010", "external"), shipment("S2", "O-1002", "external"), shipment("S3", "O-999", "external")}
	first := mustJSON(t, reconcile.Classify(in, 0))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := in
		shuffled.Steps, shuffled.Entries, shuffled.Shipments = slices.Clone(in.Steps), slices.Clone(in.Entries), slices.Clone(in.Shipments)
		rng.Shuffle(len(shuffled.Steps), func(i, j int) { shuffled.Steps[i], shuffled.Steps[j] = shuffled.Steps[j], shuffled.Steps[i] })
		rng.Shuffle(len(shuffled.Entries), func(i, j int) { shuffled.Entries[i], shuffled.Entries[j] = shuffled.Entries[j], shuffled.Entries[i] })
		rng.Shuffle(len(shuffled.Shipments), func(i, j int) {
			shuffled.Shipments[i], shuffled.Shipments[j] = shuffled.Shipments[j], shuffled.Shipments[i]
		})
		if got := mustJSON(t, reconcile.Classify(shuffled, 0)); got != first {
			t.Fatalf("order-dependent report:\n%s\n%s", got, first)
		}
	}
	r := reconcile.Classify(in, 0)
	var ids []string
	for _, u := range r.Findings.LedgerEntryWithoutStep {
		ids = append(ids, u.Entry)
	}
	if want := []string{"L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9", "L10", "L11", "L12"}; !slices.Equal(ids, want) {
		t.Errorf("entry order %v, want %v", ids, want)
	}
	var missing []string
	for _, m := range r.Findings.AgentDoneLedgerMissing {
		missing = append(missing, m.Workflow+"/"+strconv.Itoa(m.N))
	}
	if want := []string{"W1/1", "W1/2", "W10/1", "W2/1"}; !slices.Equal(missing, want) {
		t.Errorf("step order %v, want %v", missing, want)
	}
	var orders []string
	for _, d := range r.Findings.ShipmentCountMismatch {
		orders = append(orders, d.Order)
	}
	if want := []string{"O-999", "O-1002", "O-1010"}; !slices.Equal(orders, want) {
		t.Errorf("order order %v, want %v", orders, want)
	}
}

// TestReportJSONShape: every class is present in classes and findings
// (with [] for none) and every failure class has a repair.
func TestReportJSONShape(t *testing.T) {
	var got struct {
		Classes     map[string]int              `json:"classes"`
		Findings    map[string]*json.RawMessage `json:"findings"`
		Repairs     map[string]reconcile.Repair `json:"repairs"`
		Unexplained *int                        `json:"unexplained"`
		At          *time.Time                  `json:"at"`
	}
	if err := json.Unmarshal(must(json.Marshal(reconcile.Classify(reconcile.Input{}, 0))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Classes) != 8 || len(got.Findings) != 8 || len(got.Repairs) != 7 {
		t.Errorf("classes %d, findings %d, repairs %d; want 8, 8, 7", len(got.Classes), len(got.Findings), len(got.Repairs))
	}
	for _, c := range reconcile.Classes() {
		if _, ok := got.Classes[string(c)]; !ok {
			t.Errorf("classes lacks %s", c)
		}
		if raw := got.Findings[string(c)]; raw == nil || string(*raw) != "[]" {
			t.Errorf("findings[%s] = %v, want []", c, raw)
		}
		rp, ok := got.Repairs[string(c)]
		if c == reconcile.Matched {
			if ok {
				t.Errorf("matched has a repair")
			}
			continue
		}
		if !ok || rp.Who == "" || rp.Action == "" {
			t.Errorf("repair of %s: %+v", c, rp)
		}
		if auto := c == reconcile.InFlightLedgerHasIt || c == reconcile.InFlightLedgerLacksIt; rp.Automatic != auto {
			t.Errorf("%s: automatic %v, want %v: only resuming in-flight work is safe without a person", c, rp.Automatic, auto)
		}
	}
	// People read the JSON too: classes come in report order.
	raw := string(must(json.Marshal(reconcile.Classify(reconcile.Input{}, 0).Classes)))
	last := -1
	for _, c := range reconcile.Classes() {
		i := strings.Index(raw, `"`+string(c)+`"`)
		if i < last {
			t.Errorf("classes out of report order: %s", raw)
			break
		}
		last = i
	}
	if got.Unexplained == nil || *got.Unexplained != 0 || got.At == nil {
		t.Errorf("unexplained %v, at %v", got.Unexplained, got.At)
	}
}
