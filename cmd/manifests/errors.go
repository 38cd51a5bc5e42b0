package manifests

import "errors"

// ErrExists is returned by [WriteDir] when a file it would write is
// already there: an operator's edited base is never overwritten.
var ErrExists = errors.New("manifests: file exists")
