package bench

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is one bench run. Its JSON is what `countersign bench --json`
// prints.
type Report struct {
	Machine Machine `json:"machine"`
	Params  Params  `json:"params"`
	Rows    []Row   `json:"rows"`
	// Ratios are countersign's done/s over the glue's, per agent count
	// (with Options.Baseline only).
	Ratios []Ratio `json:"ratios,omitempty"`
}

// Machine is where the run ran.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// Params are the run's parameters and how its workload was kept allowed.
type Params struct {
	Target          string  `json:"target"`
	Policy          string  `json:"policy"`
	Agents          []int   `json:"agents"`
	DurationSeconds float64 `json:"duration_seconds"`
	Baseline        bool    `json:"baseline"`
	Workload        string  `json:"workload"`
	Fsyncs          string  `json:"fsyncs"`
	// StoreLatencyMS is the round trip the bench's proxy added in front
	// of PostgreSQL (Options.StoreLatency); absent on bbolt.
	StoreLatencyMS *float64 `json:"store_latency_ms,omitempty"`
	Glue           string   `json:"glue,omitempty"`
}

// Row is one cell: a system with a number of agents.
type Row struct {
	System string `json:"system"` // "countersign" or "glue"
	// Sidecars is how many sidecars shared the store on PostgreSQL
	// (Options.Store); 0 for the single sidecar on bbolt.
	Sidecars int `json:"sidecars,omitempty"`
	Agents   int `json:"agents"`
	// Seconds is the cell's wall time, first request to last answer.
	Seconds float64 `json:"seconds"`
	// Requests = Done + Other: every step attempted, each counted once.
	Requests int `json:"requests"`
	Done     int `json:"done"`
	Other    int `json:"other"`
	// Outcomes counts the steps that were not done, by what happened.
	Outcomes   map[string]int `json:"outcomes"`
	DonePerSec float64        `json:"done_per_sec"`
	// Propose is the latency of the done steps' proposal (for the glue:
	// its order lookup, its decision and its ledger call).
	Propose Latency `json:"propose"`
	// CreatePropose is the done steps' workflow creation and proposal;
	// absent for the glue, which has no workflow.
	CreatePropose *Latency `json:"create_propose,omitempty"`
	// Commits are the bbolt commits per file over the cell (the orders
	// file less the bench's own order inserts); absent out of process.
	Commits map[string]uint64 `json:"commits,omitempty"`
	// Retries are the sidecars' write transactions run again after a
	// serialization conflict on PostgreSQL, summed over the sidecars;
	// absent on bbolt and out of process.
	Retries *uint64 `json:"retries,omitempty"`
	// RoundTripsPerCall and StatementsPerCall are the round trips and
	// the statements between the sidecars and PostgreSQL over the cell,
	// counted at the bench's proxy (package latency says what each is),
	// per done step: one governed call, its workflow's creation and its
	// proposal. They take in all the store traffic of the cell, the
	// sidecars' background work too. With Options.Store only;
	// StatementsPerCall is absent if a connection was encrypted.
	RoundTripsPerCall *float64 `json:"round_trips_per_call,omitempty"`
	StatementsPerCall *float64 `json:"statements_per_call,omitempty"`
	// DoneBySidecar counts the done steps per sidecar, in the order they
	// were started, with several sidecars only.
	DoneBySidecar []int `json:"done_by_sidecar,omitempty"`
	// The figures below are null when the stack runs out of process (or
	// when nothing was done: there is no step to divide by). FsyncsPerStep
	// is null on PostgreSQL too: its flushes are the server's, not counted.
	CommitsPerStep        *float64 `json:"commits_per_step"`
	FsyncsPerStep         *float64 `json:"fsyncs_per_step"`
	CPUSecondsPer1000Step *float64 `json:"cpu_seconds_per_1000_steps"`
}

// Latency is a pair of nearest-rank percentiles, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// Ratio compares the two systems at one agent count.
type Ratio struct {
	Agents      int     `json:"agents"`
	Countersign float64 `json:"countersign_done_per_sec"`
	Glue        float64 `json:"glue_done_per_sec"`
	Ratio       float64 `json:"ratio"`
}

// steps says what each countersign step sends.
func steps(o Options) string {
	if o.TwoRequests {
		return "create a workflow (POST /v1/workflows), then propose issue_refund of 1 cent in it: two requests"
	}
	return "propose issue_refund of 1 cent in a new workflow that the proposal opens (a ticket in its body): one request, so propose and create+propose time the same request"
}

