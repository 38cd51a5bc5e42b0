package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/countersign/countersign/executor/store"
)

// postedKey is the meta key of the last checkpoint position the sink
// acknowledged.
const postedKey = "audit_checkpoint_posted"

// Checkpointer signs checkpoints (Log.Checkpoint) for one sidecar and,
// with URL, posts each to an HTTP sink outside the sidecar's reach.
//
// It runs on its own goroutine and never stands in a call's way: the
// store is its outbox. A checkpoint is stored when signed; the poster
// sends the stored checkpoints the sink has not acknowledged (a 2xx), in
// position order, at most PostBatch per look, and on a failure waits
// before trying again, doubling the wait up to MaxBackoff. Nothing is
// queued in memory, so a sink that is down for a day costs nothing but
// the retries, and a restart resumes where the sink left off (the
// position it acknowledged is kept in the store). Delivery is at least
// once: a sink deduplicates by position.
type Checkpointer struct {
	Log    *Log
	DB     *store.DB
	Signer Signer
	Rule   CheckpointRule
	// Holder names this sidecar in the sequencer lease (a fleet).
	Holder string
	// Look is how often it looks whether a checkpoint is due and the sink
	// is behind; default DefaultCheckpointLook.
	Look time.Duration
	// URL is the sink; "" posts nothing.
	URL string
	// Client posts; default a client with a 10 s timeout.
	Client *http.Client
	// MaxBackoff caps the wait after failed posts; default 5 minutes.
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

// Defaults of Checkpointer.
const (
	DefaultCheckpointLook = time.Second
	PostBatch             = 100
)

// Run checkpoints and posts until ctx ends.
func (c Checkpointer) Run(ctx context.Context) {
	if c.Look <= 0 {
		c.Look = DefaultCheckpointLook
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(c.Look)
	defer t.Stop()
	registered := false
	var backoff time.Duration
	var retryAt time.Time
	for {
		if !registered {
			if err := RegisterKey(c.DB, c.Signer); err != nil {
				c.Logger.Warn("audit checkpoints", "err", err)
			} else {
				registered = true
			}
		}
		// The lease the sequencer itself takes: a sidecar that signs and
		// then stops holds up the fleet's sequencing no longer than that.
		cp, held, err := c.Log.Checkpoint(c.DB, c.Signer, c.Rule, c.Holder, 10*DefaultSequenceEvery)
		switch {
		case err != nil:
			c.Logger.Warn("audit checkpoints", "err", err)
		case cp != nil:
			c.Logger.Debug("audit checkpoint signed", "position", cp.Position, "head", cp.Head, "kid", cp.KeyID)
		}
		if c.URL != "" && held && !time.Now().Before(retryAt) {
			if err := c.post(ctx); err != nil {
				backoff = min(max(2*backoff, c.Look), c.MaxBackoff)
				retryAt = time.Now().Add(backoff)
				// Not the URL: it may hold the sink's credential.
				c.Logger.Warn("audit checkpoint sink (--audit-checkpoint-url): will retry; the checkpoints wait in the store meanwhile",
					"err", err, "retry_in", backoff.String())
			} else {
				backoff = 0
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// post sends up to PostBatch checkpoints the sink has not acknowledged,
// in order, stopping at the first failure.
func (c Checkpointer) post(ctx context.Context) error {
	var acked uint64
	err := c.DB.View(func(tx *store.Tx) error {
		acked = 0
		if raw := tx.Meta(postedKey); raw != nil {
			n, err := strconv.ParseUint(string(raw), 10, 64)
			if err != nil {
				return fmt.Errorf("the posted position %q: %w", raw, err)
			}
			acked = n
		}
		return nil
	})
	if err != nil {
		return err
	}
	cps, err := Checkpoints(c.DB, acked)
	if err != nil {
		return err
	}
	for _, cp := range cps[:min(len(cps), PostBatch)] {
		if err := c.send(ctx, cp); err != nil {
			return err
		}
		pos := []byte(strconv.FormatUint(cp.Position, 10))
		if err := c.DB.Update(func(tx *store.Tx) error { return tx.PutMeta(postedKey, pos) }); err != nil {
			return err
		}
	}
	return nil
}

// send posts one checkpoint as JSON.
func (c Checkpointer) send(ctx context.Context, cp Checkpoint) error {
	body, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Client.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the URL, which may hold a credential
	}
	if err != nil {
		return fmt.Errorf("post checkpoint %d: %w", cp.Position, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post checkpoint %d: the sink answered %s", cp.Position, resp.Status)
	}
	return nil
}
