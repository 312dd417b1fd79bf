package retryhttp

import (
	"context"
	"io"
	"net/http"
	"time"
)

// sendWithTimeout sends one attempt bounded by timeout, from the request
// being written to the response headers arriving. The timeout does not bound
// the body of a returned response: that body keeps the attempt's context
// alive until it is closed, and closing it releases the context.
//
// When the attempt's own timer fired (and not the caller's context), the
// error is ErrAttemptTimeout and any response is closed.
func sendWithTimeout(c Clock, rt http.RoundTripper, req *http.Request, timeout time.Duration) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancelCause(parent)
	timer := c.AfterFunc(timeout, func() { cancel(ErrAttemptTimeout) })

	res, err := rt.RoundTrip(req.WithContext(ctx))

	fired := !timer.Stop()
	if fired && parent.Err() == nil {
		if res != nil && res.Body != nil {
			res.Body.Close()
		}
		cancel(nil)
		return nil, errAttemptTimedOut(timeout)
	}
	if err != nil || res == nil || res.Body == nil || res.Body == http.NoBody {
		cancel(nil) // nothing left to read: release the attempt now
		return res, err
	}
	res.Body = newCancelBody(res.Body, cancel, timer, timeout)
	return res, nil
}

// newCancelBody wraps body so that closing it also cancels the attempt's
// context. A body that is also an io.Writer (that of a 101 Switching
// Protocols response) stays one, so protocol upgrades through
// httputil.ReverseProxy keep working.
func newCancelBody(body io.ReadCloser, cancel context.CancelCauseFunc, timer Timer, timeout time.Duration) io.ReadCloser {
	b := cancelBody{ReadCloser: body, cancel: cancel, timer: timer, timeout: timeout}
	if rwc, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWCBody{b, rwc}
	}
	return &b
}

// cancelBody cancels the attempt's context when closed.
type cancelBody struct {
	io.ReadCloser
	cancel  context.CancelCauseFunc
	timer   Timer // stopped; rearmed to bound the draining of a discarded body
	timeout time.Duration
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.timer.Stop()
	b.cancel(nil)
	return err
}

// rearm starts the attempt's timer again, so that draining a discarded body
// takes at most the attempt timeout or limit, whichever is shorter.
func (b *cancelBody) rearm(limit time.Duration) { b.timer.Reset(min(b.timeout, limit)) }

// cancelRWCBody is a cancelBody that can also be written to.
type cancelRWCBody struct {
	cancelBody
	rwc io.ReadWriteCloser
}

func (b *cancelRWCBody) Write(p []byte) (int, error) { return b.rwc.Write(p) }
