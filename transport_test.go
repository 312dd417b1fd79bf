package retryhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
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

// noRedirect is a client that returns 3xx responses instead of following them.
func noRedirect(tr http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name         string
		giveMethod   string
		giveHeader   http.Header
		giveStatus   int
		giveRetryAft string
		wantAttempts int64
	}{
		{name: "GET 503 retried", giveMethod: http.MethodGet, giveStatus: 503, wantAttempts: 4},
		{name: "GET 502 retried", giveMethod: http.MethodGet, giveStatus: 502, wantAttempts: 4},
		{name: "HEAD 503 retried", giveMethod: http.MethodHead, giveStatus: 503, wantAttempts: 4},
		{name: "PUT 503 retried", giveMethod: http.MethodPut, giveStatus: 503, wantAttempts: 4},
		{name: "DELETE 502 retried", giveMethod: http.MethodDelete, giveStatus: 502, wantAttempts: 4},
		{name: "GET 500 not retried", giveMethod: http.MethodGet, giveStatus: 500, wantAttempts: 1},
		{name: "GET 404 not retried", giveMethod: http.MethodGet, giveStatus: 404, wantAttempts: 1},
		{name: "POST 503 not retried", giveMethod: http.MethodPost, giveStatus: 503, wantAttempts: 1},
		{name: "PATCH 502 not retried", giveMethod: http.MethodPatch, giveStatus: 502, wantAttempts: 1},
		{name: "POST 429 retried", giveMethod: http.MethodPost, giveStatus: 429, wantAttempts: 4},
		{
			name: "POST 503 with Idempotency-Key retried", giveMethod: http.MethodPost,
			giveHeader: http.Header{"Idempotency-Key": {"k1"}}, giveStatus: 503, wantAttempts: 4,
		},
		{
			name: "POST 502 with X-Idempotency-Key retried", giveMethod: http.MethodPost,
			giveHeader: http.Header{"X-Idempotency-Key": {"k1"}}, giveStatus: 502, wantAttempts: 4,
		},
		{
			name: "POST 503 with empty Idempotency-Key not retried", giveMethod: http.MethodPost,
			giveHeader: http.Header{"Idempotency-Key": {""}}, giveStatus: 503, wantAttempts: 1,
		},
		{name: "POST 500 with Retry-After retried", giveMethod: http.MethodPost, giveStatus: 500, giveRetryAft: "1", wantAttempts: 4},
		{name: "POST 400 with Retry-After retried", giveMethod: http.MethodPost, giveStatus: 400, giveRetryAft: "1", wantAttempts: 4},
		{name: "POST 200 with Retry-After not retried", giveMethod: http.MethodPost, giveStatus: 200, giveRetryAft: "1", wantAttempts: 1},
		{name: "POST 202 with Retry-After not retried", giveMethod: http.MethodPost, giveStatus: 202, giveRetryAft: "1", wantAttempts: 1},
		{name: "GET 301 with Retry-After not retried", giveMethod: http.MethodGet, giveStatus: 301, giveRetryAft: "1", wantAttempts: 1},
		{name: "GET 307 with Retry-After not retried", giveMethod: http.MethodGet, giveStatus: 307, giveRetryAft: "1", wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				if tt.giveRetryAft != "" {
					w.Header().Set("Retry-After", tt.giveRetryAft)
				}
				if tt.giveStatus/100 == 3 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.giveStatus)
				_, _ = io.WriteString(w, "last words")
			})
			tr := testkit.NewTransport(t)
			clock := testkit.FakeWaits(tr)

			req, err := http.NewRequest(tt.giveMethod, srv.URL, nil)
			require.NoError(t, err)
			for k, v := range tt.giveHeader {
				req.Header[k] = v
			}
			res, err := noRedirect(tr).Do(req)
			require.NoError(t, err)
			body := testkit.ReadAll(t, res)

			assert.Equal(t, tt.wantAttempts, srv.Attempts.Load(), "attempts seen by the server")
			assert.Equal(t, tt.giveStatus, res.StatusCode)
			if tt.giveMethod != http.MethodHead {
				assert.Equal(t, "last words", body, "the last response is returned intact")
			}
			delays := clock.Sleeps()
			assert.Len(t, delays, int(tt.wantAttempts-1), "one wait before each retry")
			for _, d := range delays {
				if tt.giveRetryAft != "" {
					// Retry-After: 1 with the default ±1/3 jitter.
					assert.InDelta(t, time.Second, d, float64(time.Second/3))
				} else {
					assert.Less(t, d, 10*time.Second)
				}
			}
		})
	}
}

