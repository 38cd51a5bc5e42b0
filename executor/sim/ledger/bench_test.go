package ledger_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/executor/clock"
	"github.com/countersign/countersign/executor/sim/actorcheck"
	"github.com/countersign/countersign/executor/sim/ledger"
)

// BenchmarkRefund is one refund over loopback: real HTTP with a kept-alive
// connection, a real EdDSA token verification, a keyed insert in bbolt.
// Tokens are minted before the timer starts (minting is the sidecar's cost).
func BenchmarkRefund(b *testing.B) {
	for _, c := range []struct {
		name   string
		noSync bool
		maxAge time.Duration
	}{
		{"fsync/jwks-max-age=1s", false, time.Second},
		{"nosync/jwks-max-age=1s", true, time.Second},
		{"nosync/jwks-max-age=0", true, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := start(b, func(o *ledger.Options) {
				o.NoSync, o.JWKSMaxAge = c.noSync, c.maxAge
				o.Clock = nil // real time: the tokens are minted now
			})
			e.iss.Clock = clock.Wall{}
			body := []byte(refund30)
			tokens := make([]string, b.N)
			for i := range tokens {
				tokens[i] = "Bearer " + e.iss.MintWith(b, "rep-ana", "ledger", "refund", 50000, actorcheck.RefundCall("O-1001", 3000),
					map[string]any{"key": fmt.Sprintf("bench-%d", i)})
			}
			client := &http.Client{Timeout: 10 * time.Second}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				req, _ := http.NewRequest("POST", e.url+"/refunds", bytes.NewReader(body))
				req.Header.Set("Authorization", tokens[i])
				req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", i))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
