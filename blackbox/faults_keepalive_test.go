package blackbox

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
)

// Connections the server ends between requests.

// TestConnectionsClosedBetweenRequests: servers that end connections between
// requests (HTTP/2 idle GOAWAY, HTTP/1.1 keep-alives turned off or idle
// connections closed) cost no request: each is one attempt for the policy,
// read once by the server, whole. net/http replays a request sent on a
// connection the server had already closed; this transport never sees it.
// The cases run in parallel, each with a server and transports of its own:
// their idle pauses (20 requests each, 10 to 30ms apart) overlap.
func TestConnectionsClosedBetweenRequests(t *testing.T) {
	const perKind = 20
	tests := []struct {
		name  string
		start func(t *testing.T, h testkit.HandlerFn) (*testkit.CountingServer, *http.Transport)
	}{
		{name: "HTTP/2 idle timeout GOAWAY", start: func(t *testing.T, h testkit.HandlerFn) (*testkit.CountingServer, *http.Transport) {
			srv := testkit.StartServer(t, h, true, func(s *testkit.CountingServer) { s.Config.IdleTimeout = 20 * time.Millisecond })
			return srv, h2Base(t, srv.Server)
		}},
		{name: "HTTP/1.1 keep-alives turned off", start: func(t *testing.T, h testkit.HandlerFn) (*testkit.CountingServer, *http.Transport) {
			var srv *testkit.CountingServer
			srv = testkit.StartServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				srv.Config.SetKeepAlivesEnabled(n%2 == 0) // every other response ends its connection
				h(n, w, r)
			}, false, nil)
			return srv, &http.Transport{}
		}},
		{name: "HTTP/1.1 idle connections closed", start: func(t *testing.T, h testkit.HandlerFn) (*testkit.CountingServer, *http.Transport) {
			return testkit.StartServer(t, h, false, testkit.CloseIdle), &http.Transport{}
		}},
	}
	for _, tt := range tests {
		for _, k := range requestKinds {
			t.Run(tt.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				var sums bodySums
				srv, base := tt.start(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
					sums.read(r)
					_, _ = w.Write(okBody)
				})
				t.Cleanup(base.CloseIdleConnections)
				counted := &testkit.CountingTransport{RoundTripper: base}
				tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay)
				var sent []byte
				if k.body {
					sent = testkit.Payload(4 << 10)
				}
				for i := range perKind {
					time.Sleep(time.Duration(1+i%3) * 10 * time.Millisecond) // 10, 20 or 30ms idle
					res, err := tr.RoundTrip(k.newRequest(t, context.Background(), srv.URL, sent))
					wantBody(200, okBody)(t, res, err)
				}

				assert.Equal(t, int64(perKind), counted.Attempts.Load(), "one attempt each")
				assert.Equal(t, int64(perKind), srv.Attempts.Load(), "each read once by the server")
				assert.LessOrEqual(t, srv.Conns.Load(), int64(perKind))
				sums.assertAll(t, sent, perKind)
			})
		}
	}
}

// Regression: an idempotent request written to a keep-alive connection that
// the server closed just before fails with a write on a closed connection
// (net.ErrClosed). net/http does not replay a PUT, and the error was not
// recognised as a lost connection, so the caller got it. Requests are sent
// back to back, so that some meet a connection the server has just closed:
// how many do depends on timing, so the attempts are bounded, not exact; each
// request is still read once by the server, whole.
func TestStaleKeepAliveConnectionIdempotentRetried(t *testing.T) {
	const n = 100
	for _, k := range requestKinds[:3] { // the idempotent kinds
		t.Run(k.name, func(t *testing.T) {
			var sums bodySums
			srv := testkit.StartServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				sums.read(r)
				_, _ = w.Write(okBody)
			}, false, testkit.CloseIdle)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			counted := &testkit.CountingTransport{RoundTripper: base}
			// The budget is not under test here (see
			// TestBudgetLostConnectionRetriesRefundedOnSuccess): how many
			// requests meet a stale connection depends on timing.
			tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay, testkit.UnlimitedBudget)
			var sent []byte
			if k.body {
				sent = testkit.Payload(4 << 10)
			}
			for range n {
				res, err := tr.RoundTrip(k.newRequest(t, context.Background(), srv.URL, sent))
				wantBody(200, okBody)(t, res, err)
			}

			assert.Equal(t, int64(n), srv.Attempts.Load(), "each read once by the server")
			assert.GreaterOrEqual(t, counted.Attempts.Load(), int64(n))
			assert.LessOrEqual(t, counted.Attempts.Load(), int64(2*n), "at most one retry each")
			sums.assertAll(t, sent, n)
		})
	}
}
