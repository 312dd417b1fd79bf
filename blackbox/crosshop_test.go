package blackbox

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHasRetrySignal(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want bool
	}{
		{"absent", nil, false},
		{"the token", []string{"no-retry"}, true},
		{"any case", []string{"No-Retry"}, true},
		{"in a list", []string{"later, no-retry"}, true},
		{"spaces", []string{"  no-retry  "}, true},
		{"second value", []string{"later", "no-retry"}, true},
		{"other token", []string{"retry"}, false},
		{"prefix only", []string{"no-retry-please"}, false},
		{"empty", []string{""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.give {
				h.Add(retryhttp.RetrySignalHeader, v)
			}
			assert.Equal(t, tt.want, retryhttp.HasRetrySignal(h))
			lower := http.Header{}
			if tt.give != nil {
				lower["retry-pushback"] = tt.give
			}
			assert.Equal(t, tt.want, retryhttp.HasRetrySignal(lower), "under a lower-case name")
		})
	}
}

func TestAttemptFromRequest(t *testing.T) {
	tests := []struct {
		give string // "" for no header
		want int
	}{
		{"", 1}, {"1", 1}, {"2", 2}, {" 7 ", 7}, {"0", 1}, {"-3", 1}, {"two", 1},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.give != "" {
				r.Header.Set(retryhttp.AttemptHeader, tt.give)
			}
			assert.Equal(t, tt.want, retryhttp.AttemptFromRequest(r))
		})
	}
}

// signalled is a response that would be retried but for the signal.
func signalled(status int, extra ...string) *http.Response {
	h := http.Header{retryhttp.RetrySignalHeader: {retryhttp.RetrySignalNoRetry}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return &http.Response{StatusCode: status, Header: h}
}

func TestShouldRetryFnHonoursSignal(t *testing.T) {
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	custom := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{RetryableStatusCodes: []int{500}})
	tests := []struct {
		name    string
		fn      retryhttp.ShouldRetryFn
		give    *http.Response
		ignored bool
		want    bool
	}{
		{"503", retryhttp.DefaultShouldRetryFn, signalled(503), false, false},
		{"429", retryhttp.DefaultShouldRetryFn, signalled(429), false, false},
		{"Retry-After", retryhttp.DefaultShouldRetryFn, signalled(500, "Retry-After", "1"), false, false},
		{"customized", custom, signalled(500), false, false},
		{"ignored by the transport", retryhttp.DefaultShouldRetryFn, signalled(503), true, true},
		{"customized, ignored", custom, signalled(500), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := retryhttp.Attempt{Count: 1, Req: get, Res: tt.give, RetrySignalIgnored: tt.ignored}
			assert.Equal(t, tt.want, tt.fn(a))
		})
	}
}

// signalling answers every request with 503 and the signal.
func signalling(_ int64, w http.ResponseWriter, _ *http.Request) {
	w.Header().Set(retryhttp.RetrySignalHeader, retryhttp.RetrySignalNoRetry)
	w.WriteHeader(http.StatusServiceUnavailable)
}

func TestTransportHonoursSignal(t *testing.T) {
	tests := []struct {
		name string
		opts []retryhttp.Option
		want int64
	}{
		{"defaults", nil, 1},
		{"WithRetrySignal(false)", []retryhttp.Option{retryhttp.WithRetrySignal(false)}, 4},
		{"hedging", []retryhttp.Option{retryhttp.WithHedging(time.Hour, 2)}, 1},
		{"hedging, WithRetrySignal(false)", []retryhttp.Option{retryhttp.WithHedging(time.Hour, 2), retryhttp.WithRetrySignal(false)}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, signalling)
			c := &http.Client{Transport: testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.opts...)...)}
			res, err := c.Get(srv.URL)
			require.NoError(t, err)
			testkit.ReadAll(t, res)
			assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

// attemptHeaders records the AttemptHeader of every request it answers
// ("-" when absent), answering 503 to the first failures ones.
type attemptHeaders struct {
	mu   sync.Mutex
	seen []string
}

func (a *attemptHeaders) handler(failures int64) testkit.HandlerFn {
	return func(n int64, w http.ResponseWriter, r *http.Request) {
		a.record(r)
		_, _ = io.Copy(io.Discard, r.Body)
		testkit.StatusThen(503, failures)(n, w, r)
	}
}

