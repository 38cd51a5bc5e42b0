package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/executor/strictjson"
)

func ExampleDecode() {
	var req struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	for _, body := range []string{
		`{"tool":"lookup_order","args":{"order":"O-1001"}}`,
		`{"tool":"lookup_order","tool":"issue_refund"}`,
		`{"TOOL":"issue_refund"}`,
		`{"tool":"issue_refund","args":{"order":"O-1","ORDER":"O-2"}}`,
		`{"tool":"issue_refund","approved_by":"lead-dee"}`,
	} {
		err := strictjson.Decode([]byte(body), &req)
		switch {
		case err == nil:
			fmt.Println("ok:", req.Tool)
		case errors.Is(err, strictjson.ErrMalformed):
			fmt.Println("400:", err)
		default:
			fmt.Println("422:", err)
		}
	}
	// Output:
	// ok: lookup_order
	// 400: malformed JSON at tool: the name appears twice in one object; send it once
	// 400: malformed JSON at TOOL: the member is named "tool", not "TOOL": names are case-sensitive
	// 400: malformed JSON at args.ORDER: "order" and "ORDER" differ only in case; send one, spelled as documented
	// 422: unknown field at approved_by: no such field; send only the documented fields
}
