package jcs_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/executor/audit/jcs"
)

// lines reads a testdata file without its comment lines.
func lines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := s.Text(); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestNumbersAreWrittenAsAppendixBOfRFC8785Says(t *testing.T) {
	rows := lines(t, "appendix-b.txt")
	if len(rows) != 26 {
		t.Fatalf("appendix-b.txt has %d rows, want the RFC's 26", len(rows))
	}
	for _, row := range rows {
		bits, want, _ := strings.Cut(row, " ")
		t.Run(bits, func(t *testing.T) {
			u, err := strconv.ParseUint(bits, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jcs.Value(math.Float64frombits(u))
			if want == "error" {
				if !errors.Is(err, jcs.ErrNumber) {
					t.Fatalf("got %s, %v; want ErrNumber", got, err)
				}
				return
			}
			if err != nil || string(got) != want {
				t.Fatalf("got %s, %v; want %s", got, err, want)
			}
		})
	}
}

func TestTheValuesExampleOfSection3Point2IsWrittenByteForByte(t *testing.T) {
	in, err := os.ReadFile("testdata/values.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.Join(strings.Fields(strings.Join(lines(t, "values.hex"), " ")), ""))
	if err != nil {
		t.Fatal(err)
	}
	got, err := jcs.Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestMembersAreSortedByUTF16CodeUnitsAsSection3Point2Point3Says(t *testing.T) {
	in, err := os.ReadFile("testdata/sorting.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := jcs.Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	// Read the strings back in the order they were written: names and
	// values alternate.
	dec := json.NewDecoder(bytes.NewReader(got))
	var values []string
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok {
			values = append(values, s)
		}
	}
	var order []string
	for i := 1; i < len(values); i += 2 {
		order = append(order, values[i])
	}
	if want := lines(t, "sorting.txt"); strings.Join(order, "|") != strings.Join(want, "|") {
		t.Fatalf("order %q\nwant  %q\n(canonical %q)", order, want, got)
	}
	if !bytes.HasPrefix(got, []byte(`{"\r":"Carriage Return","1":"One","`+"\u0080"+`":"Control"`)) {
		t.Fatalf("the control character is not written as the RFC writes it: %q", got)
	}
}

func TestCanonicalForm(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"white space goes and html characters stay as they are", "{ \"b\" : \"<a> & </script>\u2028\", \"a\":[1, 2.0 ,-0] }", "{\"a\":[1,2,0],\"b\":\"<a> & </script>\u2028\"}"},
		{"controls are escaped in lower case hex, the named ones by name", `"\u001f\u0008\t\n\u000c\r\u007f"`, "\"\\u001f\\b\\t\\n\\f\\r\u007f\""},
		{"a slash is not escaped", `"a\/b"`, `"a/b"`},
		{"nested objects are sorted too", `{"z":{"b":1,"a":2},"a":{}}`, `{"a":{},"z":{"a":2,"b":1}}`},
		{"large integers are doubles", `12345678901234567890`, `12345678901234567000`},
		{"cents stay whole", `{"amount":12000}`, `{"amount":12000}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := jcs.Transform([]byte(c.in))
			if err != nil || string(got) != c.want {
				t.Fatalf("got %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestWhatCannotBeCanonicalizedIsRefused(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"a member twice", `{"a":1,"a":2}`, jcs.ErrInvalid},
		{"a member twice, spelled differently", `{"a":1,"\u0061":2}`, jcs.ErrInvalid},
		{"two values", `{} {}`, jcs.ErrInvalid},
		{"no value", ``, jcs.ErrInvalid},
		{"a number beyond the doubles", `1e400`, jcs.ErrNumber},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := jcs.Transform([]byte(c.in))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %s, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestMarshalWritesWhatGoEscapesUnescaped(t *testing.T) {
	got, err := jcs.Marshal(map[string]any{"rule": "amount > limit", "n": 3})
	if err != nil || string(got) != `{"n":3,"rule":"amount > limit"}` {
		t.Fatalf("got %s, %v", got, err)
	}
}

func FuzzTransformIsIdempotent(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e10,"x"]}`, `"\u0080"`, `[1e-7,1e21,-0.0]`, `{"\ud83d\ude00":1,"\uffff":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		once, err := jcs.Transform(in)
		if err != nil {
			return
		}
		twice, err := jcs.Transform(once)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("%q -> %q -> %q, %v", in, once, twice, err)
		}
	})
}
