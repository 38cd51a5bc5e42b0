package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is the HTTP header that carries a notice's signature:
//
//	Countersign-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">
const Header = "Countersign-Signature"

// DefaultTolerance is how far Verify lets a signature's time be from the
// receiver's clock: the time is signed, so an old notice replayed later
// is refused once it is older than this.
const DefaultTolerance = 5 * time.Minute

// Sign is the Header value of body sent at t: the lowercase hex
// HMAC-SHA256, keyed with secret, of the decimal unix seconds of t, a dot,
// and body.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks header, the Header value a receiver got with body, against
// secret: one of its v1 signatures must be the HMAC of its t and body, and
// t within tolerance of now (zero: DefaultTolerance). It returns
// ErrSignatureMismatch, ErrSignatureMalformed or ErrSignatureStale. A
// receiver in Go can call it as it is; the README shows the same check
// with openssl.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%s %q: want t=<unix seconds>,v1=<hex>: %w", Header, header, ErrSignatureMalformed)
	}
	want := mac(secret, ts, body)
	matched := false
	for _, sig := range sigs {
		matched = matched || hmac.Equal(sig, want)
	}
	if !matched {
		return ErrSignatureMismatch
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signed at %s, %s from now: %w", time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), ErrSignatureStale)
	}
	return nil
}
