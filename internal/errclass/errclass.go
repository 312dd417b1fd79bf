// Package errclass classifies the error of an attempt by what it says about
// whether the request reached the server: a dial error (never), a lost
// connection (maybe). Package retryhttp's IsDNSErr and IsTimeoutErr, its
// DefaultShouldRetryFn, the hooks' error kinds, hedging, the budget's refund
// of a retry after a lost connection and the write watch read it. Errors
// are matched by type, by errors.Is, and (where net/http leaves nothing
// else) by the fixed message of an error that wraps no other.
package errclass

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// AnyInTree reports whether match holds for err or any error it wraps, at any
// depth and on every branch. Unlike errors.As, it does not stop at the first
// error of a type: a wrapper that answers no does not hide a yes below it.
func AnyInTree(err error, match func(error) bool) bool {
	if err == nil {
		return false
	}
	if match(err) {
		return true
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return AnyInTree(e.Unwrap(), match)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if AnyInTree(inner, match) {
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

// Dial reports whether err comes from dialing: the connection was never
// made, so the request was never written. A proxy's refusal to open a
// tunnel to the server is one (TunnelRefused).
func Dial(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || hasDialOp(err) || TunnelRefused(err)
}

// TunnelRefused reports whether err is net/http's error for a proxy that
// answered a CONNECT with 502, 503 or 504: it could not reach the server,
// or would not try now, so the tunnel was never opened and the request
// never left the client. net/http (Go 1.23 to 1.26 alike) returns the
// reason phrase of the proxy's status line, and nothing else, as the
// error: errors.New("Service Unavailable"). So the whole message of an
// error that wraps no other is matched against the standard phrases of
// those three codes; a proxy that words its refusal otherwise is not
// recognised. Other refusals (403, 407) are not transient, and not matched.
func TunnelRefused(err error) bool {
	return anyLeaf(err, func(e error) bool {
		switch e.Error() {
		case "Bad Gateway", "Service Unavailable", "Gateway Timeout":
			return true
		}
		return false
	})
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

// ConnLost reports whether the connection broke before a response arrived:
// a reset, a broken pipe, the server closing it early, or a write to a
// connection already closed (net.ErrClosed: net/http closes a keep-alive
// connection when it sees the server close it, which can be while a request
// is being written to it); or, in HTTP/2, the stream was reset or the server
// closed the connection after a GOAWAY.
func ConnLost(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		isHTTP2StreamResetAs(err) ||
		anyLeaf(err, func(e error) bool { return lostByMessage(e.Error()) })
}

// lostByMessage reports whether msg, the message of an error that wraps no
// other, says that the connection or stream was lost before a response:
// net/http's "server closed idle connection", an HTTP/2 GOAWAY, or an
// HTTP/2 stream error of x/net (each below). One pass over the leaves
// matches all three, so that each leaf's Error is called once.
func lostByMessage(msg string) bool {
	return msg == errServerClosedIdleText ||
		strings.HasPrefix(msg, http2GoAwayPrefix) ||
		strings.HasPrefix(msg, http2StreamErrorPrefix)
}

// errServerClosedIdleText is the message of net/http's error for a request
// sent on a keep-alive connection that the server closed as idle before
// answering: the race of every HTTP/1 keep-alive pool. net/http retries it
// itself only for requests it can replay; for the others (a PUT whose body
// has no GetBody, say) it reaches us. The error is an unexported variable
// made with errors.New, so its exact message is all there is to match.
const errServerClosedIdleText = "http: server closed idle connection"

// HTTP/2 stream errors come from two stacks: net/http's bundled copy of
// HTTP/2 and golang.org/x/net/http2, whose Transport a caller may set as the
// base. net/http's error is an unexported copy of x/net's StreamError
// (fields StreamID, Code, Cause) with an As method, which converts it into
// any struct with the same field names and convertible field types:
// errors.As matches it with http2StreamError below, without a dependency
// on x/net. x/net's own StreamError has no such method, and no exported
// method but Error (nor an Unwrap of its Cause): the core does not import
// x/net, so its message, fixed by its Error method ("stream error: stream
// ID 3; INTERNAL_ERROR; received from peer"), is all there is to match,
// and only its fixed prefix is matched, at the start of the message of an
// error that wraps no other. net/http's messages have the same form.
type http2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e http2StreamError) Error() string { return "http2 stream error" }

// http2StreamErrorPrefix begins the message of both stacks' stream errors.
const http2StreamErrorPrefix = "stream error: stream ID "

// isHTTP2StreamResetAs reports whether err is net/http's HTTP/2 stream
// error, matched by errors.As: the stream was reset (RST_STREAM) before a
// response arrived, while the request may have been processed. (A
// REFUSED_STREAM, which proves it was not, is retried by both stacks
// themselves.) x/net's is matched by its message (lostByMessage).
func isHTTP2StreamResetAs(err error) bool {
	var se http2StreamError
	return errors.As(err, &se)
}

// http2GoAwayPrefix begins the message of net/http's error for a request in
// flight on a connection that the server closed after sending GOAWAY
// ("http2: server sent GOAWAY and closed the connection; LastStreamID=…"), the
// same as that of golang.org/x/net/http2.GoAwayError. The type is unexported
// and, unlike the stream error, has no As method: its message is all there is
// to match, so only that fixed prefix is matched, at the start of the
// message of an error that wraps no other. x/net's GoAwayError, exported,
// has fields but no method to match on either.
const http2GoAwayPrefix = "http2: server sent GOAWAY and closed the connection"
