package leadpage

import "errors"

// ErrNoSession means a Sessions holds no session under the id asked for:
// there never was one, or it ended (signed out, expired and swept, or
// ended by another sidecar of the fleet).
var ErrNoSession = errors.New("leadpage: no such session")
