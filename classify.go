package retryhttp

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Error classification: what an attempt's error says about whether its
// request reached the server (a DNS or dial error: never; a timeout or a lost
// connection: maybe). DefaultShouldRetryFn (shouldretry.go), the budget's
// refund of a retry after a lost connection (transport.go), the watch of
// requests written before a dial error (idempotency.go) and the error kinds
// of the hooks (hooks.go) read it.

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
	return anyInTree(err, func(e error) bool {
		t, ok := e.(interface{ Timeout() bool })
		return ok && t.Timeout()
	})
}

// anyInTree reports whether match holds for err or any error it wraps, at any
// depth and on every branch. Unlike errors.As, it does not stop at the first
// error of a type: a wrapper that answers no does not hide a yes below it.
func anyInTree(err error, match func(error) bool) bool {
	if err == nil {
		return false
	}
	if match(err) {
		return true
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return anyInTree(e.Unwrap(), match)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if anyInTree(inner, match) {
				return true
			}
		}
	}
	return false
}

// anyLeaf reports whether match holds for a leaf of err's tree: an error
// that wraps no other. Messages are matched on leaves only: a wrapper's
// message repeats those below it, so matching every node's message costs
// time cubic in the depth of the tree (every Error call rebuilds the text
// below it).
func anyLeaf(err error, match func(error) bool) bool {
	for err != nil {
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			inner := e.Unwrap()
			if inner == nil {
				return match(err)
			}
			err = inner
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if anyLeaf(inner, match) {
					return true
				}
			}
			return false
		default:
			return match(err)
		}
	}
	return false
}

// isDialErr reports whether err comes from dialing: the connection was never
// made, so the request was never written.
func isDialErr(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || hasDialOp(err)
}

// hasDialOp reports whether err wraps a *net.OpError whose Op is "dial", at
// any depth: net/http wraps a failed dial to a proxy in an OpError of its own
// ("proxyconnect"), and errors.As stops at the first.
func hasDialOp(err error) bool {
	var opErr *net.OpError
	for errors.As(err, &opErr) {
		if opErr.Op == "dial" {
			return true
		}
		err = opErr.Err
	}
	return false
}

// isConnLost reports whether the connection broke before a response arrived:
// a reset, a broken pipe, the server closing it early, or a write to a
// connection already closed (net.ErrClosed: net/http closes a keep-alive
// connection when it sees the server close it, which can be while a request
// is being written to it); or, in HTTP/2, the stream was reset or the server
// closed the connection after a GOAWAY.
func isConnLost(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		isHTTP2StreamReset(err) ||
		isHTTP2GoAway(err) ||
		isServerClosedIdle(err)
}

// errServerClosedIdleText is the message of net/http's error for a request
// sent on a keep-alive connection that the server closed as idle before
// answering: the race of every HTTP/1 keep-alive pool. net/http retries it
// itself only for requests it can replay; for the others (a PUT whose body
// has no GetBody, say) it reaches us. The error is an unexported variable
// made with errors.New, so its exact message is all there is to match.
const errServerClosedIdleText = "http: server closed idle connection"

// isServerClosedIdle reports whether err, or an error it wraps, is net/http's
// "server closed idle connection".
func isServerClosedIdle(err error) bool {
	return anyLeaf(err, func(e error) bool { return e.Error() == errServerClosedIdleText })
}

// http2StreamError has the fields of net/http's HTTP/2 stream error, an
// unexported copy of golang.org/x/net/http2.StreamError. That error has an As
// method which converts it into any struct with the same field names and
// convertible field types, so errors.As matches it by type, without a
// dependency on x/net.
type http2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e http2StreamError) Error() string { return "http2 stream error" }

// isHTTP2StreamReset reports whether err is an HTTP/2 stream error: the
// stream was reset (RST_STREAM) before a response arrived, while the request
// may have been processed. (A REFUSED_STREAM, which proves it was not, is
// retried by net/http itself.)
func isHTTP2StreamReset(err error) bool {
	var se http2StreamError
	return errors.As(err, &se)
}

// http2GoAwayPrefix begins the message of net/http's error for a request in
// flight on a connection that the server closed after sending GOAWAY
// ("http2: server sent GOAWAY and closed the connection; LastStreamID=…"), the
// same as that of golang.org/x/net/http2.GoAwayError. The type is unexported
// and, unlike the stream error, has no As method: its message is all there is
// to match, so only that fixed prefix is matched, at the start of the
// message of an error that wraps no other.
const http2GoAwayPrefix = "http2: server sent GOAWAY and closed the connection"

// isHTTP2GoAway reports whether err, or an error it wraps, is the error of a
// request in flight on a connection the server closed after a GOAWAY.
func isHTTP2GoAway(err error) bool {
	return anyLeaf(err, func(e error) bool {
		return strings.HasPrefix(e.Error(), http2GoAwayPrefix)
	})
}