func (a *attemptHeaders) record(r *http.Request) {
	v, ok := r.Header[retryhttp.AttemptHeader]
	a.mu.Lock()
	defer a.mu.Unlock()
	if ok {
		a.seen = append(a.seen, strings.Join(v, ","))
	} else {
		a.seen = append(a.seen, "-")
	}
}

func (a *attemptHeaders) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func TestAttemptHeader(t *testing.T) {
	tests := []struct {
		name       string
		opts       []retryhttp.Option
		method     string
		body       io.Reader
		inbound    string // AttemptHeader on the caller's request, if any
		inboundRaw string // the map key it is set under, if not canonical
		want       []string
	}{
		{name: "GET", method: "GET", want: []string{"-", "2", "3", "4"}},
		{name: "POST with GetBody", method: "POST", body: strings.NewReader("x"), want: []string{"-", "2", "3", "4"}},
		{name: "POST buffered", method: "POST", body: &testkit.CloseBody{Reader: strings.NewReader("x")}, want: []string{"-", "2", "3", "4"}},
		{name: "copied from an inbound request", method: "GET", inbound: "3", want: []string{"-", "2", "3", "4"}},
		{name: "the caller's under a lower-case name", method: "GET", inboundRaw: "retry-attempt", inbound: "3", want: []string{"-", "2", "3", "4"}},
		{name: "the caller's under a mixed-case name", method: "POST", body: strings.NewReader("x"), inboundRaw: "RETRY-attempt", inbound: "7", want: []string{"-", "2", "3", "4"}},
		{name: "off", method: "GET", opts: []retryhttp.Option{retryhttp.WithAttemptHeader(false)}, want: []string{"-", "-", "-", "-"}},
		{name: "off, the caller's kept", method: "GET", inbound: "3", opts: []retryhttp.Option{retryhttp.WithAttemptHeader(false)}, want: []string{"3", "3", "3", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec attemptHeaders
			srv := testkit.NewCountingServer(t, rec.handler(3))
			opts := append([]retryhttp.Option{testkit.NoDelay, testkit.UnlimitedBudget, retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true})}, tt.opts...)
			c := &http.Client{Transport: testkit.NewTransport(t, opts...)}
			req, err := http.NewRequest(tt.method, srv.URL, tt.body)
			require.NoError(t, err)
			switch {
			case tt.inboundRaw != "":
				req.Header[tt.inboundRaw] = []string{tt.inbound}
			case tt.inbound != "":
				req.Header.Set(retryhttp.AttemptHeader, tt.inbound)
			}
			before := req.Header.Clone()
			res, err := c.Do(req)
			require.NoError(t, err)
			assert.Equal(t, "ok", testkit.ReadAll(t, res))
			assert.Equal(t, tt.want, rec.get())
			assert.Equal(t, before, req.Header, "the caller's request is not modified")
		})
	}
}

func TestAttemptHeaderOnHedges(t *testing.T) {
	var rec attemptHeaders
	release := make(chan struct{})
	var once sync.Once
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		if n < 3 {
			<-release // the first two attempts hang until the third answers
		}
		_, _ = io.WriteString(w, "ok")
	})
	defer once.Do(func() { close(release) })
	c := &http.Client{Transport: testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget, retryhttp.WithHedging(10*time.Millisecond, 2))}
	res, err := c.Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	once.Do(func() { close(release) })
	assert.ElementsMatch(t, []string{"-", "2", "3"}, rec.get())
}

// The status a frontend handler answers with after its outbound calls.
type frontendCase struct {
	name     string
	backends []string // kinds of backend the handler calls, in parallel
	status   int      // the handler's own status
	preset   bool     // the handler sets the signal itself
	presetAs string   // the map key it sets it under, if not canonical
	excluded bool     // the calls are sent with ExcludeFromPushback
	want     bool     // the response carries the signal
}

