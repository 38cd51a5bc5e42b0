package latency

import "encoding/binary"

// Codes of the untyped packets a PostgreSQL client may open with: the
// protocol version of a StartupMessage (major 3 in the high 16 bits), and
// the requests that share its layout.
const (
	protocolMajor3 = 3
	cancelRequest  = 80877102
	sslRequest     = 80877103
	gssencRequest  = 80877104
	// maxStartup bounds an untyped packet's length: PostgreSQL itself
	// refuses a startup packet over 10,000 bytes.
	maxStartup = 10000
)

// frontend reads the client's side of one connection, message by
// message, across chunk boundaries, and counts statements (package doc).
type frontend struct {
	typed  bool // past the StartupMessage: every message has a type byte
	head   [8]byte
	filled int // of head
	skip   int // bytes of the current message's body still to pass
	opaque bool
}

// feed reads b, the next bytes the client sent, and returns the Query and
// Execute messages whose type byte is in it.
func (f *frontend) feed(b []byte) (statements int) {
	for len(b) > 0 && !f.opaque {
		if f.skip > 0 {
			n := min(f.skip, len(b))
			f.skip, b = f.skip-n, b[n:]
			continue
		}
		need := 8 // untyped: int32 length, int32 code
		if f.typed {
			need = 5 // type byte, int32 length
		}
		n := copy(f.head[f.filled:need], b)
		f.filled, b = f.filled+n, b[n:]
		if f.filled < need {
			return statements
		}
		f.filled = 0
		if f.typed {
			length := int(binary.BigEndian.Uint32(f.head[1:5]))
			if length < 4 {
				f.opaque = true
				break
			}
			if f.head[0] == 'Q' || f.head[0] == 'E' {
				statements++
			}
			f.skip = length - 4
			continue
		}
		length := int(binary.BigEndian.Uint32(f.head[0:4]))
		code := binary.BigEndian.Uint32(f.head[4:8])
		if length < 8 || length > maxStartup {
			f.opaque = true // a TLS record (0x16...) lands here
			break
		}
		switch {
		case code == sslRequest || code == gssencRequest:
			// The server answers one byte: 'N' and the client goes on
			// with another untyped packet; 'S' or 'G' and what follows
			// is encrypted, which the next packet's length shows.
		case code == cancelRequest:
		case code>>16 == protocolMajor3:
			f.typed = true
		default:
			f.opaque = true
		}
		f.skip = length - 8
	}
	return statements
}
