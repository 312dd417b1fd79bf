package retryafter

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// headers builds a header from name, value pairs; a name may repeat.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// retryAfterHeader is a header whose Retry-After lines are values.
func retryAfterHeader(values ...string) http.Header { return http.Header{"Retry-After": values} }

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2006, time.January, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		give   http.Header
		want   time.Duration
		wantOK bool
	}{
		{"missing", http.Header{}, 0, false},
		{"nil header", nil, 0, false},
		{"empty", retryAfterHeader(""), 0, false},
		{"spaces", retryAfterHeader("   "), 0, false},
		{"zero", retryAfterHeader("0"), 0, true},
		{"five", retryAfterHeader("5"), 5 * time.Second, true},
		{"spaces around", retryAfterHeader(" 7 "), 7 * time.Second, true},
		{"tab around", retryAfterHeader("\t7\t"), 7 * time.Second, true},
		{"leading zeros", retryAfterHeader("0012"), 12 * time.Second, true},
		{"one day", retryAfterHeader("86400"), 24 * time.Hour, true},
		{"largest exact", retryAfterHeader("9223372036"), 9223372036 * time.Second, true},
		{"just too large", retryAfterHeader("9223372037"), maxDuration, true},
		{"10^17 saturates", retryAfterHeader("100000000000000000"), maxDuration, true},
		{"10^18 saturates", retryAfterHeader("1000000000000000000"), maxDuration, true},
		{"max uint64 saturates", retryAfterHeader("18446744073709551615"), maxDuration, true},
		{"uint64 overflow saturates", retryAfterHeader("18446744073709551616"), maxDuration, true},
		{"100 digits saturate", retryAfterHeader("1" + strings.Repeat("0", 99)), maxDuration, true},
		{"negative", retryAfterHeader("-1"), 0, false},
		{"negative zero", retryAfterHeader("-0"), 0, false},
		{"plus sign", retryAfterHeader("+5"), 0, false},
		{"fraction", retryAfterHeader("1.5"), 0, false},
		{"exponent", retryAfterHeader("1e3"), 0, false},
		{"hex", retryAfterHeader("0x10"), 0, false},
		{"unit", retryAfterHeader("5s"), 0, false},
		{"inner space", retryAfterHeader("1 5"), 0, false},
		{"garbage", retryAfterHeader("abc"), 0, false},
		{"non-ASCII digits", retryAfterHeader("٥"), 0, false},
		{"RFC 1123 future", retryAfterHeader("Mon, 02 Jan 2006 15:04:35 GMT"), 30 * time.Second, true},
		{"RFC 1123 now", retryAfterHeader("Mon, 02 Jan 2006 15:04:05 GMT"), 0, true},
		{"RFC 1123 past", retryAfterHeader("Mon, 02 Jan 2006 15:03:05 GMT"), 0, true},
		{"RFC 1123 far past", retryAfterHeader("Thu, 01 Jan 1970 00:00:00 GMT"), 0, true},
		{"RFC 850 future", retryAfterHeader("Monday, 02-Jan-06 15:05:05 GMT"), time.Minute, true},
		{"RFC 850 past", retryAfterHeader("Sunday, 01-Jan-06 15:04:05 GMT"), 0, true},
		{"asctime future", retryAfterHeader("Mon Jan  2 16:04:05 2006"), time.Hour, true},
		{"asctime past", retryAfterHeader("Sun Jan  1 15:04:05 2006"), 0, true},
		{"date with spaces", retryAfterHeader("  Mon, 02 Jan 2006 15:04:15 GMT "), 10 * time.Second, true},
		{"far future saturates", retryAfterHeader("Fri, 31 Dec 9999 23:59:59 GMT"), maxDuration, true},
		{"invalid date", retryAfterHeader("Mon, 32 Jan 2006 15:04:05 GMT"), 0, false},
		{"ISO date", retryAfterHeader("2006-01-02T15:05:05Z"), 0, false},
		{"first of several counts", retryAfterHeader("3", "60"), 3 * time.Second, true},
		{"first date of several counts", retryAfterHeader("Mon, 02 Jan 2006 15:04:09 GMT", "1"), 4 * time.Second, true},
		{"invalid first of several", retryAfterHeader("soon", "5"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Parse(tt.give, func() time.Time { return now })
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.want, got)
			}
			assert.GreaterOrEqual(t, got, time.Duration(0))
		})
	}
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
		{"x epoch far future saturates", 429, headers("X-RateLimit-Reset", "99999999999999999999999"), maxDuration, true},
		{"x epoch milliseconds: far future", 429, headers("X-RateLimit-Reset", "1800000042000"), maxDuration, true},
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
		{"ietf huge t", 429, headers("RateLimit", `"a";r=0;t=99999999999999999999`), maxDuration, true},
		{"ietf window from policy", 429, headers("RateLimit", `"a";r=0`, "RateLimit-Policy", `"b";q=1;w=5, "a";q=100;w=30`), 30 * time.Second, true},
		{"ietf no window", 429, headers("RateLimit", `"a";r=0`, "RateLimit-Policy", `"b";q=1;w=5`), 0, false},
		{"draft-07 dictionary", 429, headers("RateLimit", `limit=50, remaining=0, reset=2`), 2 * time.Second, true},
		{"draft-07 on a 200 too", 200, headers("RateLimit", `limit=50, remaining=0, reset=2`), 2 * time.Second, true},
		{"draft-07 quota left", 429, headers("RateLimit", `limit=50, remaining=3, reset=2`), 0, false},
		{"draft-07 no reset", 429, headers("RateLimit", `limit=50, remaining=0`), 0, false},
		{"draft-07 fraction", 429, headers("RateLimit", `remaining=0, reset=1.5`), 0, false},
		{"draft-07 negative", 429, headers("RateLimit", `remaining=0, reset=-1`), 0, false},
		{"draft-07 two lines", 429, headers("RateLimit", `limit=5, remaining=0`, "RateLimit", `reset=4`), 4 * time.Second, true},
		{"draft-07 before RateLimit-Reset", 429, headers("RateLimit", `remaining=0, reset=9`, "RateLimit-Reset", "3"), 9 * time.Second, true},
		{"ietf empty members", 429, headers("RateLimit", `,,;,"";r=0;t=3`), 0, false},
		// The LLM APIs' fields come last: the reset of a spent resource.
		{"llm requests spent", 429, headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6m0s",
			"X-Ratelimit-Remaining-Tokens", "9000", "X-Ratelimit-Reset-Tokens", "20ms"), 6 * time.Minute, true},
		{"llm tokens spent", 429, headers("X-Ratelimit-Remaining-Requests", "12", "X-Ratelimit-Reset-Requests", "6m0s",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1m30.5s"), 90500 * time.Millisecond, true},
		{"llm both spent: the longer", 429, headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "20ms"), time.Second, true},
		{"llm 429, none spent: the longest", 429, headers("X-Ratelimit-Remaining-Requests", "3", "X-Ratelimit-Reset-Requests", "1s",
			"X-Ratelimit-Remaining-Tokens", "40", "X-Ratelimit-Reset-Tokens", "7.66s"), 7660 * time.Millisecond, true},
		{"llm 429, no remaining: the longest", 429, headers("X-Ratelimit-Reset-Requests", "20ms", "X-Ratelimit-Reset-Tokens", "2m59.56s"),
			2*time.Minute + 59560*time.Millisecond, true},
		{"llm 429, spent one malformed: the longest", 429, headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "soon",
			"X-Ratelimit-Reset-Tokens", "3s"), 3 * time.Second, true},
		{"llm 503, spent", 503, headers("X-Ratelimit-Remaining-Requests", " 0 ", "X-Ratelimit-Reset-Requests", " 20ms "), 20 * time.Millisecond, true},
		{"llm 503, quota left", 503, headers("X-Ratelimit-Remaining-Requests", "5", "X-Ratelimit-Reset-Requests", "20ms"), 0, false},
		{"llm 503, no remaining", 503, headers("X-Ratelimit-Reset-Requests", "20ms"), 0, false},
		{"llm 200, spent", 200, headers("X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1h"), time.Hour, true},
		{"llm zero", 429, headers("X-Ratelimit-Reset-Requests", "0s"), 0, true},
		{"llm bare 0", 429, headers("X-Ratelimit-Reset-Requests", "0"), 0, true},
		{"llm no unit", 429, headers("X-Ratelimit-Reset-Requests", "6"), 0, false},
		{"llm negative", 429, headers("X-Ratelimit-Reset-Requests", "-1s"), 0, false},
		{"llm plus", 429, headers("X-Ratelimit-Reset-Requests", "+1s"), 0, false},
		{"llm unknown unit", 429, headers("X-Ratelimit-Reset-Requests", "1d"), 0, false},
		{"llm epoch", 429, headers("X-Ratelimit-Reset-Requests", "1800000042"), 0, false},
		{"llm huge saturates", 429, headers("X-Ratelimit-Reset-Requests", "99999999999999h"), maxDuration, true},
		{"llm 10^30 ns saturates", 429, headers("X-Ratelimit-Reset-Requests", "1"+strings.Repeat("0", 30)+"ns"), maxDuration, true},
		{"llm after x", 429, headers("X-RateLimit-Reset", "5", "X-Ratelimit-Reset-Requests", "1m"), 5 * time.Second, true},
		{"llm after ietf", 429, headers("RateLimit", `"a";r=0;t=10`, "X-Ratelimit-Reset-Requests", "1m"), 10 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &http.Response{StatusCode: tt.status, Header: tt.give}
			got, ok := RateLimitReset(res, func() time.Time { return now })
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestGoDuration checks the LLM APIs' durations: what time.ParseDuration
// reads, without a sign, saturating instead of refusing a huge value.
func TestGoDuration(t *testing.T) {
	tests := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		{"6m0s", 6 * time.Minute, true},
		{"1s", time.Second, true},
		{"20ms", 20 * time.Millisecond, true},
		{"1m30.5s", 90500 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"0", 0, true},
		{"0s", 0, true},
		{".5s", 500 * time.Millisecond, true},
		{"1.s", time.Second, true},
		{"7us", 7 * time.Microsecond, true},
		{"7µs", 7 * time.Microsecond, true},
		{"7μs", 7 * time.Microsecond, true},
		{"9ns", 9, true},
		{"2562047h47m16.854775807s", maxDuration, true},
		{"2562047h47m16.854775808s", maxDuration, true},
		{"9223372036854775808ns", maxDuration, true},
		{"99999999999999999999999h", maxDuration, true},
		{"", 0, false},
		{"s", 0, false},
		{"5", 0, false},
		{"00", 0, false},
		{".s", 0, false},
		{"1..5s", 0, false},
		{"-1s", 0, false},
		{"+1s", 0, false},
		{"-0", 0, false},
		{"1d", 0, false},
		{"1 s", 0, false},
		{" 1s", 0, false},
		{"1s ", 0, false},
		{"1sec", 0, false},
		{"1e3s", 0, false},
		{"NaN", 0, false},
		{"1s5", 0, false},
	}
	for _, tt := range tests {
		got, ok := GoDuration(tt.give)
		assert.Equal(t, tt.wantOK, ok, "%q", tt.give)
		assert.Equal(t, tt.want, got, "%q", tt.give)
	}
}

