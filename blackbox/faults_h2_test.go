package blackbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Connection-level faults: HTTP/2 streams reset, GOAWAY, connections closed
// mid-flight, and HTTP/1.1 keep-alive connections closed by the server
// between requests.

// bodySums records the SHA-256 of the request bodies a server reads.
type bodySums struct {
	mu   sync.Mutex
	sums [][sha256.Size]byte
}

func (b *bodySums) read(r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sums = append(b.sums, sha256.Sum256(data))
}

// assertAll checks that every body read was sent.
func (b *bodySums) assertAll(t *testing.T, sent []byte, n int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Equal(t, testkit.Repeat(sha256.Sum256(sent), n), b.sums, "request bodies byte-identical")
}

// newH2Server starts a countingServer speaking HTTP/2 over TLS on loopback.
// If wrap is not nil, it wraps the listener first.
func newH2Server(t *testing.T, h testkit.HandlerFn, wrap func(net.Listener) net.Listener) *testkit.CountingServer {
	t.Helper()
	return testkit.StartServer(t, h, true, func(s *testkit.CountingServer) {
		if wrap != nil {
			s.Listener = wrap(s.Listener)
		}
	})
}

// h2Base returns a clone of the HTTP/2 client transport of srv: it trusts the
// test certificate of every httptest server.
func h2Base(t *testing.T, srv *httptest.Server) *http.Transport {
	t.Helper()
	base := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// h2StreamError has the fields of net/http's unexported HTTP/2 stream error,
// which converts itself into it through errors.As.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (h2StreamError) Error() string { return "stream error" }

// h2Fault is a fault of the first request to an HTTP/2 server; later requests
// are answered 200 with okBody. With next, they go to another server.
type h2Fault struct {
	fault    func(srv *testkit.CountingServer, w http.ResponseWriter, r *http.Request)
	wrap     func(net.Listener) net.Listener
	next     bool
	checkErr func(t *testing.T, err error) // the error of the first attempt
}

// runH2Fault sends one request of each kind to a fresh server whose first
// request meets f, and checks the attempts, the bodies and the error of the
// first attempt.
func runH2Fault(t *testing.T, f h2Fault) {
	for i, k := range requestKinds {
		t.Run(k.name, func(t *testing.T) {
			var sums bodySums
			var srv *testkit.CountingServer
			srv = newH2Server(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				sums.read(r)
				if n == 1 {
					f.fault(srv, w, r)
					return
				}
				_, _ = w.Write(okBody)
			}, f.wrap)
			base := h2Base(t, srv.Server)
			served := srv // the server that answers the retry
			if f.next {
				served = newH2Server(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
					sums.read(r)
					_, _ = w.Write(okBody)
				}, nil)
				var dials atomic.Int64
				dialer := &net.Dialer{}
				base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					if dials.Add(1) > 1 {
						addr = served.Listener.Addr().String()
					}
					return dialer.DialContext(ctx, network, addr)
				}
			}
			counted := &testkit.CountingTransport{RoundTripper: base}
			var firstErr atomic.Pointer[error]
			tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay,
				retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
					if a.Count == 1 {
						firstErr.Store(&a.Err)
					}
					return retryhttp.DefaultShouldRetryFn(a)
				}))
			var sent []byte
			if k.body {
				sent = testkit.Payload(16 << 10)
			}
			ctx, cancel := context.WithTimeout(context.Background(), matrixDeadline)
			defer cancel()
			req := k.newRequest(t, ctx, srv.URL, sent)
			before := testkit.Snapshot(req)

			res, err := tr.RoundTrip(req)

			want := idemOnly(2)[i] // rule 5: only requests guessed idempotent
			if want == 2 {
				wantBody(200, okBody)(t, res, err)
				assert.Equal(t, 2, res.ProtoMajor)
				require.NotNil(t, firstErr.Load())
				f.checkErr(t, *firstErr.Load())
			} else {
				assert.Nil(t, res)
				f.checkErr(t, err)
			}
			assert.Equal(t, want, counted.Attempts.Load(), "attempts")
			requests := srv.Attempts.Load()
			if f.next {
				requests += served.Attempts.Load()
			}
			assert.Equal(t, want, requests, "requests the servers read")
			sums.assertAll(t, sent, int(want))
			assertUnchanged(t, before, req)
		})
	}
}

