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
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// fuzzNow is the time Retry-After dates are measured from in the fuzzers.
var fuzzNow = time.Date(2006, time.January, 2, 15, 4, 5, 0, time.UTC)

// retryAfterSeeds are Retry-After values worth trying first: valid, invalid,
// huge and in each of the three date formats.
var retryAfterSeeds = []string{
	"", " ", "0", "5", " 7 ", "0012", "86400",
	"9223372036", "9223372037", "100000000000000000", "1000000000000000000",
	"18446744073709551615", "18446744073709551616", "1" + strings.Repeat("0", 99),
	"-1", "-0", "+5", "1.5", "1e3", "0x10", "abc", "5s", "1 5", "٥",
	"Mon, 02 Jan 2006 15:04:35 GMT", "Mon, 02 Jan 2006 15:03:05 GMT",
	"Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
	"Monday, 02-Jan-06 15:05:05 GMT", "Sunday, 01-Jan-06 15:04:05 GMT",
	"Mon Jan  2 16:04:05 2006", "Mon, 32 Jan 2006 15:04:05 GMT",
	"2006-01-02T15:05:05Z",
}

// isASCIIDigits reports whether s is one or more ASCII digits.
func isASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FuzzParseRetryAfter fuzzes internal/retryafter.Parse, with the seeds
// FuzzDelay shares.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range retryAfterSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Retry-After": {v}}
		d, ok := retryafter.Parse(h, func() time.Time { return fuzzNow })
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", v, d)
		}
		trimmed := strings.TrimSpace(v)
		_, dateErr := http.ParseTime(trimmed)
		valid := isASCIIDigits(trimmed) || dateErr == nil
		if ok != valid {
			t.Fatalf("ParseRetryAfter(%q) ok = %v, want %v", v, ok, valid)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: want 0", v, d)
		}
		// Whole seconds that fit in a Duration parse exactly; larger ones
		// saturate.
		if isASCIIDigits(trimmed) {
			secs, err := strconv.ParseUint(trimmed, 10, 64)
			want := longestDuration
			if err == nil && secs <= uint64(longestDuration/time.Second) {
				want = time.Duration(secs) * time.Second
			}
			if d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", v, d, want)
			}
		}
	})
}

func FuzzDelay(f *testing.F) {
	for i, s := range retryAfterSeeds {
		f.Add(s, i%8, int64(0), int64(0), 0.0, float64(i)/float64(len(retryAfterSeeds)))
	}
	f.Add("", 1, int64(0), int64(-1), math.NaN(), 0.5)
	f.Add("", 64, int64(1), int64(math.MaxInt64), 0.0, nextBelowOne)
	f.Add("", 63, int64(1), int64(math.MaxInt64), 0.0, 0.5)
	f.Add("", math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64), 0.0, nextBelowOne)
	f.Add("", math.MinInt, int64(math.MinInt64), int64(math.MinInt64), -1.0, 0.0)
	f.Add("", 3, int64(time.Second), int64(time.Millisecond), 0.0, 0.999999999)
	f.Add("3", 1, int64(0), int64(0), math.Inf(1), nextBelowOne)
	f.Add("3", 1, int64(0), int64(0), math.Inf(-1), 0.0)
	f.Add("18446744073709551616", 1, int64(0), int64(0), 1.0, nextBelowOne)
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", 1, int64(0), int64(0), 5.0, nextBelowOne)
	f.Fuzz(func(t *testing.T, v string, count int, base, ceil int64, jitter, r float64) {
		// r is a random number in [0, 1), as math/rand/v2's Float64 gives.
		r = math.Abs(math.Mod(r, 1))
		if math.IsNaN(r) {
			r = 0
		}
		opts := retryhttp.CustomizedDelayFnOptions{
			Base:            time.Duration(base),
			Cap:             time.Duration(ceil),
			JitterMagnitude: jitter,
		}
		a := retryhttp.Attempt{
			Count: count,
			Res:   &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}},
		}
		d := retryhttp.DelayWith(opts, a, fuzzNow, r)
		if d < 0 {
			t.Fatalf("delay(%q, %d, %+v, r=%v) = %v, negative", v, count, opts, r, d)
		}
		if _, ok := retryafter.Parse(a.Res.Header, func() time.Time { return fuzzNow }); ok {
			return
		}
		// Backoff: below the effective cap (the default for values that
		// are not positive, raised to the base).
		b, c := opts.Base, opts.Cap
		if b <= 0 {
			b = 250 * time.Millisecond
		}
		if c <= 0 {
			c = 10 * time.Second
		}
		c = max(c, b)
		if d >= c {
			t.Fatalf("delay(%q, %d, %+v, r=%v) = %v, not below the cap %v", v, count, opts, r, d, c)
		}
		// The real DelayFn, with its own random source, keeps the bound too.
		if d := retryhttp.CustomizedDelayFn(opts)(a); d < 0 || d >= c {
			t.Fatalf("CustomizedDelayFn(%+v) = %v, out of [0, %v)", opts, d, c)
		}
	})
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
