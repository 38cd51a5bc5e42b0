package sidecar

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/executor/audit"
	"github.com/countersign/countersign/sidecar/client"
)

// auditKeys answers the public keys that sign the audit's checkpoints:
// every key registered in the store, so that any sidecar of a fleet
// publishes the keys of all (each signs while it is the sequencer).
func (s *Server) auditKeys(c echo.Context) error {
	set, err := audit.Keys(s.opts.Store)
	if err != nil {
		return err
	}
	out := client.AuditKeys{Keys: each(set.Keys, func(k audit.JWK) client.AuditKey {
		return client.AuditKey{Kty: k.Kty, Crv: k.Crv, X: k.X, Kid: k.Kid, Alg: k.Alg, Use: k.Use}
	})}
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set(echo.HeaderContentType, "application/jwk-set+json")
	c.Response().WriteHeader(http.StatusOK)
	return json.NewEncoder(c.Response()).Encode(out)
}

// auditCheckpoints answers the signed checkpoints after a position, as
// {"checkpoints": [...]} or, with format=ndjson, one per line: the file
// `countersign audit verify FILE --checkpoints F` reads.
func (s *Server) auditCheckpoints(c echo.Context) error {
	var after uint64
	if v := c.QueryParam("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return newError(http.StatusBadRequest, "invalid_query",
				"after: %q is not a position (a whole number); leave it out for every checkpoint", clip(v))
		}
		after = n
	}
	format := c.QueryParam("format")
	if format != "" && format != "json" && format != "ndjson" {
		return newError(http.StatusBadRequest, "invalid_query", "format: %q is neither json (the default) nor ndjson", clip(format))
	}
	cps, err := audit.Checkpoints(s.opts.Store, after)
	if err != nil {
		return err
	}
	views := each(cps, newCheckpoint)
	if format != "ndjson" {
		return c.JSON(http.StatusOK, client.AuditCheckpoints{Checkpoints: views})
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/x-ndjson")
	c.Response().WriteHeader(http.StatusOK)
	enc := json.NewEncoder(c.Response())
	for _, v := range views {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// newCheckpoint is a checkpoint as the API shows it.
func newCheckpoint(cp audit.Checkpoint) client.AuditCheckpoint {
	return client.AuditCheckpoint{Position: cp.Position, ID: cp.ID, Head: cp.Head, At: cp.At, Kid: cp.KeyID, Sig: cp.Signature}
}