func TestDefaultBackoffGrows(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	tr := testkit.NewTransport(t)
	clock := testkit.FakeWaits(tr)
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	testkit.ReadAll(t, res)
	delays := clock.Sleeps()

	require.Len(t, delays, 3)
	for i, d := range delays {
		ceiling := 250 * time.Millisecond << i // full jitter: [0, 250ms·2^(retry−1))
		assert.GreaterOrEqual(t, d, time.Duration(0), "retry %d", i+1)
		assert.Less(t, d, ceiling, "retry %d", i+1)
	}
}

func TestWithMaxRetries(t *testing.T) {
	tests := []struct {
		give int
		want int64
	}{
		{give: 0, want: 1},
		{give: 1, want: 2},
		{give: -1, want: 1},
		{give: 5, want: 6},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.give), func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.Always(503))
			tr := testkit.NewTransport(t, retryhttp.WithMaxRetries(tt.give), testkit.NoDelay)

			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			assert.Equal(t, 503, res.StatusCode)
			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

func TestWithShouldRetryFn(t *testing.T) {
	tests := []struct {
		name       string
		giveStatus int
		giveFn     retryhttp.ShouldRetryFn
		want       int64
	}{
		{
			name: "retries what the default does not", giveStatus: 500,
			giveFn: func(a retryhttp.Attempt) bool { return a.Res != nil && a.Res.StatusCode == 500 },
			want:   4,
		},
		{
			name: "stops what the default retries", giveStatus: 503,
			giveFn: func(retryhttp.Attempt) bool { return false },
			want:   1,
		},
		{name: "nil means the default", giveStatus: 503, giveFn: nil, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.Always(tt.giveStatus))
			tr := testkit.NewTransport(t, retryhttp.WithShouldRetryFn(tt.giveFn), testkit.NoDelay)

			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			assert.Equal(t, tt.giveStatus, res.StatusCode)
			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

func TestWithDelayFnSeesEachAttempt(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	var rec testkit.AttemptRecorder
	var statuses []int
	tr := testkit.NewTransport(t, retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration {
		rec.Record(a)
		statuses = append(statuses, a.Res.StatusCode)
		return -time.Hour // negative: no wait
	}))

	start := time.Now()
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Equal(t, []int{1, 2, 3}, rec.Get(), "Attempt.Count before each retry")
	assert.Equal(t, []int{503, 503, 503}, statuses)
	assert.Equal(t, int64(4), srv.Attempts.Load())
	assert.Less(t, time.Since(start), 5*time.Second, "a negative delay means no wait")
}

func TestContextOverridesTakePrecedence(t *testing.T) {
	never := func(retryhttp.Attempt) bool { return false }
	always5xx := func(a retryhttp.Attempt) bool { return a.Res != nil && a.Res.StatusCode >= 500 }
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
		giveCtx     func(context.Context) context.Context
		giveMethod  string
		giveBody    bool
		giveStatus  int
		want        int64
	}{
		{
			name:        "SetMaxRetries over WithMaxRetries",
			giveOptions: []retryhttp.Option{retryhttp.WithMaxRetries(0)},
			giveCtx:     func(ctx context.Context) context.Context { return retryhttp.SetMaxRetries(ctx, 2) },
			giveMethod:  http.MethodGet, giveStatus: 503, want: 3,
		},
		{
			name:       "SetMaxRetries 0 over the default",
			giveCtx:    func(ctx context.Context) context.Context { return retryhttp.SetMaxRetries(ctx, 0) },
			giveMethod: http.MethodGet, giveStatus: 503, want: 1,
		},
		{
			name:       "SetMaxRetries negative means 0",
			giveCtx:    func(ctx context.Context) context.Context { return retryhttp.SetMaxRetries(ctx, -3) },
			giveMethod: http.MethodGet, giveStatus: 503, want: 1,
		},
		{
			name:        "SetShouldRetryFn over WithShouldRetryFn",
			giveOptions: []retryhttp.Option{retryhttp.WithShouldRetryFn(never)},
			giveCtx:     func(ctx context.Context) context.Context { return retryhttp.SetShouldRetryFn(ctx, always5xx) },
			giveMethod:  http.MethodPost, giveStatus: 500, want: 4,
		},
		{
			name:        "SetShouldRetryFn nil removes an earlier override",
			giveOptions: []retryhttp.Option{retryhttp.WithShouldRetryFn(never)},
			giveCtx: func(ctx context.Context) context.Context {
				return retryhttp.SetShouldRetryFn(retryhttp.SetShouldRetryFn(ctx, always5xx), nil)
			},
			giveMethod: http.MethodGet, giveStatus: 503, want: 1,
		},
		{
			name:       "SetPreventRetryWithBody true over the default",
			giveCtx:    func(ctx context.Context) context.Context { return retryhttp.SetPreventRetryWithBody(ctx, true) },
			giveMethod: http.MethodPut, giveBody: true, giveStatus: 503, want: 1,
		},
		{
			name:        "SetPreventRetryWithBody false over WithPreventRetryWithBody true",
			giveOptions: []retryhttp.Option{retryhttp.WithPreventRetryWithBody(true)},
			giveCtx:     func(ctx context.Context) context.Context { return retryhttp.SetPreventRetryWithBody(ctx, false) },
			giveMethod:  http.MethodPut, giveBody: true, giveStatus: 503, want: 4,
		},
		{
			name: "overrides compose",
			giveCtx: func(ctx context.Context) context.Context {
				return retryhttp.SetShouldRetryFn(retryhttp.SetMaxRetries(ctx, 1), always5xx)
			},
			giveMethod: http.MethodPost, giveStatus: 500, want: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.Always(tt.giveStatus))
			tr := testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.giveOptions...)...)

			var body io.Reader
			if tt.giveBody {
				body = strings.NewReader("payload")
			}
			req, err := http.NewRequestWithContext(tt.giveCtx(context.Background()), tt.giveMethod, srv.URL, body)
			require.NoError(t, err)
			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			assert.Equal(t, tt.giveStatus, res.StatusCode)
			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

