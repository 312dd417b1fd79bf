package retryhttp

import (
	"net/http"
	"strconv"
	"time"
)

// Deadlines that travel. A service that calls another keeps working, and
// retrying, for a caller that gave up long ago unless it knows when its
// caller gives up. With WithDeadlineHeader, every attempt tells the server
// how long its caller still waits, as a relative duration (no clock is
// compared across machines); package inbound's Deadline bounds the
// handler's context by it, so that the server's own calls through a
// Transport inherit it: one deadline for the whole chain.
// docs/deadlines.md gives the design and the measurements.

// maxDeadlineMillis is the largest value DeadlineHeader carries: 8 digits,
// as gRPC's grpc-timeout, about 27 hours. A longer time left is sent as that.
const maxDeadlineMillis = 99_999_999

// WithDeadlineHeader turns the deadline header (DeadlineHeader) on or off;
// it is off by default. When on, every attempt of a request whose context
// has a deadline, first, retry or hedge, carries the time left before that
// deadline, measured on the transport's Clock (WithClock) when the attempt
// is sent, bounded by the attempt timeout (WithAttemptTimeout) and rounded
// down to the millisecond; a request without a deadline carries none of ours (a value
// its caller set is sent as it is). The header goes on a copy of the
// request: the caller's is never modified.
//
// It is off by default because it tells every server called how long the
// caller waits, third parties included, and because it helps only servers
// that honour it (package inbound's Deadline does): turn it on for the
// services of one system, not for calls to the outside world.
func WithDeadlineHeader(enabled bool) Option {
	return func(t *Transport) { t.deadlineHeader = enabled }
}

// withDeadlineHeader returns req, or a copy of it carrying DeadlineHeader
// if the transport sends it and req's context has a deadline: the time left
// at now, bounded by the attempt's timeout (none if zero).
func (t *Transport) withDeadlineHeader(req *http.Request, timeout time.Duration) *http.Request {
	if !t.deadlineHeader {
		return req
	}
	deadline, ok := req.Context().Deadline()
	if !ok {
		return req
	}
	left := deadline.Sub(t.clock().Now())
	if timeout > 0 {
		left = min(left, timeout)
	}
	c := new(http.Request)
	*c = *req
	c.Header = cloneHeaderPlus(req.Header, DeadlineHeader) // body.go
	c.Header[DeadlineHeader] = []string{formatMillis(left)}
	return c
}

// formatMillis returns d in whole milliseconds, rounded down, in
// [0, maxDeadlineMillis].
func formatMillis(d time.Duration) string {
	ms := min(max(d.Milliseconds(), 0), maxDeadlineMillis)
	return strconv.FormatInt(ms, 10)
}
