package retryhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
)

// fakeTimeoutErr is a net.Error that reports a timeout.
type fakeTimeoutErr struct{}

func (fakeTimeoutErr) Error() string   { return "i/o timeout" }
func (fakeTimeoutErr) Timeout() bool   { return true }
func (fakeTimeoutErr) Temporary() bool { return true }

// fakeNonTimeoutErr is a net.Error that does not report a timeout.
type fakeNonTimeoutErr struct{}

func (fakeNonTimeoutErr) Error() string   { return "not a timeout" }
func (fakeNonTimeoutErr) Timeout() bool   { return false }
func (fakeNonTimeoutErr) Temporary() bool { return false }

// fakeReq returns a request with the given method and header pairs
// (name, value, name, value...), without going through http.NewRequest so
// that an empty method stays empty.
func fakeReq(ctx context.Context, method string, kv ...string) *http.Request {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	req := &http.Request{
		Method: method,
		URL:    &url.URL{Scheme: "http", Host: "example.test", Path: "/"},
		Header: h,
	}
	return req.WithContext(ctx)
}

// fakeRes returns a response with the given status and header pairs.
func fakeRes(code int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody}
}

var (
	errDNS     = &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}
	errDial    = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("network is unreachable")}
	errRefused = &url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: &net.OpError{
		Op: "read", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}}
	errRefusedBare = fmt.Errorf("connect: %w", syscall.ECONNREFUSED)

	// Errors after which the request may have reached the server.
	errsMaybeSent = map[string]error{
		"net.Error timeout":        fakeTimeoutErr{},
		"os.ErrDeadlineExceeded":   &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded},
		"ErrAttemptTimeout":        fmt.Errorf("attempt 1: %w", retryhttp.ErrAttemptTimeout),
		"url.Error timeout":        &url.Error{Op: "Get", URL: "http://x/", Err: fakeTimeoutErr{}},
		"ECONNRESET":               &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		"io.ErrUnexpectedEOF":      io.ErrUnexpectedEOF,
		"io.EOF":                   &url.Error{Op: "Get", URL: "http://x/", Err: io.EOF},
		"context.DeadlineExceeded": fmt.Errorf("per-attempt: %w", context.DeadlineExceeded),
		"write on closed conn":     &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed},
		"HTTP/2 GOAWAY and close": &url.Error{Op: "Get", URL: "https://x/", Err: errors.New(
			"http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=\"\"")},
		// net/http's unexported errServerClosedIdle, matched by its text.
		"server closed idle connection": errors.New("http: server closed idle connection"),
	}

	// Errors after which the request surely never left the client.
	errsNeverSent = map[string]error{
		"DNS":          errDNS,
		"wrapped DNS":  &url.Error{Op: "Post", URL: "http://nowhere.invalid/", Err: &net.OpError{Op: "dial", Err: errDNS}},
		"dial":         errDial,
		"refused":      errRefused,
		"refused bare": errRefusedBare,
		"dial timeout": &net.OpError{Op: "dial", Net: "tcp", Err: fakeTimeoutErr{}},
		// Regression: only the outermost OpError was looked at.
		"dial to a proxy": &net.OpError{Op: "proxyconnect", Net: "tcp", Err: errDial},
	}

	idempotentReqs = map[string]func(context.Context) *http.Request{
		"GET":                  func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodGet) },
		"HEAD":                 func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodHead) },
		"OPTIONS":              func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodOptions) },
		"TRACE":                func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodTrace) },
		"PUT":                  func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPut) },
		"DELETE":               func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodDelete) },
		"empty method":         func(ctx context.Context) *http.Request { return fakeReq(ctx, "") },
		"POST Idempotency-Key": func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPost, "Idempotency-Key", "k1") },
		"POST X-Idempotency-Key": func(ctx context.Context) *http.Request {
			return fakeReq(ctx, http.MethodPost, "X-Idempotency-Key", "k1")
		},
		"PATCH Idempotency-Key": func(ctx context.Context) *http.Request {
			return fakeReq(ctx, http.MethodPatch, "Idempotency-Key", "k1")
		},
	}

	nonIdempotentReqs = map[string]func(context.Context) *http.Request{
		"POST":                     func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPost) },
		"PATCH":                    func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPatch) },
		"CONNECT":                  func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodConnect) },
		"lower-case get":           func(ctx context.Context) *http.Request { return fakeReq(ctx, "get") },
		"POST empty key":           func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPost, "Idempotency-Key", "") },
		"POST empty X key":         func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPost, "X-Idempotency-Key", "") },
		"POST other header":        func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPost, "Request-Id", "k1") },
		"POST key in another name": func(ctx context.Context) *http.Request { return fakeReq(ctx, http.MethodPost, "Idempotency", "k1") },
	}
)