func TestSetDelayFnOverridesWithDelayFn(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	var fromTransport, fromCtx testkit.AttemptRecorder
	tr := testkit.NewTransport(t, retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration {
		fromTransport.Record(a)
		return 0
	}))
	ctx := retryhttp.SetDelayFn(context.Background(), func(a retryhttp.Attempt) time.Duration {
		fromCtx.Record(a)
		return 0
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)

	res, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Equal(t, []int{1, 2, 3}, fromCtx.Get())
	assert.Empty(t, fromTransport.Get())
}

func TestZeroValueTransport(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.StatusThen(503, 1))
	tr := &retryhttp.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	res, err := client.Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, 200, res.StatusCode)
	assert.Equal(t, int64(2), srv.Attempts.Load())

	res, err = client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, int64(3), srv.Attempts.Load())
}

// resetServer is a raw TCP server that reads each request and answers it by
// resetting the connection.
type resetServer struct {
	ln      net.Listener
	accepts atomic.Int64
	done    chan struct{}
}

func newResetServer(t *testing.T) *resetServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &resetServer{ln: ln, done: make(chan struct{})}
	go s.serve()
	t.Cleanup(func() {
		ln.Close()
		<-s.done
	})
	return s
}

func (s *resetServer) serve() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepts.Add(1)
		if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
		}
		_ = c.(*net.TCPConn).SetLinger(0) // close with RST
		c.Close()
	}
}