// FuzzGoDuration checks GoDuration against time.ParseDuration: it never
// panics or gives a negative wait; it reads what ParseDuration reads
// (without a sign) alike, and reads nothing ParseDuration refuses but a
// well-formed value too large to represent, which saturates.
func FuzzGoDuration(f *testing.F) {
	for _, s := range []string{"6m0s", "1m30.5s", "20ms", ".5s", "1.s", "0", "99999999999999h", "1µs2h", "1d", "-1s", "1.2.3s", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := GoDuration(v)
		want, err := time.ParseDuration(v)
		switch {
		case d < 0:
			t.Fatalf("%q: negative %v", v, d)
		case !ok && d != 0:
			t.Fatalf("%q: refused, but %v", v, d)
		case ok && err == nil && d != want:
			t.Fatalf("%q: %v, ParseDuration %v", v, d, want)
		case ok && err != nil && d != maxDuration:
			t.Fatalf("%q: ParseDuration refuses it (%v), yet %v", v, err, d)
		case !ok && err == nil && want > 0 && v[0] != '+':
			t.Fatalf("%q: refused, ParseDuration reads %v", v, want)
		}
	})
}

// FuzzParseRateLimitReset checks that no header value makes the rate-limit
// parsing panic or give a negative wait, and that a wait is given only when
// one of the headers holds a value.
func FuzzParseRateLimitReset(f *testing.F) {
	for _, s := range []string{
		"", "0", "30", "1.5", "1800000042", "99999999999999999999999", "-5", "+5", "1e9", ".", "5.",
		`"default";r=0;t=10`, `a;r=0;t=10, b;r=0;t=99`, `"a\"b";r=0;t=8`, `"a;r=0`, `"a";r=0`, `;;;,,,""`,
	} {
		f.Add(s, s, s, s, s, uint16(429))
	}
	for _, s := range []string{"6m0s", "1m30.5s", "20ms", ".5s", "1.s", "0", "99999999999999h", "1µs2h", "1d", "-1s", "1.2.3s"} {
		f.Add("", "", "", "", s, uint16(429))
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, ietf, policy, reset, xreset, llm string, status uint16) {
		h := http.Header{}
		for k, v := range map[string]string{"RateLimit": ietf, "RateLimit-Policy": policy, "RateLimit-Reset": reset, "X-RateLimit-Reset": xreset,
			"X-Rate-Limit-Reset": xreset, "X-Ratelimit-Reset-Requests": llm, "X-Ratelimit-Reset-Tokens": llm, "X-Ratelimit-Remaining-Tokens": "0"} {
			if v != "" {
				h.Set(k, v)
			}
		}
		d, ok := RateLimitReset(&http.Response{StatusCode: int(status), Header: h}, func() time.Time { return now })
		if d < 0 {
			t.Fatalf("negative wait %v for %v", d, h)
		}
		if ok && ietf == "" && reset == "" && xreset == "" && llm == "" {
			t.Fatalf("a wait (%v) from no header: %v", d, h)
		}
		if !ok && d != 0 {
			t.Fatalf("no wait but %v", d)
		}
	})
}