type shouldRetryCase struct {
	name string
	give retryhttp.Attempt
	want bool
}

// errorCases returns the error rules of the default policy, for requests
// made with ctx.
func errorCases(ctx context.Context) []shouldRetryCase {
	var tests []shouldRetryCase
	add := func(name string, req *http.Request, err error, want bool) {
		tests = append(tests, shouldRetryCase{
			name: name,
			give: retryhttp.Attempt{Count: 1, Req: req, Err: err},
			want: want,
		})
	}
	for en, err := range errsNeverSent {
		for rn, mk := range idempotentReqs {
			add(en+"/"+rn, mk(ctx), err, true)
		}
		for rn, mk := range nonIdempotentReqs {
			add(en+"/"+rn, mk(ctx), err, true)
		}
	}
	for en, err := range errsMaybeSent {
		for rn, mk := range idempotentReqs {
			add(en+"/"+rn, mk(ctx), err, true)
		}
		for rn, mk := range nonIdempotentReqs {
			add(en+"/"+rn, mk(ctx), err, false)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost} {
		add("errors.New/"+m, fakeReq(ctx, m), errors.New("something else"), false)
		add("non-timeout net.Error/"+m, fakeReq(ctx, m), fakeNonTimeoutErr{}, false)
		add("context.Canceled/"+m, fakeReq(ctx, m), context.Canceled, false)
		add("ErrBufferingBody/"+m, fakeReq(ctx, m), retryhttp.ErrBufferingBody, false)
		add("GOAWAY message not at the start/"+m, fakeReq(ctx, m),
			errors.New("proxy: http2: server sent GOAWAY and closed the connection"), false)
	}
	add("timeout without request", nil, fakeTimeoutErr{}, false)
	add("DNS without request", nil, errDNS, true)
	return tests
}

// responseCases returns the response rules of the default policy, for
// requests made with ctx.
func responseCases(ctx context.Context) []shouldRetryCase {
	var tests []shouldRetryCase
	add := func(name string, req *http.Request, res *http.Response, want bool) {
		tests = append(tests, shouldRetryCase{
			name: name,
			give: retryhttp.Attempt{Count: 1, Req: req, Res: res},
			want: want,
		})
	}
	allMethods := []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, ""}
	for _, m := range allMethods {
		add("429/"+m, fakeReq(ctx, m), fakeRes(http.StatusTooManyRequests), true)
		add("429 with Retry-After/"+m, fakeReq(ctx, m), fakeRes(429, "Retry-After", "1"), true)
		for _, code := range []int{400, 404, 409, 418, 500, 501, 502, 503, 504, 599} {
			add(fmt.Sprintf("%d with Retry-After/%s", code, m), fakeReq(ctx, m), fakeRes(code, "Retry-After", "5"), true)
		}
		add("503 with garbage Retry-After/"+m, fakeReq(ctx, m), fakeRes(503, "Retry-After", "soon"), true)
		for _, code := range []int{100, 101, 103, 200, 201, 202, 204, 206, 301, 302, 303, 304, 307, 308, 399} {
			add(fmt.Sprintf("%d with Retry-After/%s", code, m), fakeReq(ctx, m), fakeRes(code, "Retry-After", "5"), false)
			add(fmt.Sprintf("%d/%s", code, m), fakeReq(ctx, m), fakeRes(code), false)
		}
		for _, code := range []int{400, 401, 403, 404, 408, 409, 422, 500, 501, 504, 505, 511} {
			add(fmt.Sprintf("%d/%s", code, m), fakeReq(ctx, m), fakeRes(code), false)
		}
	}
	for _, code := range []int{http.StatusBadGateway, http.StatusServiceUnavailable} {
		for rn, mk := range idempotentReqs {
			add(fmt.Sprintf("%d/%s", code, rn), mk(ctx), fakeRes(code), true)
		}
		for rn, mk := range nonIdempotentReqs {
			add(fmt.Sprintf("%d/%s", code, rn), mk(ctx), fakeRes(code), false)
		}
	}
	add("nil response, nil error", fakeReq(ctx, http.MethodGet), nil, false)
	add("nil request, nil response", nil, nil, false)
	add("503 without request", nil, fakeRes(503), false)
	add("429 without request", nil, fakeRes(429), true)
	add("503 with nil header", fakeReq(ctx, http.MethodGet), &http.Response{StatusCode: 503}, true)
	add("500 with nil header", fakeReq(ctx, http.MethodGet), &http.Response{StatusCode: 500}, false)
	return tests
}