func newReport(o Options, t *target) *Report {
	r := &Report{
		Machine: Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
			Platform: runtime.GOOS + "/" + runtime.GOARCH},
		Params: Params{
			Target: t.desc, Policy: t.revision, Agents: o.Agents, DurationSeconds: o.Duration.Seconds(), Baseline: o.Baseline,
			Workload: fmt.Sprintf("each agent: %s; "+
				"agents alternate %s, each on an order of its own (POST /_sim/orders, paid $1,000.00, "+
				"a fresh one every %s refunds) so no cap or approval threshold binds", steps(o), strings.Join(reps, "/"), thousands(RefundsPerOrder)),
			Fsyncs: "unknown: the stack runs out of process",
		},
	}
	if t.proxy != nil {
		ms := float64(o.StoreLatency) / float64(time.Millisecond)
		r.Params.StoreLatencyMS = &ms
	}
	switch {
	case t.shared:
		r.Params.Fsyncs = "not applicable (n/a): the sidecars' store is PostgreSQL, whose WAL flushes the server makes " +
			"and this process cannot count; commits are counted per sidecar handle and summed (the ledger's and the " +
			"order system's bbolt files are counted as commits, not fsyncs); CPU is this process's only, not the server's"
	case t.stack != nil:
		r.Params.Fsyncs = "2 per bbolt commit (data pages, then meta page); commits counted from each file's " +
			"transaction id (sidecar store, ledger, orders), less the bench's own order inserts"
	}
	if o.Baseline {
		r.Params.Glue = "OPA's own server (v1/server and plugin manager) in this process on loopback with the active bundle; " +
			"per call: the order system's GET /orders/{id} with an actor token minted for the lookup, " +
			"POST /v1/data/countersign/call/decision (the engine's input with that order, totals zero), then the ledger's " +
			"POST /refunds with an actor token from the stack's credential authority and an Idempotency-Key"
	}
	return r
}

// makeRow turns a cell's tally and counters on t into its row.
func makeRow(t *target, sys string, n int, x *tally, before, after counters) Row {
	secs := after.at.Sub(before.at).Seconds()
	row := Row{
		System: sys, Agents: n, Seconds: secs, Requests: x.requests, Done: x.done,
		Other: x.requests - x.done, Outcomes: x.problems, Propose: percentiles(x.propose),
	}
	if t.shared {
		row.Sidecars = len(t.sidecars)
	}
	if len(t.sidecars) > 1 {
		row.DoneBySidecar = make([]int, len(t.sidecars))
		for slot, d := range x.doneBy {
			row.DoneBySidecar[slot] = d
		}
	}
	if secs > 0 {
		row.DonePerSec = float64(x.done) / secs
	}
	if len(x.total) > 0 {
		l := percentiles(x.total)
		row.CreatePropose = &l
	}
	if t.stack == nil || x.done == 0 {
		return row
	}
	if t.shared {
		retries := after.retries - before.retries
		row.Retries = &retries
	}
	if t.proxy != nil {
		trips := float64(after.store.RoundTrips-before.store.RoundTrips) / float64(x.done)
		row.RoundTripsPerCall = &trips
		if after.store.Opaque == 0 {
			stmts := float64(after.store.Statements-before.store.Statements) / float64(x.done)
			row.StatementsPerCall = &stmts
		}
	}
	row.Commits = map[string]uint64{}
	var sum uint64
	for name, v := range after.commits {
		d := v - before.commits[name]
		if name == "orders" {
			d -= uint64(x.renewed)
		}
		row.Commits[name], sum = d, sum+d
	}
	perStep := float64(sum) / float64(x.done)
	cpu := (after.cpu - before.cpu).Seconds() * 1000 / float64(x.done)
	row.CommitsPerStep, row.CPUSecondsPer1000Step = &perStep, &cpu
	if !t.shared {
		fsyncs := 2 * perStep
		row.FsyncsPerStep = &fsyncs
	}
	return row
}

// percentiles are the nearest-rank p50 and p99 of samples.
func percentiles(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(float64(len(s))*p+0.999999) - 1 // ceil(p*n) - 1
		return float64(s[max(0, min(i, len(s)-1))]) / float64(time.Millisecond)
	}
	return Latency{P50: rank(0.50), P99: rank(0.99)}
}

// add appends row and reports it on progress.
func (r *Report) add(progress io.Writer, row Row) {
	r.Rows = append(r.Rows, row)
	fmt.Fprintf(progress, "%s: %d done, %d other in %.1f s\n", row.label(), row.Done, row.Other, row.Seconds)
}

