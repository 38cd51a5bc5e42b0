package ledger_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/ledger"
)

func TestFaultLoseResponse(t *testing.T) {
	e := start(t)
	if err := e.srv.SetFaults(ledger.Faults{LoseResponse: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := e.do("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30)
	if err == nil || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "EOF")) {
		t.Fatalf("err = %v, want the connection closed without an answer (EOF)", err)
	}
	if got := e.entries(); len(got) != 1 || got[0].Key != "K1" {
		t.Fatalf("entries %+v: the write must be committed before the response is lost", got)
	}
	if f := e.srv.Faults(); f.LoseResponse != 0 {
		t.Fatalf("counter not consumed: %+v", f)
	}
	// The retry with the same key learns what happened.
	r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30)
	if r.status != 200 || r.entry(t).ID != "L1" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
}

func TestFaultsAffectOnlyWrites(t *testing.T) {
	e := start(t)
	if r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30); r.status != 201 {
		t.Fatal(r.status, string(r.body))
	}
	if err := e.srv.SetFaults(ledger.Faults{LoseResponse: 1, LoseWrite: 1, WrongAmount: 1}); err != nil {
		t.Fatal(err)
	}
	// Reads and refusals are not writes: they leave the counters.
	e.must("GET", "/entries", "", "", "")
	e.must("GET", "/refunds?key=K1", "", "", "")
	e.must("POST", "/refunds", "", "K9", refund30)
	if f := e.srv.Faults(); f != (ledger.Faults{LoseResponse: 1, LoseWrite: 1, WrongAmount: 1}) {
		t.Fatalf("counters consumed by non-writes: %+v", f)
	}
	// A replay loses its answer, but is not a new write: lose_write and
	// wrong_amount stay pending.
	if _, err := e.do("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30); err == nil {
		t.Fatal("the replay's answer was not lost")
	}
	if f := e.srv.Faults(); f != (ledger.Faults{LoseWrite: 1, WrongAmount: 1}) {
		t.Fatalf("after a replay: %+v", f)
	}
	if n := len(e.entries()); n != 1 {
		t.Fatalf("%d entries", n)
	}
}

func TestFaultLoseWrite(t *testing.T) {
	e := start(t)
	if err := e.srv.SetFaults(ledger.Faults{LoseWrite: 1}); err != nil {
		t.Fatal(err)
	}
	r := e.must("POST", "/refunds", e.refundToken("WP/1", "O-1003", 1000), "WP/1", `{"order":"O-1003","amount":1000}`)
	if r.status != 201 || r.entry(t).ID != "L1" {
		t.Fatalf("lost write must still be acknowledged: %d %s", r.status, r.body)
	}
	if got := e.entries(); len(got) != 0 {
		t.Fatalf("entries %+v after a lost write", got)
	}
	if r := e.must("GET", "/refunds?key=WP/1", "", "", ""); r.status != 404 {
		t.Fatalf("the key of a lost write was kept: %d %s", r.status, r.body)
	}
	// The next entry does not reuse the lost one's id.
	r = e.must("POST", "/refunds", e.refundToken("K2", "O-1001", 3000), "K2", refund30)
	if r.status != 201 || r.entry(t).ID != "L2" {
		t.Fatalf("next: %d %s", r.status, r.body)
	}
}

func TestFaultWrongAmount(t *testing.T) {
	e := start(t)
	if err := e.srv.SetFaults(ledger.Faults{WrongAmount: 1}); err != nil {
		t.Fatal(err)
	}
	body := `{"order":"O-1001","amount":2000}`
	r := e.must("POST", "/refunds", e.refundToken("W0/2", "O-1001", 2000), "W0/2", body)
	if r.status != 201 || r.entry(t).Amount != 200 {
		t.Fatalf("wrong_amount: %d %s, want amount 200", r.status, r.body)
	}
	if got := e.entries(); len(got) != 1 || got[0].Amount != 200 {
		t.Fatalf("entries %+v", got)
	}
	// The key binds the requested parameters, so a retry replays.
	if r := e.must("POST", "/refunds", e.refundToken("W0/2", "O-1001", 2000), "W0/2", body); r.status != 200 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	// Reversals carry the reversed entry's amount and take no wrong_amount.
	if err := e.srv.SetFaults(ledger.Faults{WrongAmount: 1}); err != nil {
		t.Fatal(err)
	}
	tok := e.iss.Mint(t, "lead-dee", "ledger", "reverse", 50000, actorcheck.ReversalCall("L1"))
	r = e.must("POST", "/reversals", tok, "", `{"entry":"L1"}`)
	if r.status != 201 || r.entry(t).Amount != 200 || e.srv.Faults().WrongAmount != 1 {
		t.Fatalf("reversal under wrong_amount: %d %s, faults %+v", r.status, r.body, e.srv.Faults())
	}
	r = e.must("POST", "/refunds", e.refundToken("W0/3", "O-1001", 3000), "W0/3", refund30)
	if r.status != 201 || r.entry(t).Amount != 300 {
		t.Fatalf("second wrong_amount: %d %s", r.status, r.body)
	}
}

func TestFaultDelay(t *testing.T) {
	e := start(t)
	const d = 80 * time.Millisecond
	if err := e.srv.SetFaults(ledger.Faults{DelayMS: int(d / time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	r := e.must("POST", "/refunds", e.refundToken("K1", "O-1001", 3000), "K1", refund30)
	if took := time.Since(begin); r.status != 201 || took < d {
		t.Fatalf("%d after %v, want 201 after at least %v", r.status, took, d)
	}
	// The admin channel is not delayed, so a test can always switch it off.
	begin = time.Now()
	r = e.must("PUT", "/_sim/faults", "", "", `{}`)
	if took := time.Since(begin); r.status != 200 || took >= d {
		t.Fatalf("admin PUT: %d after %v", r.status, took)
	}
	// A client that gives up during the delay leaves nothing behind.
	if err := e.srv.SetFaults(ledger.Faults{DelayMS: 60_000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/refunds", strings.NewReader(refund30))
	req.Header.Set("Authorization", "Bearer "+e.refundToken("K2", "O-1001", 3000))
	req.Header.Set("Idempotency-Key", "K2")
	if _, err := e.client.Do(req); err == nil {
		t.Fatal("the delayed request answered before the client's deadline")
	}
	if n := len(e.entries()); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

func TestFaultsOverHTTP(t *testing.T) {
	e := start(t)
	r := e.must("PUT", "/_sim/faults", "", "", `{"lose_response":2,"lose_write":1,"wrong_amount":3,"delay_ms":0}`)
	if r.status != 200 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if f := e.srv.Faults(); f != (ledger.Faults{LoseResponse: 2, LoseWrite: 1, WrongAmount: 3}) {
		t.Fatalf("faults %+v", f)
	}
	r = e.must("GET", "/_sim/faults", "", "", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"lose_response":2`) {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	for _, body := range []string{`{"lose_write":-1}`, `{"lose_write":1.5}`, `{"drop_everything":1}`} {
		if r := e.must("PUT", "/_sim/faults", "", "", body); r.status != 422 {
			t.Errorf("%s: %d %s, want 422", body, r.status, r.body)
		}
	}
	if err := e.srv.SetFaults(ledger.Faults{LoseWrite: -1}); err == nil {
		t.Error("SetFaults accepted a negative counter")
	}
}
