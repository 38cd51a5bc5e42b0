package mcpfront

import "errors"

// The refusals of an Origin (see Origins).
var (
	// ErrForbiddenOrigin: a request to /mcp carries an Origin header that
	// is not one of the allowed origins (or more than one Origin header).
	// The sidecar answers it 403 forbidden_origin before it looks at the
	// bearer token.
	ErrForbiddenOrigin = errors.New("mcpfront: origin not allowed")
	// ErrInvalidOrigin: an entry of the allowed origins is not a
	// serialised origin (scheme://host[:port]) or "null". The message
	// names every bad entry and how to write it.
	ErrInvalidOrigin = errors.New("mcpfront: invalid allowed origin")
)