// ratios pairs each agent count's countersign and glue rows.
func (r *Report) ratios() {
	glue := map[int]float64{}
	for _, row := range r.Rows {
		if row.System == "glue" {
			glue[row.Agents] = row.DonePerSec
		}
	}
	for _, row := range r.Rows {
		if g, ok := glue[row.Agents]; ok && row.System == "countersign" && g > 0 {
			r.Ratios = append(r.Ratios, Ratio{Agents: row.Agents, Countersign: row.DonePerSec, Glue: g, Ratio: row.DonePerSec / g})
		}
	}
}

// label names the row's cell: "countersign, 64 agents", or with a store
// on PostgreSQL "countersign, 2 sidecars, 64 agents".
func (row Row) label() string {
	switch row.Sidecars {
	case 0:
		return row.System + ", " + agents(row.Agents)
	case 1:
		return row.System + ", 1 sidecar, " + agents(row.Agents)
	default:
		return fmt.Sprintf("%s, %d sidecars, %s", row.System, row.Sidecars, agents(row.Agents))
	}
}

func agents(n int) string {
	if n == 1 {
		return "1 agent"
	}
	return fmt.Sprintf("%d agents", n)
}

// WriteText prints the report as the README's "Measured" table and its
// notes.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	m, p := r.Machine, r.Params
	fmt.Fprintf(&b, "countersign bench: %d CPUs, GOMAXPROCS %d, %s %s; %s; policy %s; agents %v, %s per cell\n",
		m.CPUs, m.GOMAXPROCS, m.Go, m.Platform, p.Target, p.Policy, p.Agents, time.Duration(p.DurationSeconds*float64(time.Second)))
	fmt.Fprintf(&b, "workload: %s\nfsyncs: %s\n", p.Workload, p.Fsyncs)
	if p.Glue != "" {
		fmt.Fprintf(&b, "glue: %s\n", p.Glue)
	}
	b.WriteString("\n| | done/s | propose p50 | propose p99 | create+propose p50 | create+propose p99 | store round trips/call | statements/call | commits/step | fsyncs/step | CPU s/1,000 steps | done | other |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		cp50, cp99 := "–", "–"
		if l := row.CreatePropose; l != nil {
			cp50, cp99 = ms(l.P50), ms(l.P99)
		}
		fsyncs := figure(row.FsyncsPerStep)
		if row.Sidecars > 0 {
			fsyncs = "n/a"
		}
		trips, stmts := "–", "–"
		if row.RoundTripsPerCall != nil {
			trips, stmts = fmt.Sprintf("%.1f", *row.RoundTripsPerCall), "unknown (TLS)"
		}
		if row.StatementsPerCall != nil {
			stmts = fmt.Sprintf("%.1f", *row.StatementsPerCall)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n",
			row.label(), row.DonePerSec, ms(row.Propose.P50), ms(row.Propose.P99), cp50, cp99, trips, stmts,
			figure(row.CommitsPerStep), fsyncs, figure(row.CPUSecondsPer1000Step), row.Done, row.Other)
	}
	r.writeNotes(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeNotes lists what was not done, the commits per file and the ratios.
func (r *Report) writeNotes(b *strings.Builder) {
	for _, row := range r.Rows {
		for _, k := range slices.Sorted(maps.Keys(row.Outcomes)) {
			fmt.Fprintf(b, "not done: %s: %d × %s\n", row.label(), row.Outcomes[k], k)
		}
	}
	for _, row := range r.Rows {
		if len(row.Commits) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(row.Commits)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, row.Commits[k]))
		}
		if row.Retries != nil {
			parts = append(parts, fmt.Sprintf("sidecar store retries %d", *row.Retries))
		}
		fmt.Fprintf(b, "commits: %s: %s for %d done steps", row.label(), strings.Join(parts, ", "), row.Done)
		if len(row.DoneBySidecar) > 0 {
			fmt.Fprintf(b, " (done by sidecar: %v)", row.DoneBySidecar)
		}
		b.WriteString("\n")
	}
	for _, q := range r.Ratios {
		fmt.Fprintf(b, "ratio countersign/glue, %s: %.0f / %.0f done/s = %.2f\n", agents(q.Agents), q.Countersign, q.Glue, q.Ratio)
	}
}

func ms(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func figure(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.2f", *v)
}

// thousands writes n with comma separators, as the README's tables do.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