func TestDefaultShouldRetryFn(t *testing.T) {
	ctx := context.Background()
	tests := append(errorCases(ctx), responseCases(ctx)...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryhttp.DefaultShouldRetryFn(tt.give))
		})
	}
}

// TestDefaultShouldRetryFnCallerDone checks that nothing is retried once the
// caller's context is cancelled or past its deadline, whatever the outcome.
func TestDefaultShouldRetryFnCallerDone(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	cause, cancel3 := context.WithCancelCause(context.Background())
	cancel3(errors.New("caller gave up"))

	for cn, ctx := range map[string]context.Context{"cancelled": cancelled, "expired": expired, "cancel cause": cause} {
		tests := append(errorCases(ctx), responseCases(ctx)...)
		for _, tt := range tests {
			t.Run(cn+"/"+tt.name, func(t *testing.T) {
				// Requests of these cases carry ctx, except those with no
				// request at all, which cannot know the caller's context.
				want := tt.want && tt.give.Req == nil
				assert.Equal(t, want, retryhttp.DefaultShouldRetryFn(tt.give))
			})
		}
	}
}

func TestCustomizedShouldRetryFn(t *testing.T) {
	ctx := context.Background()
	get := func() *http.Request { return fakeReq(ctx, http.MethodGet) }
	post := func() *http.Request { return fakeReq(ctx, http.MethodPost) }
	postKey := func() *http.Request { return fakeReq(ctx, http.MethodPost, "Idempotency-Key", "k") }
	res := func(code int, kv ...string) retryhttp.Attempt {
		return retryhttp.Attempt{Count: 1, Res: fakeRes(code, kv...)}
	}
	with := func(a retryhttp.Attempt, r *http.Request) retryhttp.Attempt { a.Req = r; return a }
	errA := func(err error) retryhttp.Attempt { return retryhttp.Attempt{Count: 1, Err: err} }

	postOnly := retryhttp.CustomizedShouldRetryFnOptions{IdempotentMethods: []string{http.MethodPost}}
	only504 := retryhttp.CustomizedShouldRetryFnOptions{RetryableStatusCodes: []int{http.StatusGatewayTimeout}}
	noMethods := retryhttp.CustomizedShouldRetryFnOptions{IdempotentMethods: []string{}}
	noCodes := retryhttp.CustomizedShouldRetryFnOptions{RetryableStatusCodes: []int{}}
	both := retryhttp.CustomizedShouldRetryFnOptions{
		IdempotentMethods:    []string{"PATCH"},
		RetryableStatusCodes: []int{500, 503},
	}

	tests := []struct {
		name string
		opts retryhttp.CustomizedShouldRetryFnOptions
		give retryhttp.Attempt
		want bool
	}{
		{"zero options = default/GET 503", retryhttp.CustomizedShouldRetryFnOptions{}, with(res(503), get()), true},
		{"zero options = default/POST 503", retryhttp.CustomizedShouldRetryFnOptions{}, with(res(503), post()), false},
		{"zero options = default/GET 500", retryhttp.CustomizedShouldRetryFnOptions{}, with(res(500), get()), false},
		{"zero options = default/GET timeout", retryhttp.CustomizedShouldRetryFnOptions{}, with(errA(fakeTimeoutErr{}), get()), true},

		{"methods POST/POST 503", postOnly, with(res(503), post()), true},
		{"methods POST/POST 502", postOnly, with(res(502), post()), true},
		{"methods POST/POST timeout", postOnly, with(errA(fakeTimeoutErr{}), post()), true},
		{"methods POST/POST reset", postOnly, with(errA(io.ErrUnexpectedEOF), post()), true},
		{"methods POST/GET 503", postOnly, with(res(503), get()), false},
		{"methods POST/GET timeout", postOnly, with(errA(fakeTimeoutErr{}), get()), false},
		{"methods POST/empty method 503", postOnly, with(res(503), fakeReq(ctx, "")), false},
		{"methods POST/PUT 503", postOnly, with(res(503), fakeReq(ctx, http.MethodPut)), false},
		{"methods POST/GET with key 503", postOnly, with(res(503), fakeReq(ctx, http.MethodGet, "Idempotency-Key", "k")), true},
		{"methods POST/GET DNS", postOnly, with(errA(errDNS), get()), true},
		{"methods POST/GET 429", postOnly, with(res(429), get()), true},
		{"methods POST/POST 500", postOnly, with(res(500), post()), false},

		{"codes 504/GET 504", only504, with(res(504), get()), true},
		{"codes 504/POST 504", only504, with(res(504), post()), false},
		{"codes 504/POST key 504", only504, with(res(504), postKey()), true},
		{"codes 504/GET 503", only504, with(res(503), get()), false},
		{"codes 504/GET 502", only504, with(res(502), get()), false},
		{"codes 504/GET 429", only504, with(res(429), get()), true},
		{"codes 504/GET 500 Retry-After", only504, with(res(500, "Retry-After", "1"), get()), true},
		{"codes 504/GET 200 Retry-After", only504, with(res(200, "Retry-After", "1"), get()), false},

		{"no methods/GET 503", noMethods, with(res(503), get()), false},
		{"no methods/GET timeout", noMethods, with(errA(fakeTimeoutErr{}), get()), false},
		{"no methods/POST key 503", noMethods, with(res(503), postKey()), true},
		{"no methods/POST X key timeout", noMethods, with(errA(fakeTimeoutErr{}), fakeReq(ctx, http.MethodPost, "X-Idempotency-Key", "k")), true},
		{"no methods/GET refused", noMethods, with(errA(errRefused), get()), true},

		{"no codes/GET 503", noCodes, with(res(503), get()), false},
		{"no codes/GET 502", noCodes, with(res(502), get()), false},
		{"no codes/GET 429", noCodes, with(res(429), get()), true},
		{"no codes/GET 503 Retry-After", noCodes, with(res(503, "Retry-After", "2"), get()), true},
		{"no codes/GET timeout", noCodes, with(errA(fakeTimeoutErr{}), get()), true},

		{"both/PATCH 500", both, with(res(500), fakeReq(ctx, http.MethodPatch)), true},
		{"both/PATCH 502", both, with(res(502), fakeReq(ctx, http.MethodPatch)), false},
		{"both/GET 500", both, with(res(500), get()), false},
		{"both/POST 200", both, with(res(200), post()), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryhttp.CustomizedShouldRetryFn(tt.opts)(tt.give))
		})
	}
}

func TestCustomizedShouldRetryFnCallerDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fn := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		IdempotentMethods:    []string{http.MethodPost},
		RetryableStatusCodes: []int{500},
	})
	tests := []struct {
		name string
		give retryhttp.Attempt
	}{
		{"500", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodPost), Res: fakeRes(500)}},
		{"429", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodPost), Res: fakeRes(429)}},
		{"DNS", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodPost), Err: errDNS}},
		{"timeout", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodPost), Err: fakeTimeoutErr{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.False(t, fn(tt.give))
		})
	}
}

// TestCustomizedShouldRetryFnCopiesSlices pins that changing the caller's
// slices after construction does not change the decisions.
func TestCustomizedShouldRetryFnCopiesSlices(t *testing.T) {
	methods := []string{http.MethodPost}
	codes := []int{http.StatusGatewayTimeout}
	fn := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		IdempotentMethods:    methods,
		RetryableStatusCodes: codes,
	})
	methods[0] = http.MethodGet
	codes[0] = http.StatusServiceUnavailable

	ctx := context.Background()
	tests := []struct {
		name string
		give retryhttp.Attempt
		want bool
	}{
		{"POST 504", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodPost), Res: fakeRes(504)}, true},
		{"GET 504", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodGet), Res: fakeRes(504)}, false},
		{"POST 503", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodPost), Res: fakeRes(503)}, false},
		{"DELETE 504", retryhttp.Attempt{Req: fakeReq(ctx, http.MethodDelete), Res: fakeRes(504)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fn(tt.give))
		})
	}
}

