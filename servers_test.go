package retryhttp_test

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
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The loopback servers the tests share, in one place: rawServer (HTTP/1.1
// on a raw listener, for the faults httptest cannot produce) and its
// replies, dyingServer (a rawServer that dies and comes back),
// countingServer (an httptest server that counts requests and connections)
// with its handlers (statusThen, always, failFirstAttempts) and its stock
// instances (deadServer, okServer, failOnceServer, startServer for HTTP/1.1
// or HTTP/2), hedgeServer (numbers attempts and records cancellations),
// refusedAddr and deadURL (nobody listens). A server used by one test file
// only stays in that file.

// rawServer is an HTTP/1.1 server written on a raw net.Listener, for the
// faults httptest cannot produce. It reads each request whole, records the
// SHA-256 of its body, and answers with the reply chosen for that request's
// number (1 for the first). Closing it closes every connection and waits for
// its goroutines.
type rawServer struct {
	ln       net.Listener
	choose   func(n int64) reply
	requests atomic.Int64
	conns    atomic.Int64

	mu   sync.Mutex
	sums [][sha256.Size]byte
	open map[net.Conn]struct{}
	wg   sync.WaitGroup
}

// reply writes the answer to one request on c and reports whether c may
// serve another request.
type reply func(c *net.TCPConn) bool

func newRawServer(t *testing.T, choose func(n int64) reply) *rawServer {
	t.Helper()
	return newRawServerAt(t, "127.0.0.1:0", choose)
}

// newRawServerAt is newRawServer listening on addr.
func newRawServerAt(t *testing.T, addr string, choose func(n int64) reply) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s := &rawServer{ln: ln, choose: choose, open: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		s.open[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c.(*net.TCPConn))
	}
}

func (s *rawServer) serveConn(c *net.TCPConn) {
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
		if !s.choose(s.requests.Add(1))(c) {
			return
		}
	}
}

// close stops accepting, closes every connection and waits for the
// goroutines of the server.
func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// received returns the checksums of the request bodies received so far.
func (s *rawServer) received() [][sha256.Size]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][sha256.Size]byte(nil), s.sums...)
}

// head is the status line and headers of a response with a body of n bytes.
func head(status, n int) string {
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: %d\r\nContent-Type: application/octet-stream\r\n\r\n",
		status, http.StatusText(status), n)
}

// replyWith answers status with body, keeping the connection.
func replyWith(status int, body []byte) reply {
	return func(c *net.TCPConn) bool {
		_, err := io.WriteString(c, head(status, len(body))+string(body))
		return err == nil
	}
}

// replyReset resets the connection (RST, not FIN) without answering.
func replyReset(c *net.TCPConn) bool {
	_ = c.SetLinger(0)
	return false
}

// replyResetMidHeader sends part of the response headers, then resets the
// connection.
func replyResetMidHeader(c *net.TCPConn) bool {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl")
	time.Sleep(10 * time.Millisecond) // let the client read the start
	_ = c.SetLinger(0)
	return false
}

// replyCloseMidHeader sends part of the response headers, then closes the
// connection cleanly (FIN).
func replyCloseMidHeader(c *net.TCPConn) bool {
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/pl")
	return false
}

// replyCutBody declares a body of 1000 bytes, sends 100 and closes the
// connection.
func replyCutBody(status int) reply {
	return func(c *net.TCPConn) bool {
		_, _ = io.WriteString(c, head(status, 1000)+string(payload(100)))
		return false
	}
}

// replyNever answers nothing and holds the connection until the client, or
// the server's close, ends it.
func replyNever(c *net.TCPConn) bool {
	_, _ = io.Copy(io.Discard, c)
	return false
}

