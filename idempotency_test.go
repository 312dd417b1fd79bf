package retryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyAttempt is what the recording server saw on one attempt.
type keyAttempt struct {
	method string
	path   string
	header http.Header
	body   string
}

// keyServer records every attempt and answers with the statuses of plan, in
// order, per path; after the plan runs out it answers 200.
type keyServer struct {
	*httptest.Server
	mu       sync.Mutex
	attempts []keyAttempt
	plan     map[string][]func(w http.ResponseWriter)
}

func newKeyServer(t *testing.T, plan map[string][]func(w http.ResponseWriter)) *keyServer {
	t.Helper()
	ks := &keyServer{plan: plan}
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ks.mu.Lock()
		ks.attempts = append(ks.attempts, keyAttempt{r.Method, r.URL.Path, r.Header.Clone(), string(body)})
		var step func(http.ResponseWriter)
		if p := ks.plan[r.URL.Path]; len(p) > 0 {
			step, ks.plan[r.URL.Path] = p[0], p[1:]
		}
		ks.mu.Unlock()
		if step != nil {
			step(w)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) seen() []keyAttempt {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return append([]keyAttempt(nil), ks.attempts...)
}

func status(code int, headers ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
	}
}

// newKeyClient returns a client whose transport never waits between attempts.
func newKeyClient(t *testing.T, opts ...retryhttp.Option) *http.Client {
	t.Helper()
	opts = append([]retryhttp.Option{retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })}, opts...)
	tr := retryhttp.New(opts...)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func do(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	res, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	return res
}

func TestIdempotencyKeySameAcrossRetries(t *testing.T) {
	ks := newKeyServer(t, map[string][]func(http.ResponseWriter){
		"/": {status(429), status(500, "Retry-After", "0"), status(429)},
	})
	c := newKeyClient(t)

	req, err := http.NewRequest(http.MethodPost, ks.URL+"/", strings.NewReader("payload"))
	require.NoError(t, err)
	res := do(t, c, req)

	require.Equal(t, http.StatusOK, res.StatusCode)
	seen := ks.seen()
	require.Len(t, seen, 4)
	key := seen[0].header.Get("Idempotency-Key")
	_, err = uuid.Parse(key)
	require.NoError(t, err, "the key is a UUID")
	for i, a := range seen {
		assert.Equal(t, key, a.header.Get("Idempotency-Key"), "attempt %d", i+1)
		assert.Len(t, a.header.Values("Idempotency-Key"), 1, "attempt %d carries one key", i+1)
		assert.Equal(t, "payload", a.body, "attempt %d", i+1)
	}
	assert.Empty(t, req.Header.Get("Idempotency-Key"), "the caller's request is not modified")
}

func TestIdempotencyKeyDistinctAcrossConcurrentRequests(t *testing.T) {
	ks := newKeyServer(t, nil)
	c := newKeyClient(t)

	const n = 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, err := http.NewRequest(http.MethodPost, ks.URL+"/", strings.NewReader("x"))
			if !assert.NoError(t, err) {
				return
			}
			res, err := c.Do(req)
			if assert.NoError(t, err) {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
	}
	wg.Wait()

	keys := map[string]bool{}
	for _, a := range ks.seen() {
		k := a.header.Get("Idempotency-Key")
		require.NotEmpty(t, k)
		keys[k] = true
	}
	assert.Len(t, keys, n, "every logical request has a key of its own")
}

