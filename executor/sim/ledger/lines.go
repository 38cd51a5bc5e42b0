package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/sim/simhttp"
)

// lineBook books line-item refunds at the order system, which holds the
// order's lines and counts the units refunded (POST
// /orders/{id}/line-refunds). The order system checks the line exists,
// that the amount is its unit amount times the quantity and that the
// quantity is at most what is left, in one transaction of its own, and
// remembers the booking under the ledger's idempotency key, so a retry of
// the same refund does not count its units twice.
type lineBook struct {
	base string
	hc   *http.Client
}

func newLineBook(base string, hc *http.Client) *lineBook {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &lineBook{base: strings.TrimRight(base, "/"), hc: hc}
}

// book asks the order system to book q. Its refusals come back as the
// ledger's own answer with the order system's status and code; an order
// system that cannot be asked is 503 line_check_unavailable, and nothing
// is booked or entered.
func (b *lineBook) book(ctx context.Context, q refundRequest) error {
	body, err := json.Marshal(map[string]any{"line": q.Line, "quantity": q.Quantity, "amount": q.Amount, "key": q.Key})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/orders/"+url.PathEscape(q.Order)+"/line-refunds", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		return unavailable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return unavailable(err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode >= 500:
		return unavailable(fmt.Errorf("the order system answered %d", resp.StatusCode))
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
		return unavailable(fmt.Errorf("the order system answered %d without an error body", resp.StatusCode))
	}
	return simhttp.Errorf(resp.StatusCode, e.Error.Code, "the order system refused the line-item refund: %s", e.Error.Message)
}

func unavailable(err error) error {
	return simhttp.Errorf(http.StatusServiceUnavailable, CodeLineCheckUnavailable, "the order system could not check the line; retry later: %v", err)
}
