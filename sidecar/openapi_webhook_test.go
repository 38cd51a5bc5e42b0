package sidecar

import (
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/executor/notify"
)

// The approval notice that serve --notify-webhook posts is documented
// under the document's webhooks, field for field as notify.Notice writes
// it.
func TestOpenAPIWebhookMatchesNotice(t *testing.T) {
	var root map[string]any
	if err := json.Unmarshal(openAPI, &root); err != nil {
		t.Fatal(err)
	}
	hooks, _ := root["webhooks"].(map[string]any)
	post, _ := resolve(root, hooks["approvalNotice"])["post"].(map[string]any)
	if post == nil {
		t.Fatal("openapi.json documents no webhooks.approvalNotice.post")
	}
	schema := responseSchema(root, post["requestBody"])
	if schema == nil {
		t.Fatal("webhooks.approvalNotice: no request body schema")
	}
	compareSchema(t, root, "webhooks.approvalNotice", schema, typeOf[notify.Notice]())
}
