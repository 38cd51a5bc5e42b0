package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// Decode decodes data, exactly one JSON value, into v, a non-nil pointer,
// after refusing everything the package documents. On error v may be
// partly written; callers discard it.
func Decode(data []byte, v any) error {
	if err := checkSyntax(data); err != nil {
		return err
	}
	w := walker{dec: json.NewDecoder(bytes.NewReader(data))}
	// Numbers stay literals: a float64 would refuse 1e400 as if the body
	// were not JSON, when it is JSON whose value does not fit its field.
	w.dec.UseNumber()
	if err := w.value(reflect.TypeOf(v), ""); err != nil {
		return err
	}
	if w.malformed != nil {
		return w.malformed
	}
	if w.unknown != nil {
		return w.unknown
	}
	// Every member name left is now exact and unique, so encoding/json's
	// case-insensitive matching and last-duplicate-wins never come into play.
	if err := json.Unmarshal(data, v); err != nil {
		return typeError(err)
	}
	return nil
}

// checkSyntax refuses anything but one JSON value with optional white space
// around it.
func checkSyntax(data []byte) error {
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return &Error{Kind: ErrMalformed, Problem: "the body is not one JSON value: " + err.Error()}
	}
	return nil
}

func typeError(err error) error {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return &Error{Kind: ErrType, Path: ute.Field, Problem: fmt.Sprintf("must be %s, not %s", kindName(ute.Type), ute.Value)}
	}
	return &Error{Kind: ErrType, Problem: err.Error()}
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}

// walker reads a syntactically valid document token by token beside the
// type it will be decoded into, and keeps the first refusal of each kind
// (a later malformed member still wins over an earlier unknown one).
type walker struct {
	dec                *json.Decoder
	malformed, unknown *Error
}

func (w *walker) refuse(e *Error) {
	switch {
	case e.Kind == ErrMalformed && w.malformed == nil:
		w.malformed = e
	case e.Kind == ErrUnknownField && w.unknown == nil:
		w.unknown = e
	}
}

// value reads one value whose target type is t (nil: no checks beyond
// syntax and duplicates). Its errors are read errors, which a document that
// passed checkSyntax does not have.
func (w *walker) value(t reflect.Type, path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return &Error{Kind: ErrMalformed, Path: path, Problem: err.Error()}
	}
	t = target(t)
	switch tok {
	case json.Delim('{'):
		return w.object(t, path)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ]
		return err
	}
	return nil
}

func (w *walker) object(t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = structFields(t)
	}
	seen := map[string]string{} // folded name -> name as sent
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return &Error{Kind: ErrMalformed, Path: path, Problem: err.Error()}
		}
		name := tok.(string) // inside an object the decoder yields only string names here
		at := join(path, name)
		if first, dup := seen[fold(name)]; dup {
			w.refuse(duplicate(at, first, name))
		}
		seen[fold(name)] = name
		var elem reflect.Type
		switch {
		case fields != nil:
			elem = w.field(fields, at, name)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		if err := w.value(elem, at); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // }
	return err
}

// field resolves a member name against a struct's fields: exact, a case
// variant (malformed) or none (unknown).
func (w *walker) field(fields map[string]reflect.Type, at, name string) reflect.Type {
	if ft, ok := fields[name]; ok {
		return ft
	}
	for fname := range fields {
		if fold(fname) == fold(name) {
			w.refuse(&Error{Kind: ErrMalformed, Path: at,
				Problem: fmt.Sprintf("the member is named %q, not %q: names are case-sensitive", fname, name)})
			return nil
		}
	}
	w.refuse(&Error{Kind: ErrUnknownField, Path: at, Problem: "no such field; send only the documented fields"})
	return nil
}

func duplicate(at, first, name string) *Error {
	if first == name {
		return &Error{Kind: ErrMalformed, Path: at, Problem: "the name appears twice in one object; send it once"}
	}
	return &Error{Kind: ErrMalformed, Path: at,
		Problem: fmt.Sprintf("%q and %q differ only in case; send one, spelled as documented", first, name)}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// target is the type whose shape a value is checked against: t without its
// pointers, or nil when t decodes itself (json.RawMessage, time.Time) or
// takes anything (an interface).
func target(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		if decodesItself(t) {
			return nil
		}
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || decodesItself(t) || decodesItself(reflect.PointerTo(t)) {
		return nil
	}
	return t
}

func decodesItself(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler)
}

// structFields maps the JSON names of t's fields to their types the way
// encoding/json names them: the tag's name, else the Go name; "-" skipped;
// untagged embedded structs flattened.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if et := derefType(ft); et.Kind() == reflect.Struct {
				for n, t := range structFields(et) {
					if _, shadowed := out[n]; !shadowed {
						out[n] = t
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fold maps a name to one representative of its case-folding class: two
// names fold alike exactly when strings.EqualFold holds between them.
func fold(s string) string {
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
