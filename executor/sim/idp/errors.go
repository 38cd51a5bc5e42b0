package idp

import "errors"

// Errors returned by the issuer. Match them with errors.Is.
var (
	// ErrInvalidOptions means Open was given options it cannot work with.
	ErrInvalidOptions = errors.New("idp: invalid options")

	// ErrKeyStore means the issuer's key could not be read, parsed or
	// written. Open does not replace an unreadable key with a fresh one:
	// that would silently invalidate every token already handed out.
	ErrKeyStore = errors.New("idp: key store")

	// ErrInvalidPerson means Sign was asked to sign for a person without
	// an id or with a lifetime that is not positive.
	ErrInvalidPerson = errors.New("idp: invalid person")
)