// TestShouldRetryInjectedKey checks that a key the transport injected counts
// only when the server is known to honour keys, while a key the caller set
// always counts.
func TestShouldRetryInjectedKey(t *testing.T) {
	ctx := context.Background()
	keyed := func(m string) *http.Request { return fakeReq(ctx, m, "Idempotency-Key", "k") }
	custom := retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{IdempotentMethods: []string{}})
	tests := []struct {
		name string
		fn   retryhttp.ShouldRetryFn
		give retryhttp.Attempt
		want bool
	}{
		{"caller key/503", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(503)}, true},
		{"injected/503", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(503), IdempotencyKeyInjected: true}, false},
		{"injected/timeout", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Err: fakeTimeoutErr{}, IdempotencyKeyInjected: true}, false},
		{"injected/DNS", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Err: errDNS, IdempotencyKeyInjected: true}, true},
		{"injected/429", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(429), IdempotencyKeyInjected: true}, true},
		{"injected honored/503", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(503), IdempotencyKeyInjected: true, IdempotencyKeyHonored: true}, true},
		{"injected honored/timeout", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("PATCH"), Err: fakeTimeoutErr{}, IdempotencyKeyInjected: true, IdempotencyKeyHonored: true}, true},
		{"injected honored/500", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(500), IdempotencyKeyInjected: true, IdempotencyKeyHonored: true}, false},
		{"injected honored/200", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(200, "Retry-After", "1"), IdempotencyKeyInjected: true, IdempotencyKeyHonored: true}, false},
		{"honored without injection/POST no key", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: fakeReq(ctx, "POST"), Res: fakeRes(503), IdempotencyKeyHonored: true}, false},
		{"injected/GET still by method", retryhttp.DefaultShouldRetryFn, retryhttp.Attempt{Req: keyed("GET"), Res: fakeRes(503), IdempotencyKeyInjected: true}, true},
		{"customized no methods/injected honored", custom, retryhttp.Attempt{Req: keyed("POST"), Res: fakeRes(503), IdempotencyKeyInjected: true, IdempotencyKeyHonored: true}, true},
		{"customized no methods/injected", custom, retryhttp.Attempt{Req: keyed("GET"), Res: fakeRes(503), IdempotencyKeyInjected: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.fn(tt.give))
		})
	}
}

// countingErr counts the calls of its Error method.
type countingErr struct {
	msg   string
	calls *atomic.Int64
}

func (e countingErr) Error() string { e.calls.Add(1); return e.msg }

// Regression: the decision on an error wrapped thousands of times took time
// cubic in the depth (fuzzing found 2,000 levels taking about a minute),
// since messages were matched at every node and each message rebuilds those
// below it. Messages are now matched on leaves only: the leaf's Error is
// called a bounded number of times, and no wrapper's at all.
func TestShouldRetryDeepErrorLinear(t *testing.T) {
	for _, depth := range []int{10, 2000} {
		var leafCalls, wrapperCalls atomic.Int64
		var err error = countingErr{"other", &leafCalls}
		for i := range depth {
			switch i % 4 {
			case 0:
				err = fmt.Errorf("context: %w", err)
			case 1:
				err = &url.Error{Op: "Get", URL: "http://x/", Err: err}
			case 2:
				err = &net.OpError{Op: "read", Net: "tcp", Err: err}
			default:
				err = errors.Join(countingErr{"noise", &wrapperCalls}, err)
			}
		}
		req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		assert.False(t, retryhttp.DefaultShouldRetryFn(retryhttp.Attempt{Count: 1, Req: req, Err: err}))
		assert.LessOrEqual(t, leafCalls.Load(), int64(4), "depth %d: the leaf's message is read a few times", depth)
		assert.LessOrEqual(t, wrapperCalls.Load(), int64(4*depth/4+4), "depth %d: each side leaf a few times", depth)
		assert.False(t, retryhttp.IsTimeoutErr(err))
	}
}