func (s *resetServer) url() string { return "http://" + s.ln.Addr().String() }

func TestConnectionResetRetriesExhausted(t *testing.T) {
	srv := newResetServer(t)
	tr := testkit.NewTransport(t, testkit.NoDelay)

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodGet, srv.url(), nil))

	require.Error(t, err)
	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	assert.ErrorIs(t, err, syscall.ECONNRESET, "the underlying error is reachable")
	var opErr *net.OpError
	assert.ErrorAs(t, err, &opErr)
	assert.Equal(t, int64(4), srv.accepts.Load())
}

func TestConnectionResetPOSTNotRetried(t *testing.T) {
	srv := newResetServer(t)
	tr := testkit.NewTransport(t, testkit.NoDelay)

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPost, srv.url(), strings.NewReader("x")))

	require.Error(t, err)
	assert.Nil(t, res)
	assert.NotErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	assert.Equal(t, int64(1), srv.accepts.Load())
}

func TestConnectionRefusedPOSTRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nobody listens there now

	var dials atomic.Int64
	dialer := &net.Dialer{}
	base := &http.Transport{DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, address)
	}}
	tr := testkit.NewTransport(t, retryhttp.WithTransport(base), testkit.NoDelay)

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPost, "http://"+addr, strings.NewReader("x")))

	require.Error(t, err)
	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	var opErr *net.OpError
	assert.ErrorAs(t, err, &opErr)
	assert.Equal(t, int64(4), dials.Load())
}

func TestDiscardedResponsesLetConnectionsBeReused(t *testing.T) {
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 1 {
			w.WriteHeader(503)
			_, _ = w.Write(testkit.Payload(4 << 10))
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget)
	client := &http.Client{Transport: tr}

	for range 50 {
		res, err := client.Get(srv.URL)
		require.NoError(t, err)
		require.Equal(t, "ok", testkit.ReadAll(t, res))
	}

	assert.Equal(t, int64(100), srv.Attempts.Load())
	assert.LessOrEqual(t, srv.Conns.Load(), int64(2), "discarded bodies are drained, so connections are reused")
}

func TestDiscardedEndlessBodyDoesNotBlock(t *testing.T) {
	tests := []struct {
		name              string
		giveContentLength string
	}{
		{name: "chunked"},
		{name: "huge Content-Length", giveContentLength: "1099511627776"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				if n > 1 {
					_, _ = io.WriteString(w, "ok")
					return
				}
				if tt.giveContentLength != "" {
					w.Header().Set("Content-Length", tt.giveContentLength)
				}
				w.WriteHeader(503)
				chunk := testkit.Payload(32 << 10)
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			})
			tr := testkit.NewTransport(t, testkit.NoDelay)

			start := time.Now()
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			assert.Equal(t, "ok", testkit.ReadAll(t, res))
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Equal(t, int64(2), srv.Attempts.Load())
		})
	}
}

// getWithID sends a GET carrying id as its X-Request-Id and returns the body.
func getWithID(client *http.Client, url, id string) (string, int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("X-Request-Id", id)
	res, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), res.StatusCode, err
}

func TestManyRetriedRequestsUseFewConnections(t *testing.T) {
	const workers, perWorker = 4, 50
	srv := testkit.NewCountingServer(t, testkit.FailFirstAttempts(func(string) bool { return true }))
	// An idle pool that never closes a connection for want of room, so that
	// only discarded responses could cost connections.
	base := &http.Transport{MaxIdleConnsPerHost: 100}
	tr := testkit.NewTransport(t, retryhttp.WithTransport(base), testkit.NoDelay, testkit.UnlimitedBudget)
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	var oks atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				body, status, err := getWithID(client, srv.URL, fmt.Sprintf("%d-%d", w, i))
				if assert.NoError(t, err) && status == 200 && body == "ok" {
					oks.Add(1)
				}
			}
		}()
	}
	wg.Wait()

	assert.Equal(t, int64(workers*perWorker), oks.Load())
	assert.Equal(t, int64(2*workers*perWorker), srv.Attempts.Load(), "each request was retried once")
	assert.LessOrEqual(t, srv.Conns.Load(), int64(2*workers), "connections stay bounded")
}

