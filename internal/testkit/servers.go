// Package testkit holds the loopback servers and the small helpers that the
// tests of the root package and the black-box suites under blackbox/ share: a
// test package cannot import another's _test.go files.
package testkit

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RawServer is an HTTP/1.1 server written on a raw net.Listener, for the
// faults httptest cannot produce. It reads each request whole, records the
// SHA-256 of its body, and answers with the Reply chosen for that request's
// number (1 for the first). Closing it closes every connection and waits for
// its goroutines.
type RawServer struct {
	ln       net.Listener
	choose   func(n int64) Reply
	Requests atomic.Int64
	Conns    atomic.Int64

	mu   sync.Mutex
	sums [][sha256.Size]byte
	open map[net.Conn]struct{}
	wg   sync.WaitGroup
}

// Reply writes the answer to one request on c and reports whether c may
// serve another request.
type Reply func(c *net.TCPConn) bool

func NewRawServer(t *testing.T, choose func(n int64) Reply) *RawServer {
	t.Helper()
	return NewRawServerAt(t, "127.0.0.1:0", choose)
}

// NewRawServerAt is NewRawServer listening on addr.
func NewRawServerAt(t *testing.T, addr string, choose func(n int64) Reply) *RawServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := &RawServer{ln: ln, choose: choose, open: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Close)
	return s
}

func (s *RawServer) URL() string { return "http://" + s.ln.Addr().String() }

func (s *RawServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.Conns.Add(1)
		s.mu.Lock()
		s.open[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c.(*net.TCPConn))
	}
}

func (s *RawServer) serveConn(c *net.TCPConn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.sums = append(s.sums, sha256.Sum256(body))
		s.mu.Unlock()
		if !s.choose(s.Requests.Add(1))(c) {
			return
		}
	}
}

// Close stops accepting, closes every connection and waits for the
// goroutines of the server.
func (s *RawServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Received returns the checksums of the request bodies received so far.
func (s *RawServer) Received() [][sha256.Size]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][sha256.Size]byte(nil), s.sums...)
}

// Head is the status line and headers of a response with a body of n bytes.
func Head(status, n int) string {
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: %d\r\nContent-Type: application/octet-stream\r\n\r\n",
		status, http.StatusText(status), n)
}

// ReplyWith answers status with body, keeping the connection.
func ReplyWith(status int, body []byte) Reply {
	return func(c *net.TCPConn) bool {
		_, err := io.WriteString(c, Head(status, len(body))+string(body))
		return err == nil
	}
}

// ReplyReset resets the connection (RST, not FIN) without answering.
func ReplyReset(c *net.TCPConn) bool {
	_ = c.SetLinger(0)
	return false
}

// ReplyResetMidHeader sends part of the response headers, then resets the
// connection.
func ReplyResetMidHeader(c *net.TCPConn) bool {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl")
	time.Sleep(10 * time.Millisecond) // let the client read the start
	_ = c.SetLinger(0)
	return false
}

// ReplyCloseMidHeader sends part of the response headers, then closes the
// connection cleanly (FIN).
func ReplyCloseMidHeader(c *net.TCPConn) bool {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl")
	return false
}

// ReplyCutBody declares a body of 1000 bytes, sends 100 and closes the
// connection.
func ReplyCutBody(status int) Reply {
	return func(c *net.TCPConn) bool {
		_, _ = io.WriteString(c, Head(status, 1000)+string(Payload(100)))
		return false
	}
}

// ReplyNever answers nothing and holds the connection until the client, or
// the server's close, ends it.
func ReplyNever(c *net.TCPConn) bool {
	_, _ = io.Copy(io.Discard, c)
	return false
}

// ReplySlowHeaders sends the response headers one byte every step, then the
// body.
func ReplySlowHeaders(step time.Duration, body []byte) Reply {
	return func(c *net.TCPConn) bool {
		h := Head(http.StatusOK, len(body))
		for i := range len(h) {
			if _, err := io.WriteString(c, h[i:i+1]); err != nil {
				return false
			}
			time.Sleep(step)
		}
		_, err := c.Write(body)
		return err == nil
	}
}

