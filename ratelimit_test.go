package retryhttp_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// headers builds a header from name, value pairs; a name may repeat.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseRateLimitReset(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name   string
		status int
		give   http.Header
		want   time.Duration
		wantOK bool
	}{
		{"none", 429, http.Header{}, 0, false},
		{"nil header", 429, nil, 0, false},
		// X-RateLimit-Reset: delta below 10^9, Unix time above.
		{"x delta", 429, headers("X-RateLimit-Reset", "30"), 30 * time.Second, true},
		{"x delta zero", 429, headers("X-RateLimit-Reset", "0"), 0, true},
		{"x delta fraction", 429, headers("X-RateLimit-Reset", "1.5"), 1500 * time.Millisecond, true},
		{"x delta long fraction", 429, headers("X-RateLimit-Reset", "0.0000000019"), 1, true},
		{"x delta spaces", 429, headers("X-RateLimit-Reset", " 7 "), 7 * time.Second, true},
		{"x largest delta", 429, headers("X-RateLimit-Reset", "999999999"), 999999999 * time.Second, true},
		{"x epoch future", 429, headers("X-RateLimit-Reset", "1800000042"), 42 * time.Second, true},
		{"x epoch fraction", 429, headers("X-RateLimit-Reset", "1800000001.25"), 1250 * time.Millisecond, true},
		{"x epoch now is not trusted", 429, headers("X-RateLimit-Reset", "1800000000"), 0, false},
		{"x epoch past is not trusted", 429, headers("X-RateLimit-Reset", "1000000000"), 0, false},
		{"x epoch far future saturates", 429, headers("X-RateLimit-Reset", "99999999999999999999999"), longestDuration, true},
		{"x epoch milliseconds: far future", 429, headers("X-RateLimit-Reset", "1800000042000"), longestDuration, true},
		{"x negative", 429, headers("X-RateLimit-Reset", "-5"), 0, false},
		{"x plus", 429, headers("X-RateLimit-Reset", "+5"), 0, false},
		{"x exponent", 429, headers("X-RateLimit-Reset", "1e9"), 0, false},
		{"x two dots", 429, headers("X-RateLimit-Reset", "1.2.3"), 0, false},
		{"x bare dot", 429, headers("X-RateLimit-Reset", "."), 0, false},
		{"x trailing dot", 429, headers("X-RateLimit-Reset", "5."), 0, false},
		{"x NaN", 429, headers("X-RateLimit-Reset", "NaN"), 0, false},
		{"x date", 429, headers("X-RateLimit-Reset", "Mon, 02 Jan 2006 15:04:05 GMT"), 0, false},
		{"x Go duration", 429, headers("X-RateLimit-Reset", "6m0s"), 0, false},
		{"x empty", 429, headers("X-RateLimit-Reset", ""), 0, false},
		{"x first of several", 429, headers("X-RateLimit-Reset", "3", "X-RateLimit-Reset", "60"), 3 * time.Second, true},
		// Only on a 429, or with Remaining: 0.
		{"x on a 503", 503, headers("X-RateLimit-Reset", "30"), 0, false},
		{"x on a 503 with quota left", 503, headers("X-RateLimit-Reset", "30", "X-RateLimit-Remaining", "12"), 0, false},
		{"x on a 503 with no quota left", 503, headers("X-RateLimit-Reset", "30", "X-RateLimit-Remaining", "0"), 30 * time.Second, true},
		{"x on a 403 with no quota left", 403, headers("X-RateLimit-Reset", "1800000060", "X-RateLimit-Remaining", " 0 "), time.Minute, true},
		// X-Rate-Limit-Reset (Okta, Twitter/X) comes last.
		{"x-rate-limit epoch", 429, headers("X-Rate-Limit-Reset", "1800000010"), 10 * time.Second, true},
		{"x-rate-limit on a 200 with no quota left", 200, headers("X-Rate-Limit-Reset", "1800000010", "X-Rate-Limit-Remaining", "0"), 10 * time.Second, true},
		{"x-rate-limit with quota left", 503, headers("X-Rate-Limit-Reset", "1800000010", "X-Rate-Limit-Remaining", "1199"), 0, false},
		{"x before x-rate-limit", 429, headers("X-RateLimit-Reset", "5", "X-Rate-Limit-Reset", "1800000010"), 5 * time.Second, true},
		// RateLimit-Reset comes before X-RateLimit-Reset.
		{"reset", 429, headers("RateLimit-Reset", "12"), 12 * time.Second, true},
		{"reset epoch", 429, headers("RateLimit-Reset", "1800000005"), 5 * time.Second, true},
		{"reset epoch on a 429 with quota left (GitLab)", 429, headers("RateLimit-Reset", "1800000060", "RateLimit-Remaining", "595"), time.Minute, true},
		{"reset before x", 429, headers("RateLimit-Reset", "12", "X-RateLimit-Reset", "99"), 12 * time.Second, true},
		{"invalid reset, then x", 429, headers("RateLimit-Reset", "soon", "X-RateLimit-Reset", "99"), 99 * time.Second, true},
		{"past reset, then x", 429, headers("RateLimit-Reset", "1700000000", "X-RateLimit-Reset", "9"), 9 * time.Second, true},
		{"reset on a 503 with no quota left", 503, headers("RateLimit-Reset", "4", "RateLimit-Remaining", "0"), 4 * time.Second, true},
		// The IETF RateLimit field comes first.
		{"ietf", 429, headers("RateLimit", `"default";r=0;t=10`), 10 * time.Second, true},
		{"ietf token name", 429, headers("RateLimit", `default;r=0;t=10`), 10 * time.Second, true},
		{"ietf spaces", 429, headers("RateLimit", ` "default" ;r=0;t=10 `), 0, false},
		{"ietf before reset", 429, headers("RateLimit", `"a";r=0;t=10`, "RateLimit-Reset", "3"), 10 * time.Second, true},
		{"ietf quota left is ignored", 429, headers("RateLimit", `"a";r=5;t=10`, "RateLimit-Reset", "3"), 3 * time.Second, true},
		{"ietf largest exhausted", 503, headers("RateLimit", `"a";r=0;t=10, "b";r=0;t=60, "c";r=1;t=600`), time.Minute, true},
		{"ietf two lines", 503, headers("RateLimit", `"a";r=0;t=10`, "RateLimit", `"b";r=0;t=20`), 20 * time.Second, true},
		{"ietf quoted comma", 429, headers("RateLimit", `"a,b;r=9";r=0;t=7`), 7 * time.Second, true},
		{"ietf escaped quote", 429, headers("RateLimit", `"a\"b";r=0;t=8`), 8 * time.Second, true},
		{"ietf unterminated", 429, headers("RateLimit", `"a;r=0;t=8`), 0, false},
		{"ietf garbage after name", 429, headers("RateLimit", `"a"x;r=0;t=8`), 0, false},
		{"ietf no r", 429, headers("RateLimit", `"a";t=8`), 0, false},
		{"ietf fraction t", 429, headers("RateLimit", `"a";r=0;t=1.5`), 0, false},
		{"ietf negative t", 429, headers("RateLimit", `"a";r=0;t=-1`), 0, false},
		{"ietf huge t", 429, headers("RateLimit", `"a";r=0;t=99999999999999999999`), longestDuration, true},
		{"ietf window from policy", 429, headers("RateLimit", `"a";r=0`, "RateLimit-Policy", `"b";q=1;w=5, "a";q=100;w=30`), 30 * time.Second, true},
		{"ietf no window", 429, headers("RateLimit", `"a";r=0`, "RateLimit-Policy", `"b";q=1;w=5`), 0, false},
		{"ietf old dictionary form is ignored", 429, headers("RateLimit", `limit=10, remaining=0, reset=5`), 0, false},
		{"ietf empty members", 429, headers("RateLimit", `,,;,"";r=0;t=3`), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &http.Response{StatusCode: tt.status, Header: tt.give}
			got, ok := retryhttp.ParseRateLimitReset(res, now)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestDelayPrecedence checks the order DefaultDelayFn reads the server's
// hints in, and the 429 backoff without any.
func TestDelayPrecedence(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	opts := retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -1} // exact waits
	tests := []struct {
		name   string
		status int
		give   http.Header
		count  int
		r      float64
		want   time.Duration
	}{
		{"retry-after wins", 429, headers("Retry-After", "2", "RateLimit", `"a";r=0;t=10`, "X-RateLimit-Reset", "30"), 1, 0.5, 2 * time.Second},
		{"invalid retry-after: ietf", 429, headers("Retry-After", "soon", "RateLimit", `"a";r=0;t=10`), 1, 0.5, 10 * time.Second},
		{"x reset", 429, headers("X-RateLimit-Reset", "1800000030"), 1, 0.5, 30 * time.Second},
		{"429 without hints: 1s base", 429, http.Header{}, 1, 0.5, 500 * time.Millisecond},
		{"429 without hints, retry 3", 429, http.Header{}, 3, 0.5, 2 * time.Second},
		{"429 without hints, capped", 429, http.Header{}, 10, 0.5, 5 * time.Second},
		{"429 with past reset: backoff", 429, headers("X-RateLimit-Reset", "1700000000"), 1, 0.5, 500 * time.Millisecond},
		{"503 without hints: 250ms base", 503, http.Header{}, 1, 0.5, 125 * time.Millisecond},
		{"503 with reset but quota left: backoff", 503, headers("X-RateLimit-Reset", "30", "X-RateLimit-Remaining", "3"), 1, 0.5, 125 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := retryhttp.Attempt{Count: tt.count, Res: &http.Response{StatusCode: tt.status, Header: tt.give}}
			assert.Equal(t, tt.want, retryhttp.DelayWith(opts, a, now, tt.r))
		})
	}
	t.Run("jitter applies to reset waits", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 1, Res: &http.Response{StatusCode: 429, Header: headers("RateLimit-Reset", "3")}}
		def := retryhttp.CustomizedDelayFnOptions{}
		assert.Equal(t, 2*time.Second, retryhttp.DelayWith(def, a, now, 0))
		assert.LessOrEqual(t, retryhttp.DelayWith(def, a, now, nextBelowOne), 4*time.Second)
	})
	t.Run("throttle base option", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 2, Res: &http.Response{StatusCode: 429, Header: http.Header{}}}
		o := retryhttp.CustomizedDelayFnOptions{ThrottleBase: 3 * time.Second, Cap: time.Second}
		// Cap is raised to ThrottleBase: min(3s, 3s·2) = 3s.
		assert.Equal(t, 1500*time.Millisecond, retryhttp.DelayWith(o, a, now, 0.5))
	})
}

