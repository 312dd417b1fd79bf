package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestComposedShouldRetry checks that AdditionalStatusCodes and RetryIf add
// to the rules, and that the rules that always win keep winning.
func TestComposedShouldRetry(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	req := func(ctx context.Context, method string, kv ...string) *http.Request {
		r, err := http.NewRequestWithContext(ctx, method, "http://example.test/", nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		return r
	}
	res := func(code int, kv ...string) *http.Response {
		return &http.Response{StatusCode: code, Header: headers(kv...)}
	}
	bg := context.Background()
	errOther := errors.New("tls: bad certificate")
	always := func(retryhttp.Attempt) bool { return true }
	never := func(retryhttp.Attempt) bool { return false }
	tests := []struct {
		name string
		opts retryhttp.CustomizedShouldRetryFnOptions
		give retryhttp.Attempt
		want bool
	}{
		{"RetryIf adds 500 for GET", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(500)}, true},
		{"RetryIf not for POST", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "POST"), Res: res(500)}, false},
		{"RetryIf for POST with caller's key", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "POST", "Idempotency-Key", "k"), Res: res(500)}, true},
		{"RetryIf for POST made idempotent by the list", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always, IdempotentMethods: []string{"POST"}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "POST"), Res: res(500)}, true},
		{"RetryIf adds an error", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Err: errOther}, true},
		{"RetryIf cannot retry a 200", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(200)}, false},
		{"RetryIf cannot retry a 202 with Retry-After", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(202, "Retry-After", "1")}, false},
		{"RetryIf cannot retry a 304", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(304)}, false},
		{"RetryIf cannot override the cross-hop signal", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(500, retryhttp.RetrySignalHeader, retryhttp.RetrySignalNoRetry)}, false},
		{"signal ignored by the transport", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(500, retryhttp.RetrySignalHeader, retryhttp.RetrySignalNoRetry), RetrySignalIgnored: true}, true},
		{"RetryIf cannot override a cancelled caller", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(cancelled, "GET"), Err: errOther}, false},
		{"RetryIf cannot retry a nil outcome", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: always},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET")}, false},
		{"a false RetryIf keeps the rules", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: never},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(503)}, true},
		{"a false RetryIf keeps 429 for POST", retryhttp.CustomizedShouldRetryFnOptions{RetryIf: never},
			retryhttp.Attempt{Count: 1, Req: req(bg, "POST"), Res: res(429)}, true},
		{"AdditionalStatusCodes adds 504", retryhttp.CustomizedShouldRetryFnOptions{AdditionalStatusCodes: []int{504}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(504)}, true},
		{"AdditionalStatusCodes keeps 503", retryhttp.CustomizedShouldRetryFnOptions{AdditionalStatusCodes: []int{504}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(503)}, true},
		{"AdditionalStatusCodes not for POST", retryhttp.CustomizedShouldRetryFnOptions{AdditionalStatusCodes: []int{504}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "POST"), Res: res(504)}, false},
		{"AdditionalStatusCodes below 400 has no effect", retryhttp.CustomizedShouldRetryFnOptions{AdditionalStatusCodes: []int{200, 302}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(302)}, false},
		{"RetryableStatusCodes replaces", retryhttp.CustomizedShouldRetryFnOptions{RetryableStatusCodes: []int{504}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(503)}, false},
		{"replaced, then added", retryhttp.CustomizedShouldRetryFnOptions{RetryableStatusCodes: []int{}, AdditionalStatusCodes: []int{500}},
			retryhttp.Attempt{Count: 1, Req: req(bg, "GET"), Res: res(500)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryhttp.CustomizedShouldRetryFn(tt.opts)(tt.give))
		})
	}
}

// TestRetryIfNotAskedWhenRulesDecide checks that RetryIf is asked only when
// the rules neither retry nor forbid.
func TestRetryIfNotAskedWhenRulesDecide(t *testing.T) {
	asked := 0
	fn := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		RetryIf: func(retryhttp.Attempt) bool { asked++; return false },
	})
	get, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	for _, code := range []int{200, 204, 301, 429, 502, 503} {
		fn(retryhttp.Attempt{Count: 1, Req: get, Res: &http.Response{StatusCode: code, Header: http.Header{}}})
	}
	assert.Equal(t, 0, asked)
	fn(retryhttp.Attempt{Count: 1, Req: get, Res: &http.Response{StatusCode: 500, Header: http.Header{}}})
	assert.Equal(t, 1, asked)
}

// TestRetryIfUnauthorizedLoopback retries a 401 once with a fresh token:
// RetryIf says the 401 is worth retrying, WithPrepareRetry refreshes the
// token.
func TestRetryIfUnauthorizedLoopback(t *testing.T) {
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget,
		retryhttp.WithShouldRetryFn(retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
			RetryIf: func(a retryhttp.Attempt) bool {
				return a.Res != nil && a.Res.StatusCode == http.StatusUnauthorized && a.Count == 1
			},
		})),
		retryhttp.WithPrepareRetry(func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer fresh")
			return nil
		}))
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.EqualValues(t, 2, srv.Attempts.Load())

	// A POST is not retried by RetryIf: it is not guessed idempotent.
	srv.Attempts.Store(0)
	res, err = (&http.Client{Transport: tr}).Post(srv.URL, "text/plain", nil)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.EqualValues(t, 1, srv.Attempts.Load())
}

// TestAdditionalStatusCodesLoopback retries a 504 for a GET.
func TestAdditionalStatusCodesLoopback(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.StatusThen(http.StatusGatewayTimeout, 2))
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget,
		retryhttp.WithShouldRetryFn(retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
			AdditionalStatusCodes: []int{http.StatusGatewayTimeout},
		})))
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.EqualValues(t, 3, srv.Attempts.Load())
}
