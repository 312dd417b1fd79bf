package retryhttptest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Step answers one request of a Server. The steps below cover the common
// faults; any func with this signature will do, like an http.HandlerFunc.
type Step func(w http.ResponseWriter, r *http.Request)

// Status answers with code, the status text as body, and the headers given
// as name, value pairs: Status(503, "Retry-After", "1"). A name without a
// value is ignored.
func Status(code int, header ...string) Step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Add(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// TooManyRequests answers 429 with Retry-After: the whole seconds of
// retryAfter, rounded up (a Retry-After cannot say less than a second
// except 0).
func TooManyRequests(retryAfter time.Duration) Step {
	secs := (max(retryAfter, 0) + time.Second - 1) / time.Second
	return Status(http.StatusTooManyRequests, "Retry-After", strconv.FormatInt(int64(secs), 10))
}

// Reset closes the connection without answering, with a TCP reset (RST):
// the client sees "connection reset by peer" (or an EOF), as when a server
// crashes or a proxy drops the connection. Used in an HTTP/2 server of your
// own, it resets the stream instead (http.ErrAbortHandler).
func Reset() Step {
	return func(w http.ResponseWriter, _ *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			// HTTP/2 (in a server of your own): reset the stream.
			panic(http.ErrAbortHandler)
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // close with RST, not FIN
		}
		_ = conn.Close()
	}
}

// Hang never answers: when the request's context ends, that is when the
// client gives up (its attempt timed out, say) or the server is closed, it
// drops the connection without a response (http.ErrAbortHandler).
func Hang() Step {
	return func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	}
}

// Request is what a Server records of a request it got.
type Request struct {
	Method string
	Path   string
	Header http.Header // a copy
}

// Server is a loopback HTTP server that answers its n-th request with its
// n-th step, and every request past the last step with the last step. It
// counts and records the requests. It embeds an *httptest.Server: use its
// URL, and Client for a client that trusts it.
type Server struct {
	*httptest.Server
	steps []Step

	mu       sync.Mutex
	received []Request

	// stopped ends when Close is called; so does every request's context,
	// so that steps waiting on it (Hang) return.
	stopped   context.Context
	stop      context.CancelFunc
	closeOnce sync.Once
}

// NewServer starts a Server that plays steps; without steps it answers 200
// OK to everything, and so does a nil step. If tb is not nil the server is closed when the test
// ends; otherwise the caller must Close it (as in an Example).
func NewServer(tb testing.TB, steps ...Step) *Server {
	if tb != nil {
		tb.Helper()
	}
	if len(steps) == 0 {
		steps = []Step{Status(http.StatusOK)}
	}
	s := &Server{steps: steps}
	s.stopped, s.stop = context.WithCancel(context.Background())
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// FailThenSucceed starts a Server that answers the first n requests with
// status and every later one with 200 OK.
func FailThenSucceed(tb testing.TB, n int, status int) *Server {
	if tb != nil {
		tb.Helper()
	}
	steps := make([]Step, 0, max(n, 0)+1)
	for i := 0; i < n; i++ {
		steps = append(steps, Status(status))
	}
	return NewServer(tb, append(steps, Status(http.StatusOK))...)
}

// serve answers one request with its step.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.received)
	s.received = append(s.received, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
	s.mu.Unlock()
	step := s.steps[min(n, len(s.steps)-1)]
	if step == nil {
		step = Status(http.StatusOK)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.stopped, cancel)()
	step(w, r.WithContext(ctx))
}

// Requests returns the number of requests the server got so far.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.received)
}

// Received returns a copy of what the server recorded of each request, in
// the order they arrived. The copy is deep: a caller may change it, header
// maps included, without changing what a later Received returns.
func (s *Server) Received() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.received))
	for i, r := range s.received {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// Close ends the requests that hang, then shuts the server down, waiting
// for its handlers to return. It may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.stop()
		s.Server.Close()
	})
}
