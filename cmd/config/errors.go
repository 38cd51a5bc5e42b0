package config

import (
	"errors"
	"strings"
)

var (
	// ErrUnknownKey is a file key that names no flag.
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalidValue is a value, from the environment or the file, that
	// its flag does not take.
	ErrInvalidValue = errors.New("invalid value")
	// ErrFile is a file that cannot be read, is not YAML, or is not one
	// mapping of keys to values.
	ErrFile = errors.New("unusable config file")
)

// A Problem is one setting Load could not use. Its text never holds the
// value, which may be a secret.
type Problem struct {
	// Where is the environment variable (COUNTERSIGN_STORE) or the file
	// and line (/etc/countersign.yaml:3), or the file alone.
	Where string
	// Key is the flag's name, or "" when the problem is not one key's.
	Key string
	Err error
}

func (p *Problem) Error() string {
	parts := []string{p.Where}
	if p.Key != "" && !strings.HasPrefix(p.Where, EnvPrefix) {
		parts = append(parts, p.Key)
	}
	return strings.Join(append(parts, p.Err.Error()), ": ")
}

func (p *Problem) Unwrap() error { return p.Err }
