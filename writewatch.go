package retryhttp

import (
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// A dial error proves that a request never left the client only if nothing
// below the transport sent it first. net/http, and any base transport, may
// replay a request by itself on a new connection after a reused one died
// with the request written, and then return only the replay's error: a
// refused connection, say, while the server acted on the first send. So
// attempts of requests that only such proof would let the transport retry
// (those not guessed idempotent) are watched: if their request was written
// to a connection, a dial or DNS error that ends them is marked
// (errWrittenFirst), and DefaultShouldRetryFn treats it as a failure after
// the request may have reached the server.

// baseReplaysOnlyUnsent reports whether the base transport is known to
// replay a request not guessed idempotent only when it did not send it: a
// *http.Transport replays a request after writing it only if the request
// is a GET, HEAD, OPTIONS or TRACE, or carries a key under its canonical
// name, which injected keys are not given (withIdempotencyKey), and a
// caller's key makes the request guessed idempotent. Other base transports
// are watched.
func (t *Transport) baseReplaysOnlyUnsent() bool {
	_, ok := t.baseTransport().(*http.Transport)
	return ok
}

// writeWatch records whether the current attempt's request headers were
// written to a connection, by any send of that attempt, through its trace.
type writeWatch struct {
	wrote atomic.Bool
	trace httptrace.ClientTrace
}

// watchWrites returns a copy of req whose context reports its writes to
// the returned watch (httptrace); the caller's own ClientTrace, if any,
// still runs. It is called once per request: every attempt's request is
// the copy or a copy of it (replay), and carries its context; the watch is
// reset before each attempt (reset).
func watchWrites(req *http.Request) (*http.Request, *writeWatch) {
	w := &writeWatch{}
	w.trace.WroteHeaders = func() { w.wrote.Store(true) }
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &w.trace)), w
}

// reset forgets the writes of the previous attempt, if w is not nil.
func (w *writeWatch) reset() {
	if w != nil {
		w.wrote.Store(false)
	}
}

// mark returns err, marked if the request had been written before it; a
// nil w (nothing watched) leaves it as it is.
func (w *writeWatch) mark(err error) error {
	if w == nil || err == nil || !w.wrote.Load() || !(IsDNSErr(err) || isDialErr(err)) {
		return err
	}
	return errWrittenFirst{err}
}

// errWrittenFirst is a dial or DNS error met after the attempt's request
// had been written to a connection: by a replay below the transport, so the
// request may have been processed. It unwraps to the error.
type errWrittenFirst struct{ error }

func (e errWrittenFirst) Error() string {
	return "retryhttp: request sent, then resent by a lower layer, which failed (the request may have been processed): " + e.error.Error()
}

func (e errWrittenFirst) Unwrap() error { return e.error }

// writtenFirst reports whether err is marked by errWrittenFirst.
func writtenFirst(err error) bool {
	var w errWrittenFirst
	return errors.As(err, &w)
}