// TestDefaultDelayFn429Distribution checks the draws for a 429 without
// hints: uniform below 1s·2^(n−1).
func TestDefaultDelayFn429Distribution(t *testing.T) {
	const n = 20000
	a := retryhttp.Attempt{Count: 2, Res: &http.Response{StatusCode: 429, Header: http.Header{}}}
	s := sampleDelays(t, n, 0, 2*time.Second-1, func() time.Duration { return retryhttp.DefaultDelayFn(a) })
	assertUniform(t, n, s)
}

// TestRateLimitResetLoopback sends requests to a server that throttles with
// each kind of header and checks the waits the transport chose.
func TestRateLimitResetLoopback(t *testing.T) {
	tests := []struct {
		name     string
		give     http.Header
		min, max time.Duration
	}{
		{"ietf", headers("RateLimit", `"default";r=0;t=3`, "RateLimit-Policy", `"default";q=10;w=60`), 2 * time.Second, 4 * time.Second},
		{"reset", headers("RateLimit-Reset", "6"), 4 * time.Second, 8 * time.Second},
		{"x reset delta", headers("X-RateLimit-Reset", "9", "X-RateLimit-Remaining", "0"), 6 * time.Second, 12 * time.Second},
		{"x reset epoch", headers("X-RateLimit-Reset", "+epoch+"), 0, 0}, // filled below
		{"none", http.Header{}, 0, time.Second},
		{"hostile", headers("X-RateLimit-Reset", "-1", "RateLimit", `"x";r=0;t=abc`), 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			give := tt.give.Clone()
			lo, hi := tt.min, tt.max
			if give.Get("X-RateLimit-Reset") == "+epoch+" {
				// 30s ahead of the real clock, which DefaultDelayFn reads;
				// a second of slack either side for a slow machine.
				give.Set("X-RateLimit-Reset", strconvUnix(time.Now().Add(30*time.Second)))
				lo, hi = 19*time.Second, 41*time.Second
			}
			srv := newCountingServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					for k, v := range give {
						w.Header()[k] = v
					}
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				_, _ = io.WriteString(w, "ok")
			})
			tr := newTransport(t, unlimitedBudget)
			clock := fakeWaits(tr)
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(t, "ok", strings.TrimSpace(string(body)))
			assert.EqualValues(t, 2, srv.attempts.Load())
			waits := clock.Sleeps()
			require.Len(t, waits, 1)
			assert.GreaterOrEqual(t, waits[0], lo)
			assert.LessOrEqual(t, waits[0], hi)
		})
	}
}

func strconvUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// FuzzParseRateLimitReset checks that no header value makes the rate-limit
// parsing panic or give a negative wait, and that a wait is given only when
// one of the headers holds a value.
func FuzzParseRateLimitReset(f *testing.F) {
	for _, s := range []string{
		"", "0", "30", "1.5", "1800000042", "99999999999999999999999", "-5", "+5", "1e9", ".", "5.",
		`"default";r=0;t=10`, `a;r=0;t=10, b;r=0;t=99`, `"a\"b";r=0;t=8`, `"a;r=0`, `"a";r=0`, `;;;,,,""`,
	} {
		f.Add(s, s, s, s, uint16(429))
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, ietf, policy, reset, xreset string, status uint16) {
		h := http.Header{}
		for k, v := range map[string]string{"RateLimit": ietf, "RateLimit-Policy": policy, "RateLimit-Reset": reset, "X-RateLimit-Reset": xreset, "X-Rate-Limit-Reset": xreset} {
			if v != "" {
				h.Set(k, v)
			}
		}
		d, ok := retryhttp.ParseRateLimitReset(&http.Response{StatusCode: int(status), Header: h}, now)
		if d < 0 {
			t.Fatalf("negative wait %v for %v", d, h)
		}
		if ok && ietf == "" && reset == "" && xreset == "" {
			t.Fatalf("a wait (%v) from no header: %v", d, h)
		}
		if !ok && d != 0 {
			t.Fatalf("no wait but %v", d)
		}
	})
}

