package leadpage

import "errors"

// ErrNoSession means a Sessions holds no session under the id asked for:
// there never was one, or it ended (signed out, expired and swept, or
// ended by another sidecar of the fleet).
var ErrNoSession = errors.New("leadpage: no such session")

// refusalError is a refusal of the page's own, carried as an error.
type refusalError struct{ Refusal }

func (e *refusalError) Error() string { return "leadpage: " + e.Code + ": " + e.Message }