// replySlowHeaders sends the response headers one byte every step, then the
// body.
func replySlowHeaders(step time.Duration, body []byte) reply {
	return func(c *net.TCPConn) bool {
		h := head(http.StatusOK, len(body))
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

// replyTrickle sends the headers at once, then the body one byte every step.
func replyTrickle(status int, body []byte, step time.Duration) reply {
	return func(c *net.TCPConn) bool {
		if _, err := io.WriteString(c, head(status, len(body))); err != nil {
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

// refusedAddr returns a loopback address nobody listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// countingTransport counts the attempts that reach the base transport.
type countingTransport struct {
	http.RoundTripper
	attempts atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.attempts.Add(1)
	return c.RoundTripper.RoundTrip(req)
}

// deadURL returns the URL of a loopback port on which nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// countingServer is an httptest server that counts the requests it handles
// and the connections it accepts.
type countingServer struct {
	*httptest.Server
	attempts atomic.Int64
	conns    atomic.Int64
}

// handlerFn handles the n-th request (1 for the first) of a countingServer.
type handlerFn func(n int64, w http.ResponseWriter, r *http.Request)

// newCountingServer starts a countingServer on loopback, closed when the test
// ends.
func newCountingServer(t testing.TB, h handlerFn) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.attempts.Add(1), w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// statusThen answers the first failures requests with status, and the others
// with 200 and the body "ok".
func statusThen(status int, failures int64) handlerFn {
	return func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n <= failures {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, http.StatusText(status))
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

// always answers every request with status and its text as body.
func always(status int) handlerFn {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	}
}

// failFirstAttempts answers 503 to the first attempt of each logical request
// (told apart by its X-Request-Id header) for which fail returns true, and 200
// with the body "ok" to everything else.
func failFirstAttempts(fail func(id string) bool) handlerFn {
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

// deadServer answers every request with 503 and the body "down".
func deadServer(t testing.TB) *countingServer {
	return newCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "down")
	})
}

// okServer answers every request with 200.
func okServer(t testing.TB) *countingServer {
	return newCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
}

// failOnceServer fails the first request to each path with 503, and
// answers the others with 200.
func failOnceServer(t testing.TB) *countingServer {
	var mu sync.Mutex
	seen := map[string]bool{}
	return newCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
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

// startServer starts a countingServer on loopback, over TLS with HTTP/2 if
// h2 is set, after configure (if not nil) has set it up. It puts each
// request's connection in its context (connOf).
func startServer(t *testing.T, h handlerFn, h2 bool, configure func(*countingServer)) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.attempts.Add(1), w, r)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // aborted handlers
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
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

// slowHandler is how long a slow attempt holds its answer unless cancelled:
// far longer than any test may take.
const slowHandler = 10 * time.Second

// hedgeServer numbers the attempts it receives (1 for the first to arrive),
// hands each to handle, and records which attempts saw their request
// cancelled.
type hedgeServer struct {
	*httptest.Server
	hits      atomic.Int32
	arrived   chan int // attempt numbers, as they arrive
	cancelled chan int // attempt numbers whose request context ended
}

func newHedgeServer(t *testing.T, handle func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request)) *hedgeServer {
	t.Helper()
	hs := &hedgeServer{arrived: make(chan int, 1024), cancelled: make(chan int, 1024)}
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(hs.hits.Add(1))
		hs.arrived <- n
		handle(hs, n, w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// hold blocks attempt n until its request is cancelled (recorded) or d
// passes, and reports whether it was cancelled.
func (hs *hedgeServer) hold(n int, r *http.Request, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.Context().Done():
		hs.cancelled <- n
		return true
	case <-timer.C:
		return false
	}
}

// waitCancelled waits until the server has seen the cancellation of exactly
// the attempts want.
func (hs *hedgeServer) waitCancelled(t *testing.T, want ...int) {
	t.Helper()
	var got []int
	timeout := time.After(2 * time.Second)
	for len(got) < len(want) {
		select {
		case n := <-hs.cancelled:
			got = append(got, n)
		case <-timeout:
			require.Failf(t, "cancellations not seen", "got %v, want %v (%d attempts arrived)", got, want, hs.hits.Load())
		}
	}
	slices.Sort(got)
	require.Equal(t, want, got)
}

// slowFirst holds the first attempt and answers the others with their number.
func slowFirst(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
	if n == 1 && hs.hold(n, r, slowHandler) {
		return
	}
	fmt.Fprintf(w, "attempt %d", n)
}

// alwaysSlow holds every attempt.
func alwaysSlow(hs *hedgeServer, n int, _ http.ResponseWriter, r *http.Request) {
	hs.hold(n, r, slowHandler)
}

// dyingServer is a rawServer that dies: request 1 warms a keep-alive
// connection up; request 2, the one under test, is acted on, and then the
// server closes the connection without answering and, with refuse, its
// listener, so that the port refuses connections until restart. Every
// request after the warm-up counts as a side effect, the restarted
// server's included.
type dyingServer struct {
	t       *testing.T
	first   atomic.Pointer[rawServer]
	servers []*rawServer // the first, and the restarted one
}

func newDyingServer(t *testing.T, refuse bool) *dyingServer {
	t.Helper()
	d := &dyingServer{t: t}
	first := newRawServer(t, func(n int64) reply {
		if n != 2 {
			return replyWith(http.StatusOK, []byte("ok"))
		}
		return func(*net.TCPConn) bool { // die before answering
			if refuse {
				d.first.Load().ln.Close()
			}
			return false
		}
	})
	d.first.Store(first)
	d.servers = []*rawServer{first}
	return d
}

func (d *dyingServer) url() string { return d.servers[0].url() }

// restart listens again on the same port, as a restarted server does.
func (d *dyingServer) restart() {
	d.servers = append(d.servers, newRawServerAt(d.t, d.servers[0].ln.Addr().String(),
		func(int64) reply { return replyWith(http.StatusOK, []byte("ok")) }))
}

// effects returns the side effects so far: every request but the warm-up.
func (d *dyingServer) effects() int64 {
	n := int64(-1)
	for _, s := range d.servers {
		n += s.requests.Load()
	}
	return n
}