// ReplyTrickle sends the headers at once, then the body one byte every step.
func ReplyTrickle(status int, body []byte, step time.Duration) Reply {
	return func(c *net.TCPConn) bool {
		if _, err := io.WriteString(c, Head(status, len(body))); err != nil {
			return false
		}
		for i := range body {
			time.Sleep(step)
			if _, err := c.Write(body[i : i+1]); err != nil {
				return false
			}
		}
		return true
	}
}

// RefusedAddr returns a loopback address nobody listens on.
func RefusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// CountingTransport counts the attempts that reach the base transport.
type CountingTransport struct {
	http.RoundTripper
	Attempts atomic.Int64
}

func (c *CountingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.Attempts.Add(1)
	return c.RoundTripper.RoundTrip(req)
}

// DeadURL returns the URL of a loopback port on which nothing listens.
func DeadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// CountingServer is an httptest server that counts the requests it handles
// and the connections it accepts.
type CountingServer struct {
	*httptest.Server
	Attempts atomic.Int64
	Conns    atomic.Int64
}

// HandlerFn handles the n-th request (1 for the first) of a CountingServer.
type HandlerFn func(n int64, w http.ResponseWriter, r *http.Request)

// NewCountingServer starts a CountingServer on loopback, closed when the test
// ends.
func NewCountingServer(t testing.TB, h HandlerFn) *CountingServer {
	t.Helper()
	s := &CountingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.Attempts.Add(1), w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.Conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// StatusThen answers the first failures requests with status, and the others
// with 200 and the body "ok".
func StatusThen(status int, failures int64) HandlerFn {
	return func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n <= failures {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, http.StatusText(status))
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

// Always answers every request with status and its text as body.
func Always(status int) HandlerFn {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	}
}

// FailFirstAttempts answers 503 to the first attempt of each logical request
// (told apart by its X-Request-Id header) for which fail returns true, and 200
// with the body "ok" to everything else.
func FailFirstAttempts(fail func(id string) bool) HandlerFn {
	var seen sync.Map
	return func(_ int64, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if _, dup := seen.LoadOrStore(id, true); !dup && fail(id) {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "busy")
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

// DeadServer answers every request with 503 and the body "down".
func DeadServer(t testing.TB) *CountingServer {
	return NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "down")
	})
}

// OKServer answers every request with 200.
func OKServer(t testing.TB) *CountingServer {
	return NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
}

// FailOnceServer fails the first request to each path with 503, and
// answers the others with 200.
func FailOnceServer(t testing.TB) *CountingServer {
	var mu sync.Mutex
	seen := map[string]bool{}
	return NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// StartServer starts a CountingServer on loopback, over TLS with HTTP/2 if
// h2 is set, after configure (if not nil) has set it up. It puts each
// request's connection in its context (ConnOf).
func StartServer(t *testing.T, h HandlerFn, h2 bool, configure func(*CountingServer)) *CountingServer {
	t.Helper()
	s := &CountingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.Attempts.Add(1), w, r)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // aborted handlers
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.Conns.Add(1)
		}
	}
	s.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	if configure != nil {
		configure(s)
	}
	if h2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// connKey is the context key under which newH2Server puts each request's
// connection.
type connKey struct{}

// ConnOf returns the TLS connection r arrived on.
func ConnOf(r *http.Request) net.Conn { return r.Context().Value(connKey{}).(net.Conn) }

// Listener returns the listener s accepts connections on.
func (s *RawServer) Listener() net.Listener { return s.ln }

// CloseIdle makes a server close every connection as soon as it is idle,
// after each response.
func CloseIdle(s *CountingServer) {
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.Conns.Add(1)
		case http.StateIdle:
			c.Close()
		}
	}
}
