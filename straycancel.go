package retryhttp

import (
	"context"
	"errors"
	"net/http"
)

// A stray cancellation is the error context.Canceled for an attempt whose
// own context was not cancelled: another request's cancellation closed the
// connection this attempt was given.
//
// net/http's HTTP/1 Transport has a window in which this happens. When a
// response without a body arrives, its read loop puts the connection back in
// the idle pool (or hands it to a request waiting for one) before it hands
// the response to the request's RoundTrip. If that request's context is
// cancelled in between, its RoundTrip, seeing no response yet, closes the
// connection and records the cancellation as the connection's error; the
// request that now holds the connection fails with that error,
// context.Canceled, though nobody cancelled it. Hedging cancels attempts all
// the time (every loser), so its requests and any others sharing the base
// transport meet it now and then under concurrency; so do any callers that
// cancel requests.
//
// Such an attempt lost its connection, possibly after its request was
// written: it is judged as a lost connection (isConnLost), retried when the
// request is idempotent, and not taken for the caller's cancellation.

// errStrayCancel is joined with the error of an attempt that met a stray
// cancellation.
var errStrayCancel = errors.New("retryhttp: connection closed by another request's cancellation")

// strayCancel returns err, the error of an attempt sent as req, marked with
// errStrayCancel when it is a stray cancellation: context.Canceled while
// req's own context is not done. Any other err is returned as it is.
func strayCancel(req *http.Request, err error) error {
	if err == nil || !errors.Is(err, context.Canceled) || req.Context().Err() != nil {
		return err
	}
	return joinErr(errStrayCancel, err)
}