func TestIdempotencyKeyWhichRequestsGetOne(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		header     http.Header
		opts       []retryhttp.Option
		ctx        func(context.Context) context.Context
		wantHeader string // header expected to hold a fresh key, "" for none
		wantKeep   map[string][]string
	}{
		{name: "POST gets a key", method: "POST", wantHeader: "Idempotency-Key"},
		{name: "PATCH gets a key", method: "PATCH", wantHeader: "Idempotency-Key"},
		{name: "custom method gets a key", method: "PURGE", wantHeader: "Idempotency-Key"},
		{name: "GET gets none", method: "GET"},
		{name: "HEAD gets none", method: "HEAD"},
		{name: "PUT gets none", method: "PUT"},
		{name: "DELETE gets none", method: "DELETE"},
		{name: "OPTIONS gets none", method: "OPTIONS"},
		{
			name: "caller key kept", method: "POST",
			header:   http.Header{"Idempotency-Key": {"mine"}},
			wantKeep: map[string][]string{"Idempotency-Key": {"mine"}},
		},
		{
			name: "caller X- key kept, no second key", method: "POST",
			header:   http.Header{"X-Idempotency-Key": {"mine"}},
			wantKeep: map[string][]string{"X-Idempotency-Key": {"mine"}, "Idempotency-Key": nil},
		},
		{
			name: "off for the transport", method: "POST",
			opts: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true})},
		},
		{
			name: "off for the request", method: "POST",
			ctx: func(ctx context.Context) context.Context {
				return retryhttp.SetOptions(ctx, retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true}))
			},
		},
		{
			name: "on for the request overrides off for the transport", method: "POST",
			opts: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true})},
			ctx: func(ctx context.Context) context.Context {
				return retryhttp.SetOptions(ctx, retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{}))
			},
			wantHeader: "Idempotency-Key",
		},
		{
			name: "other header name", method: "POST",
			opts:       []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Header: "X-Idempotency-Key"})},
			wantHeader: "X-Idempotency-Key",
			wantKeep:   map[string][]string{"Idempotency-Key": nil},
		},
		{
			name: "caller key under the other header name kept", method: "POST",
			opts:     []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Header: "Request-Key"})},
			header:   http.Header{"Request-Key": {"mine"}},
			wantKeep: map[string][]string{"Request-Key": {"mine"}, "Idempotency-Key": nil},
		},
		{
			name: "a later option replaces an earlier one whole", method: "POST",
			opts: []retryhttp.Option{
				retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true, Header: "X-Idempotency-Key"}),
				retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{}),
			},
			wantHeader: "Idempotency-Key",
			wantKeep:   map[string][]string{"X-Idempotency-Key": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := newKeyServer(t, nil)
			c := newKeyClient(t, tt.opts...)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, ks.URL+"/", nil)
			require.NoError(t, err)
			for k, v := range tt.header {
				req.Header[k] = v
			}
			before := req.Header.Clone()
			do(t, c, req)

			seen := ks.seen()
			require.Len(t, seen, 1)
			got := seen[0].header
			if tt.wantHeader != "" {
				require.Len(t, got.Values(tt.wantHeader), 1)
				_, err := uuid.Parse(got.Get(tt.wantHeader))
				assert.NoError(t, err)
			} else {
				for _, h := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
					if _, kept := tt.wantKeep[h]; !kept {
						assert.Empty(t, got.Values(h), h)
					}
				}
			}
			for h, want := range tt.wantKeep {
				assert.Equal(t, want, got.Values(h), h)
			}
			assert.Equal(t, before, req.Header, "the caller's headers are not modified")
		})
	}
}

func TestInjectedKeyCountsOnlyWhenHonored(t *testing.T) {
	tests := []struct {
		name  string
		opts  []retryhttp.Option
		ctx   func(context.Context) context.Context
		give  http.Header
		wantN int
	}{
		{name: "default: injected key does not make a POST retryable on 503", wantN: 1},
		{name: "honored for the transport", opts: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true})}, wantN: 2},
		{
			name: "honored for the request",
			ctx: func(ctx context.Context) context.Context {
				return retryhttp.SetOptions(ctx, retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true}))
			}, wantN: 2,
		},
		{
			name: "request override beats the transport",
			opts: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true})},
			ctx: func(ctx context.Context) context.Context {
				return retryhttp.SetOptions(ctx, retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{}))
			}, wantN: 1,
		},
		{name: "a key the caller set counts", give: http.Header{"Idempotency-Key": {"k1"}}, wantN: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := newKeyServer(t, map[string][]func(http.ResponseWriter){"/": {status(503)}})
			c := newKeyClient(t, tt.opts...)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, ks.URL+"/", strings.NewReader("body"))
			require.NoError(t, err)
			for k, v := range tt.give {
				req.Header[k] = v
			}
			res := do(t, c, req)

			seen := ks.seen()
			require.Len(t, seen, tt.wantN)
			wantStatus := http.StatusOK
			if tt.wantN == 1 {
				wantStatus = http.StatusServiceUnavailable
			}
			assert.Equal(t, wantStatus, res.StatusCode)
			key := seen[0].header.Get("Idempotency-Key")
			require.NotEmpty(t, key)
			for _, a := range seen {
				assert.Equal(t, key, a.header.Get("Idempotency-Key"))
				assert.Equal(t, "body", a.body)
			}
		})
	}
}

