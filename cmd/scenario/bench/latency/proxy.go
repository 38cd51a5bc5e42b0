package latency

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// chunkSize is the most one read takes from a side.
const chunkSize = 32 << 10

// coarse is how much of a longer delay is slept with Go's timers: the
// last of it is slept precisely (sleepUntil).
const coarse = 2 * time.Millisecond

// queued is how many chunks may wait for their time in one direction
// before the proxy stops reading that side (and TCP pushes back).
const queued = 256

// Proxy forwards every connection it accepts on its loopback address to
// one server, delaying and counting. Its methods are safe for concurrent
// use.
type Proxy struct {
	ln        net.Listener
	network   string // of the server: "tcp" or "unix"
	address   string
	roundTrip time.Duration

	trips, statements, opaque atomic.Uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Counts are what crossed the proxy since it started (package doc).
type Counts struct {
	RoundTrips uint64
	Statements uint64
	// Opaque counts the connections whose statements could not be read
	// (encrypted, or not PostgreSQL's protocol).
	Opaque uint64
}

// Start listens on a free loopback port and forwards each connection to
// the server at address on network ("tcp", or "unix" for a socket path),
// adding roundTrip to every round trip, half each way.
func Start(network, address string, roundTrip time.Duration) (*Proxy, error) {
	if roundTrip < 0 {
		return nil, fmt.Errorf("latency: the round trip must not be negative, not %v", roundTrip)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("latency: listen on loopback: %w", err)
	}
	p := &Proxy{ln: ln, network: network, address: address, roundTrip: roundTrip, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port, where clients connect instead of the
// server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Counts reads the counters.
func (p *Proxy) Counts() Counts {
	return Counts{RoundTrips: p.trips.Load(), Statements: p.statements.Load(), Opaque: p.opaque.Load()}
}

// Close stops accepting, closes every connection in both directions and
// waits for the proxy's goroutines to end.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil // closed twice
	}
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// track registers c to be closed by Close; false when Close has begun.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serve forwards one client connection until both directions have ended.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	server, err := net.Dial(p.network, p.address)
	if err != nil {
		return // the client sees its connection closed, as with a server that is down
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	var (
		mu          sync.Mutex
		clientSpoke bool
		fe          frontend
	)
	fromClient := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		clientSpoke = true
		wasOpaque := fe.opaque
		p.statements.Add(uint64(fe.feed(b)))
		if fe.opaque && !wasOpaque {
			p.opaque.Add(1)
		}
	}
	fromServer := func([]byte) {
		mu.Lock()
		defer mu.Unlock()
		if clientSpoke {
			clientSpoke = false
			p.trips.Add(1)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(client, server, fromClient) }()
	go func() { defer wg.Done(); p.pipe(server, client, fromServer) }()
	wg.Wait()
}

// chunk is bytes read from one side and when.
type chunk struct {
	at time.Time
	b  []byte
}

// pipe copies src to dst, each chunk half a round trip after it was read,
// calling seen on each as it is read. On src's end it half-closes dst
// once the bytes before are written; on a write error it closes both.
func (p *Proxy) pipe(src, dst net.Conn, seen func([]byte)) {
	delay := p.roundTrip / 2
	chunks := make(chan chunk, queued)
	go func() {
		defer close(chunks)
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				at := time.Now()
				b := append([]byte(nil), buf[:n]...)
				seen(b)
				chunks <- chunk{at: at, b: b}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		sleepUntil(c.at.Add(delay))
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			dst.Close()
			for range chunks { // until the reader sees its closed socket
			}
			return
		}
	}
	if hc, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = hc.CloseWrite()
	} else {
		dst.Close()
	}
}

// sleepUntil returns at deadline or just after. Go's timers wake up to a
// millisecond late on an idle Linux machine (the runtime's poller waits
// in whole milliseconds: a 0.5 ms time.Sleep measured 1.1 ms here), which
// would double the delay the bench asked for; nanosleep(2) wakes within
// tens of microseconds (0.57 ms), at the cost of holding an OS thread
// while it sleeps, so only the last coarse of a delay is slept with it.
func sleepUntil(deadline time.Time) {
	d := time.Until(deadline)
	if d > coarse {
		time.Sleep(d - coarse)
		d = time.Until(deadline)
	}
	for d > 0 {
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // interrupted: the loop sleeps the rest
		d = time.Until(deadline)
	}
}
