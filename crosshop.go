package retryhttp

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// Cross-hop retries. In a chain of services that all retry, every hop
// retries the same failure, and the retries multiply. The headers below let
// only the hop directly above a failure retry it: that hop tells its callers
// "I already retried; don't retry me", and they pass the failure up instead
// of sending it again. docs/storms.md gives the arithmetic, the adoption
// path and the trust model.

const (
	// RetrySignalHeader is the response header that carries the cross-hop
	// signal. A response whose RetrySignalHeader holds the token
	// RetrySignalNoRetry (compared without regard to case, among
	// comma-separated tokens) is not retried by DefaultShouldRetryFn nor by
	// the functions of CustomizedShouldRetryFn, whatever its status and its
	// Retry-After. Other values are ignored. Pushback adds it; a handler
	// may also set it itself, on a failure that no caller should retry.
	// LoadShedder's 503s do not carry it: the caller directly above may
	// retry a shed request (docs/shedding.md).
	RetrySignalHeader = "Retry-Pushback"

	// RetrySignalNoRetry is the value of RetrySignalHeader that means "the
	// server, or a server behind it, already retried this failure, or
	// gave up on it: do not retry it".
	RetrySignalNoRetry = "no-retry"

	// AttemptHeader is the request header that carries the attempt number
	// of a retry or a hedge: "2" on the second attempt of a request, "3" on
	// the third, and so on. First attempts do not carry it (so they cost
	// nothing): its absence means attempt 1. See AttemptFromRequest and
	// WithAttemptHeader.
	AttemptHeader = "Retry-Attempt"
)

// WithRetrySignal turns the cross-hop signal on or off for this transport;
// it is on by default. When on, DefaultShouldRetryFn does not retry a
// response carrying RetrySignalHeader: no-retry, and a request sent from a
// handler wrapped with Pushback reports to it how it ended. When off, the
// transport ignores the signal: such responses are retried like any other,
// and the handler's Pushback learns nothing from this transport.
func WithRetrySignal(enabled bool) Option {
	return option(func(s *settings) { s.retrySignal = enabled })
}

// WithAttemptHeader turns the attempt header (AttemptHeader) on or off; it
// is on by default. When on, every attempt after the first, retry or hedge,
// carries its number in AttemptHeader, and a first attempt never carries
// it: a request that arrives with one (copied by a proxy from its own
// inbound request, say) is sent without it. The header goes on a copy of
// the request: the caller's is never modified. When off, requests are sent
// with the headers their caller gave them.
func WithAttemptHeader(enabled bool) Option {
	return option(func(s *settings) { s.attemptHeader = enabled })
}

// AttemptFromRequest returns the attempt number that r carries in
// AttemptHeader, as sent by a Transport (for logs, say): 1 if r carries
// none, or one that is not a positive integer. The caller chooses the
// header's value, so the number is only as trustworthy as the caller; this
// package decides nothing from it.
func AttemptFromRequest(r *http.Request) int {
	v := r.Header.Get(AttemptHeader)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// HasRetrySignal reports whether h carries RetrySignalHeader, under any case
// of its name, with the token RetrySignalNoRetry. It does not allocate.
func HasRetrySignal(h http.Header) bool {
	vs, _ := lookupHeader(h, RetrySignalHeader) // a handler may set it as h["retry-pushback"]
	for _, v := range vs {
		for v != "" {
			var token string
			token, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(token), RetrySignalNoRetry) {
				return true
			}
		}
	}
	return false
}

