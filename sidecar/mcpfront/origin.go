package mcpfront

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Origins are the web origins whose pages may call /mcp (serve
// --mcp-allowed-origins). The zero value allows none: a request with an
// Origin header is refused, one without (an MCP client that is not a
// browser) is not concerned. See the package doc, "Origins".
type Origins struct {
	allowed map[string]bool // serialised origins, normalised; "null" when listed
}

// nullOrigin is the serialisation of an opaque origin (RFC 6454 §6.2): a
// sandboxed frame, a file: or data: page, some redirects.
const nullOrigin = "null"

// ParseOrigins reads the allowed origins: each a serialised origin,
// scheme://host[:port] (no path, no trailing slash), or "null" for opaque
// origins. They are normalised as Check normalises a request's Origin.
// Every bad entry is reported at once, in an error wrapping
// ErrInvalidOrigin.
func ParseOrigins(list []string) (Origins, error) {
	o := Origins{allowed: make(map[string]bool, len(list))}
	var errs []error
	for _, s := range list {
		switch s {
		case nullOrigin:
			o.allowed[nullOrigin] = true
			continue
		case "*":
			errs = append(errs, errors.New(`"*": a wildcard would let every web page call /mcp; list each origin, as scheme://host[:port]`))
			continue
		}
		n, err := normalize(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", bounded(s), err))
			continue
		}
		o.allowed[n] = true
	}
	if len(errs) > 0 {
		return Origins{}, fmt.Errorf("%w: %w", ErrInvalidOrigin, errors.Join(errs...))
	}
	return o, nil
}

// List returns the allowed origins, normalised and sorted.
func (o Origins) List() []string {
	out := make([]string, 0, len(o.allowed))
	for s := range o.allowed {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Check admits a request by its Origin headers, all of them
// (http.Header.Values): none admits it (not a browser, or a browser that
// sends none for this request); exactly one admits it when it is allowed,
// compared after normalising as RFC 6454 serialises origins (scheme and
// host in lower case, the scheme's default port left out). Anything else
// is an error wrapping ErrForbiddenOrigin: an origin not listed, "null"
// unless listed, a value that is not one serialised origin, or two Origin
// headers, which a proxy in front and this check could each read
// differently (as two Authorization headers are refused).
func (o Origins) Check(values []string) error {
	switch len(values) {
	case 0:
		return nil
	case 1:
	default:
		return fmt.Errorf("%w: the request has %d Origin headers; a browser sends one", ErrForbiddenOrigin, len(values))
	}
	v := values[0]
	if v == nullOrigin {
		if o.allowed[nullOrigin] {
			return nil
		}
		return fmt.Errorf("%w: Origin null (an opaque origin: a sandboxed frame, a file: or data: page) is not allowed", ErrForbiddenOrigin)
	}
	n, err := normalize(v)
	if err != nil {
		return fmt.Errorf("%w: Origin %s is not one serialised origin: %v", ErrForbiddenOrigin, bounded(v), err)
	}
	if !o.allowed[n] {
		return fmt.Errorf("%w: Origin %s is not an allowed origin", ErrForbiddenOrigin, bounded(n))
	}
	return nil
}

// defaultPorts are the ports a serialised origin leaves out.
var defaultPorts = map[string]int{"http": 80, "https": 443, "ws": 80, "wss": 443}

// normalize returns the serialisation of the origin s (RFC 6454 §6.1):
// scheme "://" host [":" port], scheme and host in lower case, the port
// only when it is not the scheme's default. s must be exactly an origin:
// no user info, path (not even "/"), query or fragment, ASCII only (a
// browser sends an internationalised host in its punycode form).
func normalize(s string) (string, error) {
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '%' || c == ',' {
			return "", errors.New("an origin is ASCII without spaces, commas or percent-escapes: write scheme://host[:port], an internationalised host in punycode")
		}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("not scheme://host[:port]: %w", errors.Unwrap(err))
	case u.Scheme == "" || u.Opaque != "" || u.Hostname() == "":
		return "", errors.New("not scheme://host[:port]")
	case u.User != nil:
		return "", errors.New("an origin has no user info: write scheme://host[:port]")
	case u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#"):
		return "", errors.New("an origin has no path (not even a trailing /), query or fragment: write scheme://host[:port]")
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	out := u.Scheme + "://" + host
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %s is not 1 to 65535", p)
		}
		if n != defaultPorts[u.Scheme] {
			out += ":" + strconv.Itoa(n)
		}
	}
	return out, nil
}

// bounded quotes s for an error message, at most 100 bytes of it: a
// refusal repeats what a client sent, so it must not grow with it.
func bounded(s string) string {
	const max = 100
	if len(s) > max {
		return strconv.Quote(s[:max]) + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}
