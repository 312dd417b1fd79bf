package quota

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var now = time.Unix(1_800_000_000, 0)

const all = IETF | XRateLimit | LLM

// hdr builds a header from "Key: value" lines.
func hdr(lines ...string) http.Header {
	h := http.Header{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		h.Add(k, strings.TrimSpace(v))
	}
	return h
}

func TestRead(t *testing.T) {
	tests := []struct {
		name string
		give http.Header
		want []Observation
	}{
		{"draft-11", hdr(`RateLimit: "default";r=50;t=30`, `RateLimit-Policy: "burst";q=100;w=60,"default";q=1000;w=86400`),
			[]Observation{{Policy: "default", Remaining: 50, Reset: 30 * time.Second, HasReset: true, Limit: 1000, Window: 86400 * time.Second}}},
		{"draft-11 two policies, token names", hdr(`RateLimit: burst;r=0;t=2, daily;r=900;t=80000`),
			[]Observation{{Policy: "burst", Remaining: 0, Reset: 2 * time.Second, HasReset: true}, {Policy: "daily", Remaining: 900, Reset: 80000 * time.Second, HasReset: true}}},
		{"draft-11 partition key", hdr(`RateLimit: "p";r=3;t=1;pk=:YWJj:`, `RateLimit-Policy: "p";q=10;w=1;pk=:YWJj:`),
			[]Observation{{Policy: "p/YWJj", Remaining: 3, Reset: time.Second, HasReset: true, Limit: 10, Window: time.Second}}},
		{"draft-11 r=0 without t: the window", hdr(`RateLimit: "a";r=0`, `RateLimit-Policy: "a";q=5;w=7`),
			[]Observation{{Policy: "a", Remaining: 0, Reset: 7 * time.Second, HasReset: true, Limit: 5, Window: 7 * time.Second}}},
		{"draft-11 bytes quota skipped", hdr(`RateLimit: "a";r=0;t=1`, `RateLimit-Policy: "a";q=5;w=7;qu="content-bytes"`), nil},
		{"draft-11 malformed field ignored", hdr(`RateLimit: "a";r=0;t=1,`), nil},
		{"draft-11 negative r skipped", hdr(`RateLimit: "a";r=-1;t=1, "b";r=2;t=1`),
			[]Observation{{Policy: "b", Remaining: 2, Reset: time.Second, HasReset: true}}},
		{"draft-11 decimal t: no reset", hdr(`RateLimit: "a";r=1;t=1.5`), []Observation{{Policy: "a", Remaining: 1}}},
		{"draft-11 t decades ahead: no reset", hdr(`RateLimit: "a";r=0;t=999999999999999`), []Observation{{Policy: "a", Remaining: 0}}},
		{"draft-07", hdr(`RateLimit: limit=100, remaining=50, reset=5`, `RateLimit-Policy: 100;w=10`),
			[]Observation{{Remaining: 50, Reset: 5 * time.Second, HasReset: true, Limit: 100, Window: 10 * time.Second}}},
		{"draft-06", hdr(`RateLimit-Limit: 10, 10;w=1, 1000;w=3600`, `RateLimit-Remaining: 0`, `RateLimit-Reset: 1`),
			[]Observation{{Remaining: 0, Reset: time.Second, HasReset: true, Limit: 10, Window: time.Second}}},
		{"draft-06 epoch (GitLab)", hdr(`RateLimit-Limit: 10`, `RateLimit-Remaining: 4`, `RateLimit-Reset: 1800000060`),
			[]Observation{{Remaining: 4, Reset: time.Minute, HasReset: true, Limit: 10}}},
		{"epoch in the past: reset now", hdr(`RateLimit-Remaining: 0`, `RateLimit-Reset: 1700000000`),
			[]Observation{{Remaining: 0, HasReset: true}}},
		{"epoch decades ahead: no reset", hdr(`RateLimit-Remaining: 0`, `RateLimit-Reset: 4000000000`), []Observation{{Remaining: 0}}},
		{"millisecond epoch: no reset", hdr(`RateLimit-Remaining: 0`, `RateLimit-Reset: 1800000000000`), []Observation{{Remaining: 0}}},
		{"github", hdr(`X-RateLimit-Limit: 5000`, `X-RateLimit-Remaining: 4999`, `X-RateLimit-Reset: 1800000600`, `X-RateLimit-Resource: core`),
			[]Observation{{Policy: "core", Remaining: 4999, Reset: 10 * time.Minute, HasReset: true, Limit: 5000, Routed: true}}},
		{"envoy", hdr(`x-ratelimit-limit: 10, 10;w=60`, `x-ratelimit-remaining: 9`, `x-ratelimit-reset: 30`),
			[]Observation{{Remaining: 9, Reset: 30 * time.Second, HasReset: true, Limit: 10, Window: time.Minute, Routed: true}}},
		{"llm", hdr(`x-ratelimit-limit-requests: 60`, `x-ratelimit-remaining-requests: 59`, `x-ratelimit-reset-requests: 1h2m3.5s`, `x-ratelimit-remaining-tokens: 1000`),
			[]Observation{{Policy: "requests", Remaining: 59, Reset: time.Hour + 2*time.Minute + 3500*time.Millisecond, HasReset: true, Fine: true, Limit: 60, Routed: true}}},
		{"llm negative reset", hdr(`x-ratelimit-remaining-requests: 0`, `x-ratelimit-reset-requests: -1s`),
			[]Observation{{Policy: "requests", Routed: true}}},
		{"IETF first", hdr(`RateLimit: "a";r=1;t=1`, `X-RateLimit-Remaining: 5`), []Observation{{Policy: "a", Remaining: 1, Reset: time.Second, HasReset: true}}},
		{"cached response", hdr(`Age: 10`, `RateLimit: "a";r=0;t=1`), nil},
		{"huge count saturates", hdr(`X-RateLimit-Remaining: 99999999999999999999999`), []Observation{{Remaining: maxCount, Routed: true}}},
		{"non-integer remaining", hdr(`X-RateLimit-Remaining: 1.5`, `RateLimit-Remaining: -1`), nil},
		{"none", hdr(`Content-Type: text/plain`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Read(tt.give, now, all, 0, false))
		})
	}
}