// Pushback wraps the inbound side of a service (a handler whose outbound
// calls go through Transports) so that its failures say "don't retry" to
// its callers when it already retried, or when a service behind it said so.
//
// The rule: the handler's response gets RetrySignalHeader: no-retry if, and
// only if, both hold when its status is written:
//  1. at least one outbound request sent with the inbound request's context
//     (or a context derived from it) through a Transport ended in a give-up
//     (StopReason.GaveUp: retries exhausted, budget refused, circuit open,
//     a delay too long, a deadline too close), or ended on a failure
//     response that carried the signal itself;
//  2. the handler's own status is a failure: 429, or 500 and above. A
//     handler that recovered (a fallback, a cached answer, a 404) is not
//     marked, whatever its outbound calls did.
//
// The handler passed the failure on, so its callers would only be retrying
// what was already retried below. A handler that calls several backends is
// marked when any one of them gave up and it fails; the rule cannot tell
// which call its failure came from, so send best-effort calls, whose failure
// the handler does not pass on, with a context from ExcludeFromPushback.
// Pushback never removes a signal the handler set itself.
//
// Outbound requests report through the request's context: no global state,
// so concurrent requests and handlers that call backends from several
// goroutines are safe. The wrapped http.ResponseWriter keeps http.Flusher
// and http.Hijacker, and unwraps for http.ResponseController. A handler
// already inside a Pushback (the same request's context) is not wrapped
// again.
func Pushback(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pw, _ := r.Context().Value(pushbackKey{}).(*pushbackWriter); pw != nil {
			next.ServeHTTP(w, r)
			return
		}
		pw := &pushbackWriter{rw: w}
		next.ServeHTTP(pw, r.WithContext(context.WithValue(r.Context(), pushbackKey{}, pw)))
	})
}

// pushbackKey is the context key of the *pushbackWriter of an inbound
// request; a nil one excludes requests from the rule.
type pushbackKey struct{}

// ExcludeFromPushback returns a context whose outbound requests do not count
// for the rule of Pushback: use it for best-effort calls (an audit log, a
// cache fill) whose failure the handler does not pass on, so that their
// give-ups do not mark a failure that came from elsewhere.
func ExcludeFromPushback(ctx context.Context) context.Context {
	return context.WithValue(ctx, pushbackKey{}, (*pushbackWriter)(nil))
}

// pushbackWriter is the ResponseWriter of a handler wrapped by Pushback,
// and the record of its outbound give-ups. The handler's goroutines may
// report give-ups concurrently; the writer's own methods are called by the
// handler as for any ResponseWriter.
type pushbackWriter struct {
	rw     http.ResponseWriter
	gaveUp atomic.Bool // an outbound request gave up, or was told to
	wrote  bool        // the status has been written
}

// pushback tells the Pushback of req's inbound request, if any, that req,
// which ran with s, ended as end says, with res. Only give-ups and
// signalled failures are reported, so a request that succeeds looks up
// nothing: it ended with a status below 400 (StopSuccess), neither a
// give-up nor a failed status, and is not looked at past this inlined
// check.
func (s *settings) pushback(req *http.Request, end ending, res *http.Response) {
	if s.retrySignal && end.why != StopSuccess {
		s.pushbackEnded(req, end, res)
	}
}

// pushbackEnded is pushback for a request that did not succeed.
func (s *settings) pushbackEnded(req *http.Request, end ending, res *http.Response) {
	signalled := res != nil && failedStatus(res.StatusCode) && HasRetrySignal(res.Header)
	if !signalled && !end.why.GaveUp() {
		return
	}
	if pw, _ := req.Context().Value(pushbackKey{}).(*pushbackWriter); pw != nil {
		pw.gaveUp.Store(true)
	}
}

func (w *pushbackWriter) Header() http.Header { return w.rw.Header() }

// WriteHeader marks the response before the status is written, if the rule
// of Pushback holds.
func (w *pushbackWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 { // 1xx are not the final status
		w.wrote = true
		if failedStatus(code) && w.gaveUp.Load() && !HasRetrySignal(w.rw.Header()) {
			w.rw.Header().Add(RetrySignalHeader, RetrySignalNoRetry)
		}
	}
	w.rw.WriteHeader(code)
}

func (w *pushbackWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.rw.Write(p)
}

// Flush writes the status (200 if none was) and flushes the response, if
// the underlying ResponseWriter can.
func (w *pushbackWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush that reports the error of the underlying writer (a
// client gone, or http.ErrNotSupported), as http.ResponseController.Flush
// expects of a writer that can fail.
func (w *pushbackWriter) FlushError() error {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.rw).Flush()
}

// Hijack hands over the connection, if the underlying ResponseWriter can;
// otherwise it returns an error wrapping http.ErrNotSupported.
func (w *pushbackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(w.rw).Hijack()
	if err == nil {
		w.wrote = true
	}
	return conn, buf, err
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (w *pushbackWriter) Unwrap() http.ResponseWriter { return w.rw }