func TestAttemptTellsInjectedKeyFromCallers(t *testing.T) {
	ks := newKeyServer(t, map[string][]func(http.ResponseWriter){"/": {status(429)}, "/mine": {status(429)}})
	type seenAttempt struct {
		key      string
		injected bool
		honored  bool
	}
	var mu sync.Mutex
	var got []seenAttempt
	record := func(a retryhttp.Attempt) bool {
		mu.Lock()
		got = append(got, seenAttempt{a.Req.Header.Get("Idempotency-Key"), a.IdempotencyKeyInjected, a.IdempotencyKeyHonored})
		mu.Unlock()
		return retryhttp.DefaultShouldRetryFn(a)
	}
	c := newKeyClient(t, retryhttp.WithShouldRetryFn(record), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true}))

	req, err := http.NewRequest(http.MethodPost, ks.URL+"/", nil)
	require.NoError(t, err)
	do(t, c, req)
	req, err = http.NewRequest(http.MethodPost, ks.URL+"/mine", nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "mine")
	do(t, c, req)

	require.Len(t, got, 4)
	injectedKey := ks.seen()[0].header.Get("Idempotency-Key")
	assert.Equal(t, seenAttempt{injectedKey, true, true}, got[0], "the ShouldRetryFn sees the injected key")
	assert.Equal(t, seenAttempt{injectedKey, true, true}, got[1])
	assert.Equal(t, seenAttempt{"mine", false, true}, got[2])
	assert.Equal(t, seenAttempt{"mine", false, true}, got[3])
}

func TestIdempotencyKeyCallerRequestUnchanged(t *testing.T) {
	ks := newKeyServer(t, map[string][]func(http.ResponseWriter){"/": {status(429)}})
	c := newKeyClient(t)

	req, err := http.NewRequest(http.MethodPost, ks.URL+"/", strings.NewReader("abc"))
	require.NoError(t, err)
	req.Header.Set("X-Trace", "t1")
	header := req.Header.Clone()
	ctx := req.Context()
	url := req.URL.String()
	body := req.Body
	getBody := req.GetBody

	do(t, c, req)

	assert.Equal(t, header, req.Header)
	assert.Equal(t, ctx, req.Context())
	assert.Equal(t, url, req.URL.String())
	assert.True(t, body == req.Body, "Body not replaced")
	assert.NotNil(t, getBody)
	assert.NotNil(t, req.GetBody, "GetBody not cleared")
	assert.Len(t, ks.seen(), 2)
}

func TestIdempotencyKeyOnBufferedBody(t *testing.T) {
	// A body without GetBody is buffered, and every attempt still carries
	// the same key and the same bytes.
	ks := newKeyServer(t, map[string][]func(http.ResponseWriter){"/": {status(429), status(429)}})
	c := newKeyClient(t)

	req, err := http.NewRequest(http.MethodPost, ks.URL+"/", io.NopCloser(strings.NewReader("streamed")))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	do(t, c, req)

	seen := ks.seen()
	require.Len(t, seen, 3)
	for _, a := range seen {
		assert.Equal(t, seen[0].header.Get("Idempotency-Key"), a.header.Get("Idempotency-Key"))
		assert.Equal(t, "streamed", a.body)
	}
}

// Regression: a key set in the header map under a non-canonical name (which
// Header.Get does not see) was not noticed, and a second key was injected.
func TestIdempotencyKeyNonCanonicalCallerKeyKept(t *testing.T) {
	ks := newKeyServer(t, map[string][]func(http.ResponseWriter){"/": {status(503)}})
	c := newKeyClient(t)

	req, err := http.NewRequest(http.MethodPost, ks.URL+"/", strings.NewReader("x"))
	require.NoError(t, err)
	req.Header["idempotency-key"] = []string{"caller-key"}
	do(t, c, req)

	seen := ks.seen()
	require.Len(t, seen, 2, "the caller's key makes the POST retryable on 503")
	for _, a := range seen {
		assert.Equal(t, []string{"caller-key"}, a.header.Values("Idempotency-Key"), "one key, the caller's")
	}
}
