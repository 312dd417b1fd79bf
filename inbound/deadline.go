package inbound

import (
	"context"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// maxDeadlineDigits is the most digits a DeadlineHeader value may have: 8,
// as in gRPC's grpc-timeout, up to 99,999,999 ms, about 27 hours.
const maxDeadlineDigits = 8

// Deadline wraps a handler so that its request's context ends when the
// caller stops waiting: when the request carries retryhttp.DeadlineHeader
// (sent by a Transport with retryhttp.WithDeadlineHeader), the handler's
// context gets that deadline, counted from the request's arrival here.
// Outbound calls made through a Transport with that context (or one derived
// from it) then inherit it: they stop waiting, retrying and parking when the
// caller upstream has gone, and, with the header on, pass what is left on.
//
// The context's deadline is only ever shortened, never extended: a deadline
// the context already has (the server's own, set by an outer middleware)
// stays if it is earlier. The header is the caller's word, and hostile
// values cannot hurt: a value that is not a plain decimal integer of at
// most 8 digits (a sign, a fraction, a unit, spaces inside, garbage, an
// empty value, a longer number) is ignored, as is a request with several
// different values; "0" means the caller has gone already, and the
// handler's context is done when it starts. Put Deadline outside
// LoadShedder, so that the shedder sees the deadline (docs/deadlines.md).
//
// A request without the header costs a header lookup; one with it, a
// context with a timer, stopped when the handler returns.
func Deadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		left, ok := TimeLeft(r.Header)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), left)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// TimeLeft returns the time the caller still waits, as h's
// retryhttp.DeadlineHeader says, and whether it says so validly (see
// Deadline for what is ignored). The result is in [0, 99,999,999 ms].
func TimeLeft(h http.Header) (time.Duration, bool) {
	vs := h.Values(retryhttp.DeadlineHeader)
	if len(vs) == 0 {
		return 0, false
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return 0, false
		}
	}
	ms, ok := parseMillis(vs[0])
	return time.Duration(ms) * time.Millisecond, ok
}

// parseMillis parses a decimal integer of 1 to maxDeadlineDigits digits,
// nothing else.
func parseMillis(v string) (int64, bool) {
	if len(v) == 0 || len(v) > maxDeadlineDigits {
		return 0, false
	}
	var ms int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
	}
	return ms, true
}