func TestReadDialects(t *testing.T) {
	h := hdr(`X-RateLimit-Remaining: 5`, `x-ratelimit-remaining-requests: 3`)
	assert.Nil(t, Read(h, now, IETF, 0, false))
	assert.Equal(t, int64(5), Read(h, now, IETF|XRateLimit, 0, false)[0].Remaining)
	assert.Equal(t, int64(3), Read(h, now, IETF|LLM, 0, false)[0].Remaining)
}

// Retry-After wins over the fields' reset for the quotas with none left.
func TestReadRetryAfterWins(t *testing.T) {
	h := hdr(`RateLimit: "a";r=0;t=1, "b";r=5;t=1`)
	got := Read(h, now, IETF, 7*time.Second, true)
	assert.Equal(t, 7*time.Second, got[0].Reset)
	assert.Equal(t, time.Second, got[1].Reset)
}

// Thousands of policies: at most maxMembers are read.
func TestReadBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`p` + strings.Repeat("x", i%7) + `;r=1;t=1`)
	}
	got := Read(hdr("RateLimit: "+b.String()), now, IETF, 0, false)
	assert.Len(t, got, maxMembers)
}

func TestParseList(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
		n    int
	}{
		{`"a";r=1`, true, 1},
		{`a, b;x;y=?0, 1;w=2, 1.5, :AA==:, "q\"s"`, true, 6},
		{`a,`, false, 0},
		{`a b`, false, 0},
		{`(a b)`, false, 0},
		{`"unterminated`, false, 0},
		{`a;R=1`, false, 0},
		{`1234567890123456`, false, 0},
		{`"\x"`, false, 0},
		{`""`, true, 1},
	}
	for _, tt := range tests {
		ms, ok := parseList([]string{tt.give})
		assert.Equal(t, tt.ok, ok, tt.give)
		assert.Len(t, ms, tt.n, tt.give)
	}
}