func TestConcurrentUse(t *testing.T) {
	const workers, perWorker = 64, 4
	var failed atomic.Int64
	srv := testkit.NewCountingServer(t, testkit.FailFirstAttempts(func(id string) bool {
		var w, i int
		_, _ = fmt.Sscanf(id, "%d-%d", &w, &i)
		if (w*perWorker+i)%3 == 0 {
			failed.Add(1)
			return true
		}
		return false
	}))
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget)
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	var oks atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				body, status, err := getWithID(client, srv.URL, fmt.Sprintf("%d-%d", w, i))
				if assert.NoError(t, err) && assert.Equal(t, 200, status) && body == "ok" {
					oks.Add(1)
				}
			}
		}()
	}
	wg.Wait()

	assert.Equal(t, int64(workers*perWorker), oks.Load(), "every request ends 200")
	assert.Equal(t, int64(workers*perWorker/3+1), failed.Load(), "a third of the requests failed once")
	assert.Equal(t, int64(workers*perWorker)+failed.Load(), srv.Attempts.Load())
}

// upgradeBackend is a server that switches every request to an echo protocol.
func upgradeBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		if brw.Flush() != nil {
			return
		}
		_, _ = io.Copy(conn, brw) // echo until the client closes
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSwitchingProtocolsThroughReverseProxy(t *testing.T) {
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
	}{
		{name: "no attempt timeout"},
		{name: "attempt timeout", giveOptions: []retryhttp.Option{retryhttp.WithAttemptTimeout(5 * time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend := upgradeBackend(t)
			backendURL, err := url.Parse(backend.URL)
			require.NoError(t, err)
			tr := testkit.NewTransport(t, tt.giveOptions...)
			proxy := httptest.NewServer(&httputil.ReverseProxy{
				Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(backendURL) },
				Transport: tr,
			})
			t.Cleanup(proxy.Close)

			client := &http.Client{Transport: &http.Transport{}}
			t.Cleanup(client.CloseIdleConnections)
			req := testkit.NewRequest(t, http.MethodGet, proxy.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")
			res, err := client.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()

			require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
			assert.Equal(t, "echo", res.Header.Get("Upgrade"))
			rwc, ok := res.Body.(io.ReadWriteCloser)
			require.True(t, ok, "an upgraded body is writable")
			for _, msg := range []string{"hello", "upgraded world"} {
				_, err = io.WriteString(rwc, msg)
				require.NoError(t, err)
				got := make([]byte, len(msg))
				_, err = io.ReadFull(rwc, got)
				require.NoError(t, err)
				assert.Equal(t, msg, string(got))
			}
		})
	}
}

func TestErrorComesWithoutResponse(t *testing.T) {
	errBase := errors.New("base failed")
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
	}{
		{name: "no attempt timeout"},
		{name: "attempt timeout", giveOptions: []retryhttp.Option{retryhttp.WithAttemptTimeout(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &testkit.CloseBody{Reader: strings.NewReader("half a response")}
			var calls atomic.Int64
			base := roundTripFunc(func(*http.Request) (*http.Response, error) {
				calls.Add(1)
				return &http.Response{StatusCode: 503, Header: http.Header{}, Body: body}, errBase
			})
			tr := retryhttp.New(append([]retryhttp.Option{retryhttp.WithTransport(base), testkit.NoDelay}, tt.giveOptions...)...)

			res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodGet, "http://example.invalid", nil))

			assert.Nil(t, res)
			assert.ErrorIs(t, err, errBase)
			assert.True(t, body.Closed.Load(), "the response the base returned with its error is closed")
			assert.Equal(t, int64(1), calls.Load())
		})
	}
}

func TestNilResponseAndNilErrorIsAnError(t *testing.T) {
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
	tr := retryhttp.New(retryhttp.WithTransport(base), testkit.NoDelay)

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodGet, "http://example.invalid", nil))

	assert.Nil(t, res)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "retryhttp: ")
}
