package destinations_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind; the idle
// connections of the process's shared base transport are closed first.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closeSharedPoolAfter{m})
}

// closeSharedPoolAfter runs the tests, then closes the shared pool's idle
// connections.
type closeSharedPoolAfter struct{ m *testing.M }

func (c closeSharedPoolAfter) Run() int {
	code := c.m.Run()
	retryhttp.New().CloseIdleConnections()
	return code
}

func ptr[T any](v T) *T { return &v }

// loopbackNames returns a base transport that dials 127.0.0.1 whatever the
// host name of the URL, keeping its port: so that tests on loopback can name
// servers api.example.test, db.example.test and so on.
func loopbackNames(t *testing.T) *http.Transport {
	base := cleanhttp.DefaultPooledTransport()
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// getVia sends a GET to url through rt and closes the response.
func getVia(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := rt.RoundTrip(req)
	require.NoError(t, err)
	res.Body.Close()
}

func mustRequest(t testing.TB, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// noDelay makes every wait between attempts zero.
var noDelay = retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })

// unlimitedBudget turns the transport's retry budget off.
var unlimitedBudget = retryhttp.WithRetryBudget(nil)

// noParking gives a transport a budget of its own with opts, without
// parking, so that the counts of retries are the buckets'.
func noParking(opts retryhttp.RetryBudgetOptions) retryhttp.Option {
	opts.NoParking = true
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(opts))
}

// newTransport returns a Transport with a budget of its own (a later
// WithRetryBudget replaces it), whose idle connections are closed when the
// test ends.
func newTransport(t *testing.T, options ...retryhttp.Option) *retryhttp.Transport {
	t.Helper()
	own := retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{}))
	tr := retryhttp.New(append([]retryhttp.Option{own}, options...)...)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// countingServer is a loopback server that counts the requests it gets.
type countingServer struct {
	*httptest.Server
	attempts atomic.Int64
}

// newCountingServer starts a countingServer whose handler h gets the
// number of each request (1 for the first), closed when the test ends.
func newCountingServer(t testing.TB, h func(n int64, w http.ResponseWriter, r *http.Request)) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.attempts.Add(1), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) port() string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// always answers every request with status.
func always(status int) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
