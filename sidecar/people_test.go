package sidecar_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"testing/fstest"
	"time"

	"github.com/countersign/countersign/cmd/devstack"
	"github.com/countersign/countersign/executor/policy"
)

// sign is a token of the dev identity provider for fixture person like,
// under sub and role.
func (e *env) sign(t *testing.T, like, sub, role string) string {
	t.Helper()
	p := person(t, like)
	p.ID, p.Role = sub, role
	tok, err := e.st.IdP.Sign(p, time.Hour)
	if err != nil {
		t.Fatalf("sign a token for %q: %v", sub, err)
	}
	return tok
}

// The second operator is another person, however the first one's sub is
// spelled: OPS-IDA cannot approve what ops-ida proposed.
func TestSecondOperatorUnderAnotherSpelling(t *testing.T) {
	e := start(t, devstack.Options{})
	r := e.uploadAs(t, "", bytes.NewReader(loosened(t, "refund_auto", 7500)))
	r.want(t, http.StatusAccepted, "")
	var awaiting struct{ Status, Digest string }
	r.decode(t, &awaiting)
	if awaiting.Status != "awaiting_second_operator" {
		t.Fatalf("upload answered %s, want awaiting_second_operator", r.body)
	}
	for _, sub := range []string{"OPS-IDA", "Ops-Ida", "ＯＰＳ－ＩＤＡ"} {
		t.Run(sub, func(t *testing.T) {
			e.callWith(t, http.MethodPost, "/v1/bundles/"+awaiting.Digest+"/approve", e.sign(t, "ops-ida", sub, "operator"), nil).
				want(t, http.StatusForbidden, "same_operator")
		})
	}
	var active bundleRecord
	e.call(t, http.MethodGet, "/v1/bundles/active", "ops-ida", nil).decode(t, &active)
	if active.Revision != "p1" {
		t.Fatalf("after the refused approvals %s is active, want p1", active.Revision)
	}
	e.call(t, http.MethodPost, "/v1/bundles/"+awaiting.Digest+"/approve", "ops-jon", nil).want(t, http.StatusCreated, "")
}

// loosened is p1 with one limit moved to cents, the change declared.
func loosened(t *testing.T, limit string, cents int64) []byte {
	t.Helper()
	fsys := p1Edited(t, "p1-"+limit, func(s string) string { return s }, nil)
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(fsys["data.json"].Data, &data); err != nil {
		t.Fatal(err)
	}
	from := data["countersign"]["limits"][limit]
	data["countersign"]["limits"][limit] = cents
	manifest := map[string]any{"revision": "p1-" + limit, "roots": []string{"countersign"}, "rego_version": 1,
		"metadata": map[string]any{"limit_changes": []map[string]any{{"name": limit, "from": from, "to": cents}}}}
	for name, v := range map[string]any{"data.json": data, ".manifest": manifest} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		fsys[name] = &fstest.MapFile{Data: b}
	}
	b, err := policy.Build(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A sub that PRECIS UsernameCaseMapped refuses names nobody a same-person
// check could compare: the token is 401 bad_claims, before any check.
func TestSubjectMustBeAUsername(t *testing.T) {
	e := start(t, devstack.Options{})
	for _, sub := range []string{"ops ida", "ops\u200dida", "ops-ida\u2122", "rep\u2603", "\u210cops"} {
		t.Run(fmt.Sprintf("%+q", sub), func(t *testing.T) {
			r := e.callWith(t, http.MethodGet, "/v1/bundles", e.sign(t, "ops-ida", sub, "operator"), nil)
			r.want(t, http.StatusUnauthorized, "bad_claims")
		})
	}
	// The spellings PRECIS maps are the same person, and are let in.
	e.callWith(t, http.MethodGet, "/v1/bundles", e.sign(t, "ops-ida", "ＯＰＳ－ＩＤＡ", "operator"), nil).want(t, http.StatusOK, "")
}
