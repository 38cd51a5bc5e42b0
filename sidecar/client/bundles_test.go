package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"testing"

	"github.com/countersign/countersign/bundles"
	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/pgtest"
	"github.com/countersign/countersign/sidecar/client"
)

// release is an embedded release's .tar.gz and its digest.
func release(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	b, err := bundles.Archive(name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

// A bundle's life through the client, every answer decoded strictly: a
// dry run, the gate's refusal with its cases, a release that goes live on
// one operator, a break-glass upload that waits for a second, read by its
// digest with its review and its archive, approved by another operator, a rollback,
// and the history of it all.
func TestBundleCalls(t *testing.T) {
	t.Run("on bbolt", func(t *testing.T) {
		_, as := start(t)
		bundleCalls(t, as)
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		kek, err := credential.NewKeyEncryptionKey()
		if err != nil {
			t.Fatal(err)
		}
		_, as := startWith(t, devstack.Options{DataDir: t.TempDir(), StoreURL: pgtest.URL(t), KeyEncryptionKey: kek})
		bundleCalls(t, as)
	})
}

func bundleCalls(t *testing.T, as func(who string) *client.Client) {
	ctx := context.Background()
	ops, jon := as("ops-ida"), as("ops-jon")
	p2, p2Digest := release(t, "p2")
	p3, p3Digest := release(t, "p3")

	h, err := ops.BundleHistory(ctx)
	if err != nil || len(h) != 1 || h[0].Revision != "p1" || h[0].Status != client.BundleActive {
		t.Fatalf("history at start: %+v, %v", h, err)
	}
	active, err := ops.ActiveBundle(ctx)
	if err != nil || active.Revision != "p1" || active.Digest != h[0].Digest {
		t.Fatalf("active at start: %+v, %v", active, err)
	}

	preview, err := ops.DryRunBundle(ctx, p2)
	if err != nil || preview.Gate.Revision != "p2" || preview.Gate.Digest != p2Digest || len(preview.Gate.LimitFailures) != 2 ||
		preview.Gate.Limits.RefundAuto != 5000 || len(preview.Gate.Cases) == 0 || preview.Impact.Changed == nil || preview.Against.Revision != "p1" {
		t.Fatalf("dry run of p2: %+v, %v; want its two undeclared limit changes, at p1's limits, against p1", preview, err)
	}
	if h, _ := ops.BundleHistory(ctx); len(h) != 1 {
		t.Errorf("a dry run was recorded: %+v", h)
	}

	_, err = ops.UploadBundle(ctx, p2, client.UploadOptions{})
	ae := apiError(t, err, http.StatusUnprocessableEntity, "gate_failed")
	if len(ae.Failures) != 5 || ae.Failures[0].Case != "limit_change_undeclared" || ae.Failures[0].Amount != nil ||
		ae.Failures[2].Amount == nil || *ae.Failures[2].Amount != 5100 ||
		ae.Failures[2].ExpectedRule != "R7-refund-needs-approval" || ae.Failures[2].GotRule != "default-allow-after-checks" {
		t.Errorf("p2's failures: %+v; want the seed's three cases, with their rules, after the two undeclared changes", ae.Failures)
	}

	act, err := ops.UploadBundle(ctx, p3, client.UploadOptions{})
	if err != nil || act.Awaiting != nil || act.Active == nil || act.Active.Revision != "p3" || act.Active.Status != client.BundleActive {
		t.Fatalf("p3, p1's limits as a new revision: %+v, %v; want it live on one operator", act, err)
	}

	_, err = ops.UploadBundle(ctx, p2, client.UploadOptions{BreakGlass: true})
	apiError(t, err, http.StatusUnprocessableEntity, "reason_required")
	act, err = ops.UploadBundle(ctx, p2, client.UploadOptions{BreakGlass: true, Reason: "drill"})
	if err != nil || act.Active != nil || act.Awaiting == nil || act.Awaiting.Digest != p2Digest || act.Awaiting.Status != client.BundleAwaiting ||
		len(act.Awaiting.SecondOperator) == 0 {
		t.Fatalf("p2 with break glass: %+v, %v; want it awaiting a second operator, with the review", act, err)
	}
	rec, err := jon.Bundle(ctx, p2Digest)
	if err != nil || rec.Status != client.BundleAwaiting || !rec.BreakGlass || rec.Reason != "drill" || rec.Against.Digest != p3Digest || len(rec.DataDiff) == 0 {
		t.Fatalf("p2's record, read by its digest: %+v, %v; want awaiting, with its review against p3", rec, err)
	}

	blob, err := jon.BundleArchive(ctx, p2Digest)
	if err != nil || !bytes.Equal(blob, p2) {
		t.Fatalf("p2's archive: %d bytes, %v; want the %d bytes uploaded", len(blob), err, len(p2))
	}
	_, err = jon.BundleArchive(ctx, "no-such-digest")
	apiError(t, err, http.StatusNotFound, "not_found")
	_, err = as("rep-ana").BundleArchive(ctx, p2Digest)
	apiError(t, err, http.StatusForbidden, "forbidden_role")

	_, err = ops.ApproveBundle(ctx, p2Digest)
	apiError(t, err, http.StatusForbidden, "same_operator")
	act, err = jon.ApproveBundle(ctx, p2Digest)
	if err != nil || act.Active == nil || act.Active.Revision != "p2" || act.Active.By != "ops-jon" || act.Active.Proposer != "ops-ida" {
		t.Fatalf("ops-jon's approval: %+v, %v", act, err)
	}

	// Back to p3: lower limits than p2's, a pure tightening.
	act, err = ops.ActivateBundle(ctx, p3Digest)
	if err != nil || act.Active == nil || act.Active.Revision != "p3" || !act.Active.Rollback {
		t.Fatalf("rollback to p3: %+v, %v", act, err)
	}
	_, err = ops.Bundle(ctx, "no-such-digest")
	apiError(t, err, http.StatusNotFound, "not_found")

	h, err = ops.BundleHistory(ctx)
	var got []string
	for _, b := range h {
		got = append(got, b.Revision+" "+string(b.Status))
		if len(b.Diff) != 0 || len(b.SecondOperator) != 0 {
			t.Errorf("the history carries %s's review", b.Revision)
		}
	}
	want := []string{"p1 superseded", "p2 rejected", "p3 superseded", "p2 approved", "p2 superseded", "p3 active"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("history %v, %v; want %v", got, err, want)
	}
}