// FuzzReadIETF: whatever RateLimit and RateLimit-Policy say, Read does not
// panic and returns bounded, valid observations.
func FuzzReadIETF(f *testing.F) {
	for _, s := range [][2]string{
		{`"default";r=50;t=30`, `"burst";q=100;w=60,"daily";q=1000;w=86400`},
		{`limit=100, remaining=50, reset=5`, `100;w=10`},
		{`"a";r=0;pk=:YWJj:`, `"a";q=1;w=1;pk=:YWJj:;qu="requests"`},
		{`a;r=0;t=999999999999999`, `a;q=-1;w=1.5`},
		{`"\"";r=1`, `,`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rl, policy string) {
		h := http.Header{"Ratelimit": {rl}, "Ratelimit-Policy": {policy}}
		checkObs(t, h, Read(h, now, all, 0, false))
	})
}

// FuzzReadLegacy: whatever the three-header forms say (both prefixes), no
// panic, valid observations.
func FuzzReadLegacy(f *testing.F) {
	for _, s := range [][4]string{
		{"10, 10;w=1", "0", "1", ""},
		{"5000", "4999", "1800000600", "core"},
		{"x", "-1", "1.5.5", "a b"},
		{"", "99999999999999999999", "4000000000", ""},
		{"1", "1", "1700000000.123456789123", "search"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, limit, remaining, reset, resource string) {
		for _, p := range []string{"Ratelimit-", "X-Ratelimit-"} {
			h := http.Header{p + "Limit": {limit}, p + "Remaining": {remaining}, p + "Reset": {reset}, "X-Ratelimit-Resource": {resource}}
			checkObs(t, h, Read(h, now, all, 0, false))
		}
	})
}

// FuzzReadLLM: whatever the LLM APIs' fields say, no panic, valid
// observations.
func FuzzReadLLM(f *testing.F) {
	for _, s := range [][3]string{
		{"60", "59", "6m0s"}, {"1", "0", "20ms"}, {"", "1", "1h2m3.5s"}, {"x", "1", "-1s"}, {"1", "1", "9999999h"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, limit, remaining, reset string) {
		h := http.Header{"X-Ratelimit-Limit-Requests": {limit}, "X-Ratelimit-Remaining-Requests": {remaining}, "X-Ratelimit-Reset-Requests": {reset}}
		checkObs(t, h, Read(h, now, LLM, 0, false))
	})
}

// checkObs fails t unless obs are bounded and valid.
func checkObs(t *testing.T, h http.Header, obs []Observation) {
	t.Helper()
	if len(obs) > 0 && !Advertised(h) {
		t.Fatalf("Read found %d quotas in a header Advertised passes over: %v", len(obs), h)
	}
	if len(obs) > maxMembers {
		t.Fatalf("%d observations", len(obs))
	}
	for _, o := range obs {
		if o.Remaining < 0 || o.Remaining > maxCount || o.Limit < 0 || o.Limit > maxCount ||
			o.Reset < 0 || o.Reset > maxReset || o.Window < 0 || o.Window > maxReset || len(o.Policy) > maxName {
			t.Fatalf("invalid observation %+v", o)
		}
	}
}

func TestAdvertised(t *testing.T) {
	tests := []struct {
		give http.Header
		want bool
	}{
		{give: nil, want: false},
		{give: http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"1"}}, want: false},
		{give: http.Header{"Ratelimit": {`"default";r=1;t=2`}}, want: true},
		{give: http.Header{"Ratelimit-Remaining": {"1"}}, want: true},
		{give: http.Header{"X-Ratelimit-Remaining": {"1"}}, want: true},
		{give: http.Header{"X-Ratelimit-Remaining-Requests": {"1"}}, want: true},
	}
	for _, tt := range tests {
		if got := Advertised(tt.give); got != tt.want {
			t.Errorf("Advertised(%v) = %v, want %v", tt.give, got, tt.want)
		}
		// Advertised is Read's cheap precheck: Read finds nothing where it
		// finds nothing.
		if !tt.want && len(Read(tt.give, time.Unix(0, 0), IETF|XRateLimit|LLM, 0, false)) > 0 {
			t.Errorf("Read found a quota in %v", tt.give)
		}
	}
}
