package latency

import (
	"encoding/binary"
	"testing"
)

// stream is what a client sends: an SSLRequest (refused), a
// StartupMessage, a simple Query, then Parse, Bind, Describe, Execute and
// Sync: two statements.
func stream() []byte {
	var b []byte
	untyped := func(code uint32, body []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(8+len(body)))
		b = binary.BigEndian.AppendUint32(b, code)
		b = append(b, body...)
	}
	typed := func(t byte, body string) {
		b = append(b, t)
		b = binary.BigEndian.AppendUint32(b, uint32(4+len(body)))
		b = append(b, body...)
	}
	untyped(sslRequest, nil)
	untyped(3<<16, []byte("user\x00postgres\x00\x00"))
	typed('Q', "SELECT 1\x00")
	typed('P', "\x00SELECT $1\x00\x00\x00")
	typed('B', "\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01Q\x00\x00")
	typed('D', "P\x00")
	typed('E', "\x00\x00\x00\x00\x00")
	typed('S', "")
	return b
}

func TestFeedCountsQueryAndExecuteMessages(t *testing.T) {
	var f frontend
	if got := f.feed(stream()); got != 2 || f.opaque {
		t.Errorf("feed = %d (opaque %v), want 2 statements", got, f.opaque)
	}
	tls := frontend{}
	hello := append(stream()[:8], 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc) // SSLRequest, then a TLS ClientHello
	if got := tls.feed(hello); got != 0 || !tls.opaque {
		t.Errorf("after TLS began: feed = %d, opaque %v; want 0 and opaque", got, tls.opaque)
	}
}

// FuzzFeedDoesNotDependOnChunks: however the client's bytes are cut into
// chunks, the count is the same.
func FuzzFeedDoesNotDependOnChunks(f *testing.F) {
	f.Add(stream(), uint16(1), uint16(7))
	f.Add(stream(), uint16(13), uint16(40))
	f.Add([]byte("\x16\x03\x01\x02\x00\x01\x00"), uint16(2), uint16(3))
	f.Fuzz(func(t *testing.T, b []byte, cut1, cut2 uint16) {
		var whole frontend
		want := whole.feed(b)
		i, j := min(int(cut1), len(b)), min(int(cut2), len(b))
		if i > j {
			i, j = j, i
		}
		var parts frontend
		got := parts.feed(b[:i]) + parts.feed(b[i:j]) + parts.feed(b[j:])
		if got != want || parts.opaque != whole.opaque {
			t.Errorf("cut at %d and %d: %d statements (opaque %v), whole: %d (opaque %v)", i, j, got, parts.opaque, want, whole.opaque)
		}
	})
}
