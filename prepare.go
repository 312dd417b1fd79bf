package retryhttp

import (
	"fmt"
	"net/http"
)

// WithPrepareRetry sets fn to run before every retry, hedged attempts after
// the first included, never before the first attempt: it may rewrite the
// request (a fresh token, a new signature, a new timestamp).
//
// fn gets a copy made for this attempt alone: the header map, URL and
// trailers are its own (http.Request.Clone), and the body is the attempt's
// fresh copy, so fn may change them freely; the caller's request is never
// touched. A fn that replaces Body takes charge of the body it replaced
// (closing it, or reading from it). The request carries the caller's context, the idempotency key and
// the Retry-Attempt header of the retry, so fn can tell which retry it is
// preparing. fn runs on the goroutine of RoundTrip (for a hedged request
// whose hedge delay passed during attempt 1, on the goroutine that
// coordinates its attempts while RoundTrip waits), one call at a time per
// request; it must be safe for concurrent use across requests.
//
// If fn returns an error, the retry is not sent and RoundTrip returns that
// error wrapped with ErrPrepareRetry ("retryhttp: preparing a retry
// (attempt 2): …"),
// with no response: the previous attempt's response has already been
// closed. A nil fn, the default, prepares nothing.
func WithPrepareRetry(fn func(*http.Request) error) Option {
	return func(t *Transport) { t.prepareRetry = fn }
}

// attemptRequest returns the request to send as attempt n (1 for the first):
// its own body from the replay, and, for a retry, what the PrepareRetry hook
// made of a copy of its own.
func (t *Transport) attemptRequest(body *replay, n int) (*http.Request, error) {
	if n == 1 && body.asIs {
		return body.req, nil // the request itself, as replay.request would say
	}
	req, err := body.request(n)
	if err != nil || n == 1 || t.prepareRetry == nil && t.cookieJar == nil {
		return req, err
	}
	c := req.Clone(req.Context())
	t.addJarCookies(c) // cookies.go
	if t.prepareRetry == nil {
		return c, nil
	}
	if err := t.prepareRetry(c); err != nil {
		closeBody(req)
		if c.Body != req.Body {
			closeBody(c)
		}
		return nil, fmt.Errorf("%w (attempt %d): %w", ErrPrepareRetry, n, err)
	}
	return c, nil
}
