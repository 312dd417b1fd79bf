package inbound

import (
	"bufio"
	"context"
	"net"
	"net/http"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/hop"
)

// Pushback wraps the inbound side of a service (a handler whose outbound
// calls go through retryhttp Transports) so that its failures say "don't
// retry" to its callers when it already retried, or when a service behind
// it said so.
//
// The rule: the handler's response gets retryhttp.RetrySignalHeader:
// no-retry if, and only if, both hold when its status is written:
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
		if hop.OutcomeFrom(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		pw := &pushbackWriter{rw: w}
		next.ServeHTTP(pw, r.WithContext(hop.WithOutcome(r.Context(), &pw.outbound)))
	})
}

// ExcludeFromPushback returns a context whose outbound requests do not count
// for the rule of Pushback: use it for best-effort calls (an audit log, a
// cache fill) whose failure the handler does not pass on, so that their
// give-ups do not mark a failure that came from elsewhere.
func ExcludeFromPushback(ctx context.Context) context.Context {
	return hop.WithOutcome(ctx, nil)
}

// pushbackWriter is the ResponseWriter of a handler wrapped by Pushback,
// with the record of its outbound give-ups. The handler's goroutines may
// report give-ups concurrently; the writer's own methods are called by the
// handler as for any ResponseWriter.
type pushbackWriter struct {
	rw       http.ResponseWriter
	outbound hop.Outcome // an outbound request gave up, or was told to
	wrote    bool        // the status has been written
}

// Header returns the underlying writer's header.
func (w *pushbackWriter) Header() http.Header { return w.rw.Header() }

// WriteHeader marks the response before the status is written, if the rule
// of Pushback holds.
func (w *pushbackWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 { // 1xx are not the final status
		w.wrote = true
		if hop.FailedStatus(code) && w.outbound.GaveUp() && !retryhttp.HasRetrySignal(w.rw.Header()) {
			w.rw.Header().Add(retryhttp.RetrySignalHeader, retryhttp.RetrySignalNoRetry)
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