// TestHostileRateLimitReset sends GETs to servers that answer every request
// with a 429 carrying hostile rate-limit headers (and no Retry-After), and
// checks the attempts and waits: a huge wait returns the 429 at once, an
// invalid or past value falls back to the 429 backoff (1s base), never to
// an immediate retry.
func TestHostileRateLimitReset(t *testing.T) {
	throttleBackoff := func(t *testing.T, waits []time.Duration) {
		require.Len(t, waits, 3)
		for i, d := range waits {
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.Less(t, d, time.Second<<i, "full jitter ceiling of retry %d", i+1)
		}
	}
	noWait := func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits) }
	tests := []struct {
		name         string
		give         http.Header
		wantAttempts int64
		wantWaits    func(t *testing.T, waits []time.Duration)
	}{
		{"x 10^18: returned at once", headers("X-RateLimit-Reset", "1000000000000000000"), 1, noWait},
		{"x 10^30: returned at once", headers("X-RateLimit-Reset", "1"+strings.Repeat("0", 30)), 1, noWait},
		{"ietf t=10^12: returned at once", headers("RateLimit", `"a";r=0;t=1000000000000`), 1, noWait},
		{"reset of an hour: returned at once", headers("RateLimit-Reset", "3600"), 1, noWait},
		{"x in 2001: backoff, not at once", headers("X-RateLimit-Reset", "1000000000"), 4, throttleBackoff},
		{"x -1: backoff", headers("X-RateLimit-Reset", "-1"), 4, throttleBackoff},
		{"x NaN: backoff", headers("X-RateLimit-Reset", "NaN"), 4, throttleBackoff},
		{"ietf garbage: backoff", headers("RateLimit", `"a;r=0;t=`), 4, throttleBackoff},
		{"ietf 1,000 policies: the largest", headers("RateLimit", strings.Repeat(`"p";r=0;t=1, `, 999)+`"q";r=0;t=2`), 4,
			func(t *testing.T, waits []time.Duration) {
				require.Len(t, waits, 3)
				for _, d := range waits { // 2s ± 1/3
					assert.GreaterOrEqual(t, d, 4*time.Second/3)
					assert.LessOrEqual(t, d, 8*time.Second/3)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.give {
					w.Header()[k] = v
				}
				w.WriteHeader(http.StatusTooManyRequests)
			})
			tr := newTransport(t, unlimitedBudget)
			clock := fakeWaits(tr)
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, "the last 429, as it is")
			assert.Equal(t, tt.wantAttempts, srv.attempts.Load())
			tt.wantWaits(t, clock.Sleeps())
		})
	}
}
