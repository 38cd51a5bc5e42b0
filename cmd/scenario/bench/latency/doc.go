// Package latency is the bench's TCP proxy in front of PostgreSQL: it
// adds a network delay that one machine does not have, and counts what
// crosses it, so `countersign bench --store-latency 1ms` shows how the
// sidecars scale when their store is a network hop away, as a cloud
// PostgreSQL always is.
//
// # The delay
//
// Proxy.RoundTrip is the round trip added; each direction gets half of
// it. Every chunk of bytes read from one side at time t is written to the
// other at t + RoundTrip/2 (or as soon after as the scheduler allows: the
// delay is a lower bound), in the order it was read. The last
// milliseconds of each wait are slept with nanosleep(2), not Go's timers,
// which wake up to a millisecond late on Linux (a 0.5 ms time.Sleep took
// 1.1 ms on the 2-core machine, which would make a 1 ms round trip about
// 2.2 ms); with nanosleep a 1 ms round trip through the proxy to a
// loopback echo server took 1.25 ms, and 57 µs with no delay. Chunks are not held
// back for each other: a second chunk read while the first waits is
// written half a round trip after its own read, not after the first's
// write, so the proxy serializes nothing that TCP does not. Bytes are
// forwarded unchanged; an end of stream is passed on as a half close once
// the bytes before it are written. With RoundTrip zero the proxy only
// copies and counts.
//
// # What is counted
//
// A round trip is one turn of the conversation on one connection: the
// client sends (in one chunk or many), then the server answers. It is
// counted when the server's first bytes after any bytes of the client
// arrive at the proxy; more chunks of the same answer, and server bytes
// that follow no client bytes (a notice, a NOTIFY), count nothing.
// Opening a connection counts too (PostgreSQL's startup exchange is one
// round trip with trust authentication, more with a password or an
// SSLRequest), since a pool that opens connections during a run makes the
// callers wait for them. A pipelined batch (pgx's SendBatch) is one round
// trip: its messages leave before any answer comes back.
//
// A statement is one Query ('Q') or Execute ('E') message of PostgreSQL's
// frontend protocol, read from the client's bytes: a simple query string
// holding several statements separated by semicolons counts once, and a
// Parse or Describe without an Execute counts nothing. The parser knows
// the untyped packets that open a connection (StartupMessage,
// SSLRequest, GSSENCRequest, CancelRequest); a connection on which TLS or
// GSS encryption starts, or whose bytes do not parse, is counted in
// Counts.Opaque and its statements from then on are not counted (its
// round trips still are).
package latency