func TestPushbackRule(t *testing.T) {
	backends := map[string]string{
		"dead":   testkit.NewCountingServer(t, testkit.Always(503)).URL,
		"ok":     testkit.NewCountingServer(t, testkit.Always(200)).URL,
		"signal": testkit.NewCountingServer(t, signalling).URL,
		"400":    testkit.NewCountingServer(t, testkit.Always(400)).URL,
	}
	refused := httptest.NewServer(http.NotFoundHandler())
	backends["refused"] = refused.URL
	refused.Close()

	tests := []frontendCase{
		{name: "gave up, passed on 503", backends: []string{"dead"}, status: 503, want: true},
		{name: "gave up, passed on 502", backends: []string{"dead"}, status: 502, want: true},
		{name: "gave up, 429", backends: []string{"dead"}, status: 429, want: true},
		{name: "gave up on errors, 502", backends: []string{"refused"}, status: 502, want: true},
		{name: "gave up, recovered", backends: []string{"dead"}, status: 200, want: false},
		{name: "gave up, answered 404", backends: []string{"dead"}, status: 404, want: false},
		{name: "told not to retry, passed on", backends: []string{"signal"}, status: 503, want: true},
		{name: "told not to retry, recovered", backends: []string{"signal"}, status: 200, want: false},
		{name: "success, failed on its own", backends: []string{"ok"}, status: 500, want: false},
		{name: "not retryable, failed", backends: []string{"400"}, status: 500, want: false},
		{name: "no outbound call, failed", status: 503, want: false},
		{name: "one of two gave up, failed", backends: []string{"ok", "dead"}, status: 500, want: true},
		{name: "excluded side call gave up, failed", backends: []string{"dead"}, excluded: true, status: 503, want: false},
		{name: "set by the handler", status: 503, preset: true, want: true},
		{name: "set by the handler, gave up too", backends: []string{"dead"}, status: 503, preset: true, want: true},
		{name: "set by the handler in lower case, gave up too", backends: []string{"dead"}, status: 503, preset: true, presetAs: "retry-pushback", want: true},
	}
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.OnFakeTime())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			front := httptest.NewServer(inbound.Pushback(frontend(t, tr, backends, tt)))
			defer front.Close()
			res, err := http.Get(front.URL)
			require.NoError(t, err)
			testkit.ReadAll(t, res)
			assert.Equal(t, tt.status, res.StatusCode)
			assert.Equal(t, tt.want, retryhttp.HasRetrySignal(res.Header))
			assert.LessOrEqual(t, len(res.Header.Values(retryhttp.RetrySignalHeader)), 1, "marked once")
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		})
	}
}

// frontend is a handler that calls tt's backends in parallel through tr,
// then answers tt.status.
func frontend(t *testing.T, tr http.RoundTripper, urls map[string]string, tt frontendCase) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wg sync.WaitGroup
		for _, b := range tt.backends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := r.Context()
				if tt.excluded {
					ctx = inbound.ExcludeFromPushback(ctx)
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, urls[b], nil)
				if !assert.NoError(t, err) {
					return
				}
				if res, err := tr.RoundTrip(req); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}()
		}
		wg.Wait()
		switch {
		case tt.presetAs != "":
			w.Header()[tt.presetAs] = []string{retryhttp.RetrySignalNoRetry}
		case tt.preset:
			w.Header().Set(retryhttp.RetrySignalHeader, retryhttp.RetrySignalNoRetry)
		}
		w.WriteHeader(tt.status)
	})
}

func TestPushbackCircuitOpen(t *testing.T) {
	dead := testkit.NewCountingServer(t, testkit.Always(503))
	tr := testkit.NewTransport(t, retryhttp.WithMaxRetries(0),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1, OpenTimeout: time.Hour}))
	h := inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, dead.URL, nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		res.Body.Close()
		w.WriteHeader(res.StatusCode)
	}))
	// No retries: the first request fails without giving up, and opens
	// the circuit; the second is refused by the breaker, a give-up.
	for i, want := range []bool{false, true} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		assert.Equal(t, want, retryhttp.HasRetrySignal(w.Header()), "request %d", i+1)
	}
	assert.Equal(t, int64(1), dead.Attempts.Load())
}

