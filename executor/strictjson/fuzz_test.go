package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/strictjson"
)

// FuzzDecode checks what an accepted body guarantees, against oracles that
// do not share the decoder's code: it is valid JSON, no object in it holds
// two names equal under strings.EqualFold, every top-level name is a field's
// exact name, and it decodes to what encoding/json reads from it. Refusals
// must carry one of the three kinds.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"tool":"lookup_order","args":{"order":"O-1001"}}`,
		`{"tool":"issue_refund","args":{"order":"O-1","amount":3000},"opt":{"limit":1},"tags":[{"name":"a"}]}`,
		`{"tool":"lookup_order","tool":"issue_refund"}`,
		`{"TOOL":"x"}`, `{"Args":{}}`, `{"\u212aind":"a"}`, `{"tool":"x","args":{"order":"O-1","ORDER":"O-2"}}`,
		`{"tool":"x","args":{"Order":"O-1"}}`, `{"tool":"x"}{}`, `[]`, ``, `{"tool":1e400}`,
		`{"opt":{"limit":9007199254740993}}`, `{"tags":[{"name":"a","NAME":"b"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var s step
		err := strictjson.Decode([]byte(body), &s)
		if err != nil {
			var e *strictjson.Error
			if !errors.As(err, &e) || !(errors.Is(err, strictjson.ErrMalformed) || errors.Is(err, strictjson.ErrUnknownField) || errors.Is(err, strictjson.ErrType)) {
				t.Fatalf("refusal of %q is not a classified *Error: %v", body, err)
			}
			return
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if name, ok := foldDuplicate(t, body); ok {
			t.Fatalf("accepted %q with names equal but for case: %q", body, name)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &top); err != nil {
			t.Fatalf("accepted %q that is not an object: %v", body, err)
		}
		for name := range top {
			if !strings.Contains(" tool kind args opt tags ", " "+name+" ") {
				t.Fatalf("accepted %q with the name %q, not a field's exact name", body, name)
			}
		}
		var lenient step
		if err := json.Unmarshal([]byte(body), &lenient); err != nil || !reflect.DeepEqual(lenient, s) {
			t.Fatalf("encoding/json reads %q differently: %+v %v, strict %+v", body, lenient, err, s)
		}
	})
}

// foldDuplicate walks body with a naive pairwise strings.EqualFold check of
// every object's names.
func foldDuplicate(t *testing.T, body string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	var names [][]string // one list per open object; nil entries for arrays
	var inObject []bool
	expectName := func() bool { return len(inObject) > 0 && inObject[len(inObject)-1] }
	afterName := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if expectName() && !afterName {
			if name, ok := tok.(string); ok {
				list := names[len(names)-1]
				for _, seen := range list {
					if strings.EqualFold(seen, name) {
						return name, true
					}
				}
				names[len(names)-1] = append(list, name)
				afterName = true
				continue
			}
		}
		afterName = false
		switch tok {
		case json.Delim('{'):
			inObject, names = append(inObject, true), append(names, nil)
		case json.Delim('['):
			inObject, names = append(inObject, false), append(names, nil)
		case json.Delim('}'), json.Delim(']'):
			inObject, names = inObject[:len(inObject)-1], names[:len(names)-1]
		}
	}
}

// FuzzObject checks that Object accepts exactly the objects Decode accepts
// into a map, and that Take never hands out a member under a name that is
// not exactly the one asked for.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{"order":"O-1","amount":3000}`, `{"Order":"O-1"}`, `{"order":"O-1","order":"O-2"}`, `[1]`, `{"a":{"b":1,"B":2}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := strictjson.Object([]byte(body))
		var viaDecode map[string]json.RawMessage
		derr := strictjson.Decode([]byte(body), &viaDecode)
		if (err == nil) != (derr == nil && viaDecode != nil) {
			t.Fatalf("Object and Decode disagree on %q: %v / %v", body, err, derr)
		}
		if err != nil {
			return
		}
		for name := range m {
			v, ok, err := m.Take(name)
			if !ok || err != nil || !bytes.Equal(v, bytes.TrimSpace(viaDecode[name])) {
				t.Fatalf("Take(%q) = %s %v %v", name, v, ok, err)
			}
		}
	})
}
