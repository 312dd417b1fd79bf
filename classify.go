package retryhttp

import (
	"errors"
	"net"

	"github.com/seed2409de8f/retryhttp/internal/errclass"
)

// Error classification: what an attempt's error says about whether its
// request reached the server (a DNS or dial error: never; a timeout or a lost
// connection: maybe). DefaultShouldRetryFn (shouldretry.go), the budget's
// refund of a retry after a lost connection (transport.go), the watch of
// requests written before a dial error (writewatch.go) and the error kinds
// of the hooks (hooks.go) read it. The mechanism is in internal/errclass.

// IsDNSErr reports whether err is, or wraps, a *net.DNSError: the name of the
// server could not be resolved, so no request was sent.
func IsDNSErr(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// IsTimeoutErr reports whether err is, or wraps, an error whose Timeout method
// reports true (a net.Error timeout, os.ErrDeadlineExceeded,
// context.DeadlineExceeded or ErrAttemptTimeout, among others). Every error
// in the tree counts, not only the first with a Timeout method.
func IsTimeoutErr(err error) bool {
	return errclass.AnyInTree(err, func(e error) bool {
		t, ok := e.(interface{ Timeout() bool })
		return ok && t.Timeout()
	})
}

// isDialErr reports whether err comes from dialing: the request was never
// written (errclass.Dial).
func isDialErr(err error) bool { return errclass.Dial(err) }

// isConnLost reports whether the connection broke before a response
// arrived (errclass.ConnLost), or another request's cancellation closed it
// (straycancel.go).
func isConnLost(err error) bool {
	return errors.Is(err, errStrayCancel) || errclass.ConnLost(err)
}