// fuzzErrors are the errors FuzzShouldRetry picks from.
var fuzzErrors = []error{
	nil,
	errDNS,
	errDial,
	errRefused,
	fakeTimeoutErr{},
	retryhttp.ErrAttemptTimeout,
	io.ErrUnexpectedEOF,
	io.EOF,
	errors.New("other"),
	context.Canceled,
	context.DeadlineExceeded,
}

func FuzzShouldRetry(f *testing.F) {
	for i := range fuzzErrors {
		f.Add(503, "GET", "", "", "", uint8(i), false)
		f.Add(503, "POST", "k", "", "", uint8(i), false)
	}
	for _, code := range []int{0, -1, 100, 101, 200, 202, 204, 301, 302, 304, 399, 400, 429, 500, 502, 503, 504, 999, math.MaxInt} {
		f.Add(code, "GET", "", "", "5", uint8(0), false)
		f.Add(code, "POST", "", "", "5", uint8(0), false)
		f.Add(code, "POST", "", "x", "", uint8(0), true)
	}
	f.Add(503, "", "", "", "", uint8(0), false)
	f.Add(503, "get", "", "", "", uint8(0), false)
	f.Fuzz(func(t *testing.T, code int, method, key, xkey, retryAfter string, errIdx uint8, cancelled bool) {
		ctx := context.Background()
		if cancelled {
			c, cancel := context.WithCancel(ctx)
			cancel()
			ctx = c
		}
		req := (&http.Request{Method: method, Header: http.Header{}}).WithContext(ctx)
		if key != "" {
			req.Header["Idempotency-Key"] = []string{key}
		}
		if xkey != "" {
			req.Header["X-Idempotency-Key"] = []string{xkey}
		}
		a := retryhttp.Attempt{Count: 1, Req: req}
		if err := fuzzErrors[int(errIdx)%len(fuzzErrors)]; err != nil {
			a.Err = err
		} else {
			a.Res = &http.Response{StatusCode: code, Header: http.Header{}}
			if retryAfter != "" {
				a.Res.Header["Retry-After"] = []string{retryAfter}
			}
		}
		fns := map[string]retryhttp.ShouldRetryFn{
			"default": retryhttp.DefaultShouldRetryFn,
			"customized": retryhttp.CustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
				IdempotentMethods:    []string{method},
				RetryableStatusCodes: []int{code},
			}),
		}
		for name, fn := range fns {
			got := fn(a)
			if got && cancelled {
				t.Fatalf("%s: retried although the caller cancelled: %+v", name, a)
			}
			if got && a.Res != nil && a.Res.StatusCode < 400 {
				t.Fatalf("%s: retried status %d", name, a.Res.StatusCode)
			}
			if a.Res != nil && a.Res.StatusCode == http.StatusTooManyRequests && !cancelled && !got {
				t.Fatalf("%s: did not retry 429", name)
			}
		}
	})
}

// composedBaseErrors are the innermost errors FuzzShouldRetryComposed picks
// from; an Errno from the fuzzer is added to them.
var composedBaseErrors = []error{
	errDNS,
	errDial,
	fakeTimeoutErr{},
	io.ErrUnexpectedEOF,
	net.ErrClosed,
	errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=\"\""),
	errors.New("other"),
}

// wrapErr wraps err once, in a way that changes neither what errors.Is and
// errors.As find nor whether it is a timeout.
func wrapErr(err error, op byte) error {
	switch op % 4 {
	case 0:
		return fmt.Errorf("context: %w", err)
	case 1:
		return &url.Error{Op: "Get", URL: "http://x/", Err: err}
	case 2:
		return &net.OpError{Op: "read", Net: "tcp", Err: err}
	default:
		return errors.Join(errors.New("noise"), err)
	}
}

