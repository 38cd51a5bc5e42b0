package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/sim/actorcheck"
)

// receiver is one system of record as the epoch test drives it: a token
// for one request (under key) and the request.
type receiver struct {
	name   string
	claims func(key string) credential.Claims
	send   func(token, key string) (*http.Request, error)
}

// TestRaisedEpochBites: the receivers keep the JWKS for up to 1 s, yet a
// token minted before POST /v1/credentials/epoch is refused by both the
// ledger and the order system (401 epoch_revoked) once their copy ages
// out. Each system is polled every few milliseconds with fresh pre-raise
// tokens (a token is single-use, so a reused one would be refused for
// another reason) until the refusal comes; the time it took is logged,
// not asserted: the bound is the max age, and the 5 s deadline only stops
// a hang.
func TestRaisedEpochBites(t *testing.T) {
	st, err := devstack.Start(context.Background(), devstack.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	order := devstack.FixtureOrders(time.Now())[0].ID
	receivers := []receiver{
		{"ledger", func(key string) credential.Claims {
			return credential.Claims{Audience: "ledger", Scope: "refund", Max: 100, Key: key, Call: actorcheck.RefundCall(order, 1)}
		}, func(token, key string) (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, st.Endpoints.Ledger+"/refunds", strings.NewReader(fmt.Sprintf(`{"order":%q,"amount":1}`, order)))
			if err == nil {
				r.Header.Set("Authorization", "Bearer "+token)
				r.Header.Set("Idempotency-Key", key)
			}
			return r, err
		}},
		{"order system", func(string) credential.Claims {
			return credential.Claims{Audience: "orders", Scope: "lookup", Call: actorcheck.OrderCall(actorcheck.ToolLookupOrder, order)}
		}, func(token, _ string) (*http.Request, error) {
			r, err := http.NewRequest(http.MethodGet, st.Endpoints.Orders+"/orders/"+order, nil)
			if err == nil {
				r.Header.Set("Authorization", "Bearer "+token)
			}
			return r, err
		}},
	}
	const polls, every = 1000, 5 * time.Millisecond // tokens enough for 5 s
	tokens := make([][]string, len(receivers))
	for i, rc := range receivers {
		for n := range polls + 1 {
			c := rc.claims(fmt.Sprintf("epoch-test-%d", n))
			c.Subject, c.Agent = "rep-ana", devstack.AgentID
			tok, err := st.Authority.Mint(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			tokens[i] = append(tokens[i], tok)
		}
		// Accepted before the raise: the receiver now holds epoch-1's key.
		if status, code := do(rc, tokens[i][0], "epoch-test-0"); status/100 != 2 {
			t.Fatalf("%s before the raise: %d %s", rc.name, status, code)
		}
	}

	raise(t, st)
	raised := time.Now()
	var wg sync.WaitGroup
	for i, rc := range receivers {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for n := 1; n <= polls; n++ {
				status, code := do(rc, tokens[i][n], fmt.Sprintf("epoch-test-%d", n))
				switch {
				case status == http.StatusUnauthorized && code == actorcheck.CodeEpochRevoked:
					t.Logf("%s: a pre-raise token was refused %v after the raise (poll %d)", rc.name, time.Since(raised).Round(time.Millisecond), n)
					return
				case status/100 != 2:
					t.Errorf("%s, %v after the raise: %d %s, want accepted or 401 epoch_revoked", rc.name, time.Since(raised), status, code)
					return
				}
				<-tick.C
			}
			t.Errorf("%s still accepted pre-raise tokens %v after the raise", rc.name, time.Since(raised))
		})
	}
	wg.Wait()
}

// do sends one request and returns its status and error code.
func do(rc receiver, token, key string) (int, string) {
	req, err := rc.send(token, key)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error.Code
}

// raise raises the credential epoch as the operator, through the API.
func raise(t *testing.T, st *devstack.Stack) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, st.Endpoints.Sidecar+"/v1/credentials/epoch", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+st.Tokens["ops-ida"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Epoch int }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || got.Epoch != 2 {
		t.Fatalf("POST /v1/credentials/epoch: %d, epoch %d, %v; want 200 and epoch 2", resp.StatusCode, got.Epoch, err)
	}
}
