package jcs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Errors callers branch on.
var (
	// ErrInvalid: the input is not one JSON value, or holds an object
	// with a member name twice.
	ErrInvalid = errors.New("not canonicalizable JSON")
	// ErrNumber: a number that is not a finite IEEE 754 double (NaN,
	// infinity, or a literal beyond the double range).
	ErrNumber = errors.New("number outside the IEEE 754 double range")
)

// Transform returns the canonical form of the JSON text data, which must
// hold exactly one value.
func Transform(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parse(dec)
	if err != nil {
		return nil, fmt.Errorf("jcs: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("jcs: %w: data after the value", ErrInvalid)
	}
	return Value(v)
}

// Marshal is the canonical form of v as encoding/json marshals it.
func Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("jcs: %w", err)
	}
	return Transform(b)
}

// Value is the canonical form of a decoded JSON value: nil, bool, string,
// json.Number, float64, []any or map[string]any, nested.
func Value(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := write(&b, v); err != nil {
		return nil, fmt.Errorf("jcs: %w", err)
	}
	return b.Bytes(), nil
}

// member is an object member as parsed, in input order.
type member struct {
	name  string
	value any
}

// object keeps a parsed object's members so that a duplicate name is seen
// (a map would keep the last one silently).
type object []member

// parse reads one value from dec.
func parse(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			var o object
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
				}
				name := k.(string) // the decoder allows only strings here
				if seen[name] {
					return nil, fmt.Errorf("%w: member %q twice", ErrInvalid, name)
				}
				seen[name] = true
				v, err := parse(dec)
				if err != nil {
					return nil, err
				}
				o = append(o, member{name, v})
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parse(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			return a, err
		}
		return nil, fmt.Errorf("%w: unexpected %v", ErrInvalid, t)
	default:
		return t, nil // nil, bool, string, json.Number
	}
}

func write(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		writeString(b, v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrNumber, v)
		}
		return writeNumber(b, f)
	case float64:
		return writeNumber(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		o := make(object, 0, len(v))
		for k, e := range v {
			o = append(o, member{k, e})
		}
		return writeObject(b, o)
	case object:
		return writeObject(b, v)
	default:
		return fmt.Errorf("%w: a value of Go type %T", ErrInvalid, v)
	}
	return nil
}

// writeObject writes o's members sorted by their names' UTF-16 code units.
func writeObject(b *bytes.Buffer, o object) error {
	o = slices.Clone(o)
	slices.SortFunc(o, func(x, y member) int { return compareUTF16(x.name, y.name) })
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			if o[i-1].name == m.name {
				return fmt.Errorf("%w: member %q twice", ErrInvalid, m.name)
			}
			b.WriteByte(',')
		}
		writeString(b, m.name)
		b.WriteByte(':')
		if err := write(b, m.value); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// compareUTF16 orders a and b as arrays of UTF-16 code units, without
// making them: code points order the same way except that one above
// U+FFFF (a surrogate pair, 0xD800...) sorts before U+E000 to U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		a, b = a[na:], b[nb:]
		if ra == rb {
			continue
		}
		ua, ub := firstUnit(ra), firstUnit(rb)
		if ua != ub {
			return cmp.Compare(ua, ub)
		}
		// Both above U+FFFF with the same high surrogate: the low ones
		// order as the code points do.
		return cmp.Compare(ra, rb)
	}
	return cmp.Compare(len(a), len(b))
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// writeString writes s quoted, escaping only what RFC 8785 section
// 3.2.2.2 escapes.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// writeNumber writes f as ECMAScript's Number.prototype.toString does
// (ECMA-262, Number::toString), which RFC 8785 section 3.2.2.3 adopts.
func writeNumber(b *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%w: %v", ErrNumber, f)
	}
	if f == 0 { // and -0
		b.WriteByte('0')
		return nil
	}
	if f < 0 {
		b.WriteByte('-')
		f = -f
	}
	// The shortest digits that read back as f, and the decimal exponent:
	// f = 0.digits × 10^n, in ECMA-262's terms k = len(digits).
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, err := strconv.Atoi(exp)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNumber, f)
	}
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteString(digits[:1])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return nil
}