// Regression: an HTTP/2 stream reset (RST_STREAM INTERNAL_ERROR) before any
// response is a lost connection, retried for idempotent requests (rule 5); it
// was not recognised, so an idempotent GET was never retried.
func TestH2StreamResetBeforeResponseRetriedWhenIdempotent(t *testing.T) {
	runH2Fault(t, h2Fault{
		fault: func(*testkit.CountingServer, http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) },
		checkErr: func(t *testing.T, err error) {
			var se h2StreamError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, uint32(2), se.Code, "INTERNAL_ERROR")
		},
	})
}

func TestH2ConnectionClosedMidFlight(t *testing.T) {
	runH2Fault(t, h2Fault{
		fault: func(_ *testkit.CountingServer, _ http.ResponseWriter, r *http.Request) {
			testkit.ConnOf(r).Close() // no GOAWAY: the client reads an early EOF
			<-r.Context().Done()
		},
		// An early EOF, or a reset when the server's socket still held
		// unread data as it closed: both a lost connection.
		checkErr: func(t *testing.T, err error) {
			assert.True(t, errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET), "%v", err)
		},
	})
}

// Regression: a request in flight on a connection that the server closed
// after a GOAWAY fails with net/http's GOAWAY error; that is a lost
// connection too, retried for idempotent requests (rule 5), and was not.
func TestH2GoAwayThenCloseMidFlightRetriedWhenIdempotent(t *testing.T) {
	var watch writeWatch
	runH2Fault(t, h2Fault{
		wrap: watch.wrap,
		next: true, // the shut-down server accepts no more connections
		fault: func(srv *testkit.CountingServer, _ http.ResponseWriter, r *http.Request) {
			written := watch.arm()
			go func() { _ = srv.Config.Shutdown(context.Background()) }() // sends GOAWAY
			select {
			case <-written:
				time.Sleep(50 * time.Millisecond) // let the frame reach the client
			case <-time.After(5 * time.Second):
			}
			testkit.ConnOf(r).Close()
			<-r.Context().Done()
		},
		checkErr: func(t *testing.T, err error) {
			assert.ErrorContains(t, err, "http2: server sent GOAWAY and closed the connection")
		},
	})
}

// writeWatch wraps a listener and reports the first write to any of its
// connections after it is armed.
type writeWatch struct {
	mu      sync.Mutex
	written chan struct{}
}

func (w *writeWatch) wrap(ln net.Listener) net.Listener { return &watchListener{ln, w} }

// arm returns a channel closed at the next write.
func (w *writeWatch) arm() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written = make(chan struct{})
	return w.written
}

func (w *writeWatch) wrote() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written != nil {
		close(w.written)
		w.written = nil
	}
}

type watchListener struct {
	net.Listener
	w *writeWatch
}

func (l *watchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchConn{c, l.w}, nil
}

type watchConn struct {
	net.Conn
	w *writeWatch
}

func (c *watchConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.w.wrote()
	return n, err
}

// TestH2GoAwayInFlightCompletes: a graceful shutdown (GOAWAY) while a request
// is in flight lets that request finish: one attempt, its response intact.
func TestH2GoAwayInFlightCompletes(t *testing.T) {
	for _, k := range requestKinds {
		t.Run(k.name, func(t *testing.T) {
			var sums bodySums
			var srv *testkit.CountingServer
			srv = newH2Server(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				sums.read(r)
				go func() { _ = srv.Config.Shutdown(context.Background()) }()
				time.Sleep(100 * time.Millisecond) // GOAWAY goes out meanwhile
				_, _ = w.Write(okBody)
			}, nil)
			counted := &testkit.CountingTransport{RoundTripper: h2Base(t, srv.Server)}
			tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay)
			var sent []byte
			if k.body {
				sent = testkit.Payload(16 << 10)
			}
			req := k.newRequest(t, context.Background(), srv.URL, sent)

			res, err := tr.RoundTrip(req)

			wantBody(200, okBody)(t, res, err)
			assert.Equal(t, int64(1), counted.Attempts.Load())
			assert.Equal(t, int64(1), srv.Attempts.Load())
			sums.assertAll(t, sent, 1)
		})
	}
}