// FuzzShouldRetryComposed drives the default decision with arbitrary status
// codes, arbitrary header blocks (on the request and the response), and
// errors composed of wrappers around a syscall errno or a known error. It
// checks that the decision never panics, that wrapping an error does not
// change it, that headers other than Retry-After and the two key headers do
// not change it, and the rules that must hold whatever the input.
func FuzzShouldRetryComposed(f *testing.F) {
	f.Add(503, "GET", "Retry-After: 5\r\nX-Noise: 1\r\n", false, uint8(255), uint16(0), []byte{0, 1, 2, 3}, false, false)
	f.Add(200, "POST", "Idempotency-Key: k\r\n", false, uint8(6), uint16(0), []byte{}, true, false)
	f.Add(0, "PUT", "", true, uint8(0), uint16(syscall.ECONNRESET), []byte{2, 1}, false, false)
	f.Add(0, "POST", "", true, uint8(0), uint16(syscall.ECONNREFUSED), []byte{3}, true, true)
	f.Add(429, "PATCH", "retry-after: garbage\r\n", false, uint8(0), uint16(0), []byte{1}, false, false)
	for i := range composedBaseErrors {
		f.Add(0, "DELETE", "X-Idempotency-Key: \r\n", true, uint8(i), uint16(0), []byte{byte(i)}, false, false)
	}
	f.Fuzz(func(t *testing.T, code int, method, rawHeader string, isErr bool, errIdx uint8, errno uint16,
		wraps []byte, injected, honored bool) {
		h, err := textproto.NewReader(bufio.NewReader(strings.NewReader(rawHeader + "\r\n"))).ReadMIMEHeader()
		if err != nil {
			return
		}
		header := http.Header(h)
		attempt := func(hdr http.Header, e error) retryhttp.Attempt {
			a := retryhttp.Attempt{
				Count: 1, Req: &http.Request{Method: method, Header: hdr.Clone()}, Err: e,
				IdempotencyKeyInjected: injected, IdempotencyKeyHonored: honored,
			}
			if e == nil {
				a.Res = &http.Response{StatusCode: code, Header: hdr.Clone()}
			}
			return a
		}
		var base error
		if isErr {
			if int(errIdx) < len(composedBaseErrors) {
				base = composedBaseErrors[errIdx]
			} else {
				base = os.NewSyscallError("read", syscall.Errno(errno))
			}
		}
		wrapped := base
		for _, op := range wraps {
			if wrapped != nil {
				wrapped = wrapErr(wrapped, op)
			}
		}
		// Only these headers may matter.
		relevant := http.Header{}
		for _, name := range []string{"Retry-After", "Idempotency-Key", "X-Idempotency-Key"} {
			if v, ok := header[name]; ok {
				relevant[name] = v
			}
		}

		got := retryhttp.DefaultShouldRetryFn(attempt(header, wrapped))
		if bare := retryhttp.DefaultShouldRetryFn(attempt(header, base)); got != bare {
			t.Fatalf("wrapping %v as %v changed the decision: %v, bare %v", base, wrapped, got, bare)
		}
		if only := retryhttp.DefaultShouldRetryFn(attempt(relevant, wrapped)); got != only {
			t.Fatalf("irrelevant headers changed the decision: %v with %v, %v with %v", got, header, only, relevant)
		}
		neverSent := base == errDNS || base == errDial || errors.Is(base, syscall.ECONNREFUSED)
		switch {
		case base == nil && code < 400 && got:
			t.Fatalf("retried status %d", code)
		case base == nil && code == http.StatusTooManyRequests && !got:
			t.Fatal("did not retry 429")
		case neverSent && !got:
			t.Fatalf("did not retry %v, which proves nothing was sent", wrapped)
		}
		keyed := !injected && (header.Get("Idempotency-Key") != "" || header.Get("X-Idempotency-Key") != "")
		idempotent := slices.Contains([]string{"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", ""}, method) ||
			keyed || (injected && honored)
		if base != nil && !neverSent && !idempotent && got {
			t.Fatalf("retried %s after %v, which may have been processed", method, wrapped)
		}
	})
}