// TestPushbackConcurrent sends many requests at once through one handler:
// each calls a dead and a healthy backend, and passes on the status of
// the one its path names. Only the requests that passed on the dead one's
// failure are marked.
func TestPushbackConcurrent(t *testing.T) {
	urls := map[string]string{
		"dead": testkit.NewCountingServer(t, testkit.Always(503)).URL,
		"ok":   testkit.NewCountingServer(t, testkit.Always(200)).URL,
	}
	// The dead backend's parked retries wait out MaxWait in microseconds
	// (onFakeTime).
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.OnFakeTime())
	front := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		statuses := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for name, url := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, url, nil)
				res, err := tr.RoundTrip(req)
				if !assert.NoError(t, err) {
					return
				}
				res.Body.Close()
				mu.Lock()
				statuses[name] = res.StatusCode
				mu.Unlock()
			}()
		}
		wg.Wait()
		w.WriteHeader(statuses[strings.TrimPrefix(r.URL.Path, "/")])
	})))
	defer front.Close()
	client := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithMaxRetries(0))}

	const n = 100
	var wg sync.WaitGroup
	var marked atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "ok"
			if i%2 == 0 {
				path = "dead"
			}
			res, err := client.Get(front.URL + "/" + path)
			if !assert.NoError(t, err) {
				return
			}
			testkit.ReadAll(t, res)
			want := path == "dead"
			assert.Equal(t, want, retryhttp.HasRetrySignal(res.Header), path)
			if retryhttp.HasRetrySignal(res.Header) {
				marked.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(n/2), marked.Load())
}

// TestPushbackWriter checks that the wrapped ResponseWriter keeps what
// handlers rely on: http.Flusher, http.Hijacker, http.ResponseController,
// informational statuses, and an implicit 200.
func TestPushbackWriter(t *testing.T) {
	dead := testkit.NewCountingServer(t, testkit.Always(503))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	giveUp := func(r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, dead.URL, nil)
		res, err := tr.RoundTrip(req)
		if assert.NoError(t, err) {
			res.Body.Close()
		}
	}
	t.Run("Flusher", func(t *testing.T) {
		front := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			giveUp(r)
			w.WriteHeader(503)
			f, ok := w.(http.Flusher)
			require.True(t, ok)
			f.Flush()
		})))
		defer front.Close()
		assertSignal(t, front.URL, 503, true)
	})
	t.Run("ResponseController", func(t *testing.T) {
		front := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			assert.NoError(t, rc.SetWriteDeadline(time.Now().Add(time.Minute)))
			giveUp(r)
			w.WriteHeader(http.StatusEarlyHints) // not the final status
			w.WriteHeader(502)
			assert.NoError(t, rc.Flush())
		})))
		defer front.Close()
		assertSignal(t, front.URL, 502, true)
	})
	t.Run("Flush errors reach ResponseController", func(t *testing.T) {
		// Regression: the writer had Flush but no FlushError, so
		// ResponseController.Flush never reported a client gone.
		flushErr := make(chan error, 1)
		front := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				_, _ = w.Write(chunk)
				if err := rc.Flush(); err != nil {
					flushErr <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			flushErr <- nil
		})))
		defer front.Close()
		res, err := http.Get(front.URL)
		require.NoError(t, err)
		res.Body.Close() // the client goes away after the headers
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		assert.Error(t, <-flushErr, "the handler learns the client is gone")
	})
	t.Run("implicit 200", func(t *testing.T) {
		front := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			giveUp(r)
			_, _ = io.WriteString(w, "fallback")
		})))
		defer front.Close()
		assertSignal(t, front.URL, 200, false)
	})
	t.Run("Hijacker", func(t *testing.T) {
		front := httptest.NewServer(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if !assert.NoError(t, err) {
				return
			}
			defer conn.Close()
			_, _ = buf.WriteString("HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			_ = buf.Flush()
		})))
		defer front.Close()
		assertSignal(t, front.URL, 418, false)
	})
	t.Run("nested", func(t *testing.T) {
		front := httptest.NewServer(inbound.Pushback(inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			giveUp(r)
			w.WriteHeader(503)
		}))))
		defer front.Close()
		res := assertSignal(t, front.URL, 503, true)
		assert.Len(t, res.Header.Values(retryhttp.RetrySignalHeader), 1)
	})
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// assertSignal GETs url with a plain client and checks the response.
func assertSignal(t *testing.T, url string, status int, want bool) *http.Response {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, bufio.NewReader(res.Body))
	res.Body.Close()
	assert.Equal(t, status, res.StatusCode)
	assert.Equal(t, want, retryhttp.HasRetrySignal(res.Header))
	return res
}
