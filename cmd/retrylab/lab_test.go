package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// server, client and handler of the lab must be gone when a run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tiny is a run small enough for the race detector: 2s of model time, run
// four times faster.
func tiny(t *testing.T, scenario string) config {
	cfg := defaultConfig()
	cfg.scenario = scenario
	cfg.duration = 2 * time.Second
	cfg.timescale = 0.25
	cfg.out = t.TempDir()
	return cfg
}

// runTiny runs one scenario at tiny scale and checks what every report
// must satisfy: an index.html, and SVG charts that parse as XML.
//
// The scenarios do not run in parallel: their 25ms buckets need the CPU.
func runTiny(t *testing.T, scenario string, clients int) results {
	cfg := tiny(t, scenario)
	cfg.clients = clients
	var out bytes.Buffer
	res, err := run(context.Background(), &out, cfg)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "Report: ")

	html, err := os.ReadFile(res.report)
	require.NoError(t, err)
	svgs, err := filepath.Glob(filepath.Join(cfg.out, "*.svg"))
	require.NoError(t, err)
	require.Len(t, svgs, 1)
	for _, f := range svgs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assertXML(t, b)
		assert.Contains(t, string(html), "<svg", "index.html embeds %s", f)
	}
	return res
}

// assertXML checks that b is well-formed XML with an <svg> root.
func assertXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if !assert.NoError(t, err) {
			return
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	assert.Equal(t, "svg", root)
}

func TestHerd(t *testing.T) {
	res := runTiny(t, "herd", 40)
	require.NotNil(t, res.herd)
	rows := map[string]herdRow{}
	for _, r := range res.herd.rows {
		rows[r.policy.name] = r
		assert.Equal(t, 40*4, r.sum.requests, r.policy.name) // 40 clients, 2s / 500ms
		assert.GreaterOrEqual(t, r.amplification, 1.0, r.policy.name)
		assert.InDelta(t, 0.5, r.sum.success, 0.5, r.policy.name)
	}
	immediate, defaults := rows[immediatePolicy().name], rows[defaultsPolicy().name]
	// The outage covers three eighths of the run: immediate retries send
	// about 1 + 3·3/8 attempts per request; the shared budget, 10 retries
	// plus a tenth of the successes.
	assert.Greater(t, immediate.amplification, 1.6)
	assert.Less(t, defaults.amplification, 1.3)
	// Peaks are not compared: at this scale one bucket is 25ms, and a
	// scheduler stall under the race detector moves requests from one
	// bucket to the next. The counts do not depend on such timing.
	assert.Positive(t, defaults.peak)
	assert.Greater(t, res.herd.normal, 0.0)
}

func TestChain(t *testing.T) {
	res := runTiny(t, "chain", 20) // 4 requests to the dead tail, 20 to the flaky one
	require.NotNil(t, res.chain)
	for _, r := range res.chain.rows {
		switch {
		case r.policy.name == naivePolicy().name && r.tail == "dead":
			// 3 tries per hop: 3, 9, 27, 81 and 243 per request.
			n := int64(r.requests)
			assert.Equal(t, [hops]int64{3 * n, 9 * n, 27 * n, 81 * n, 243 * n}, r.hits)
			assert.Zero(t, r.sum.success)
		case r.policy.name == defaultsPolicy().name && r.tail == "dead":
			// Each hop adds at most its budget's 10 retries.
			assert.LessOrEqual(t, r.perRequest(), float64(r.requests+10*hops)/float64(r.requests))
			assert.Zero(t, r.sum.success)
		case r.policy.name == crossHopPolicy().name && r.tail == "dead":
			// Only S4, the hop above the dead tail, retries; the hops above
			// it are told not to: S1 … S4 see each request once, and S5
			// sees it plus at most S4's budget of 10 retries.
			n := int64(r.requests)
			assert.Equal(t, [hops - 1]int64{n, n, n, n}, [hops - 1]int64(r.hits[:hops-1]))
			assert.LessOrEqual(t, r.hits[hops-1], n+10)
			assert.Zero(t, r.sum.success)
		default: // flaky 5%
			assert.Less(t, r.perRequest(), 1.2, "%s, %s", r.policy.name, r.tail)
			assert.Greater(t, r.sum.success, 0.9, "%s, %s", r.policy.name, r.tail)
		}
	}
	assert.Len(t, res.chain.rows, len(chainTails)*len(chainPolicies()))
}

func TestOverload(t *testing.T) {
	res := runTiny(t, "overload", 40)
	require.NotNil(t, res.overload)
	rows := map[string]overloadRow{}
	for _, r := range res.overload.rows {
		rows[r.policy.name] = r
		assert.Positive(t, r.goodput, r.policy.name)
	}
	immediate, defaults := rows[immediatePolicy().name], rows[defaultsPolicy().name]
	assert.Greater(t, immediate.amplification, defaults.amplification)
	assert.Less(t, defaults.amplification, 1.3)
	assert.InDelta(t, overloadFactor, res.overload.offered/res.overload.capRate, 0.5)
}

// TestShed checks the shed scenario's accounting: every attempt the
// server received was shed, answered in time, worked on for nobody, or
// abandoned at the end; the naive clients' retries are bounded by their
// count, the defaults' by the budget.
func TestShed(t *testing.T) {
	res := runTiny(t, "shed", 40)
	require.NotNil(t, res.shed)
	require.Len(t, res.shed.rows, len(shedPolicies())*len(shedKinds))
	assert.Equal(t, 2, res.shed.workers) // 40 clients, 160 requests/s, 1.6× capacity, 20ms each
	for _, r := range res.shed.rows {
		name := r.policy.name + ", " + r.server
		assert.Equal(t, 40*4, r.sum.requests, name) // 40 clients, 1s / 250ms
		assert.Equal(t, r.attempts, r.shed+r.useful+r.wasted+r.abandoned, name)
		assert.LessOrEqual(t, r.attempts, int64(4*r.sum.requests), name)
		// A success is a useful answer; a useful answer may still reach its
		// client just after its timeout.
		assert.LessOrEqual(t, r.sum.success, float64(r.useful)/float64(max(r.sum.requests, 1))+1e-9, name)
		switch r.server {
		case shedKinds[0].name:
			assert.Zero(t, r.shed, name)
			assert.Equal(t, "—", r.limit, name)
		case shedKinds[1].name:
			assert.Zero(t, r.abandoned, "%s: nothing queues in the workers", name)
			assert.Equal(t, "2", r.limit, name)
		}
		if r.policy.name == defaultsPolicy().name {
			// The budget: at most 10 retries, plus a tenth of the successes
			// (each a useful answer), plus a few replays net/http makes on
			// its own on a reused connection that dies before answering.
			assert.LessOrEqual(t, float64(r.attempts), float64(r.sum.requests)+10+0.1*float64(r.useful)+5, name)
		}
		assert.Len(t, r.useful100, res.shed.buckets+shedTail, name)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(*config)
		want string // in the error; "" for none
	}{
		{"defaults", func(*config) {}, ""},
		{"scenario", func(c *config) { c.scenario = "storm" }, "-scenario"},
		{"no clients", func(c *config) { c.clients = 0 }, "-clients"},
		{"short", func(c *config) { c.duration = time.Millisecond }, "-duration"},
		{"timescale NaN", func(c *config) { c.timescale = nan() }, "-timescale"},
		{"timescale 0", func(c *config) { c.timescale = 0 }, "-timescale"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			tt.give(&cfg)
			err := cfg.validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

func TestChartsAreXML(t *testing.T) {
	tests := []struct {
		name string
		give []byte
	}{
		{"line chart", lineChart{
			title: `a <title> & "quotes"`, xLabel: "x", yLabel: "y", dx: 0.1,
			lines:  []line{{"a & b", []float64{0, 1, 5, 2}}, {"c", []float64{3}}},
			bands:  []band{{0.1, 0.2, "<outage>"}},
			hlines: []hline{{4, "capacity"}},
		}.svg()},
		{"empty line chart", lineChart{title: "empty"}.svg()},
		{"zero line chart", lineChart{dx: 1, lines: []line{{"z", []float64{0, 0}}}}.svg()},
		{"bar chart", barChart{title: "bars", bars: []bar{{"x<y", 243}, {"one", 1}, {"zero", 0}}}.svg()},
		{"empty bar chart", barChart{}.svg()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertXML(t, tt.give)
			assert.NotContains(t, string(tt.give), "NaN")
			assert.NotContains(t, string(tt.give), "Inf")
		})
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct {
		span float64
		n    int
		want float64
	}{
		{250, 5, 50},
		{7, 8, 1},
		{0.9, 8, 0.2},
		{0, 5, 1},
		{-3, 5, 1},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, niceStep(tt.span, tt.n), 1e-9, "niceStep(%v, %d)", tt.span, tt.n)
	}
}

func TestPercentile(t *testing.T) {
	sorted := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	assert.Equal(t, time.Duration(5), percentile(sorted, 0.5))
	assert.Equal(t, time.Duration(10), percentile(sorted, 0.99))
	assert.Equal(t, time.Duration(1), percentile(sorted, 0))
	assert.Zero(t, percentile(nil, 0.5))
}

func TestReportEscapes(t *testing.T) {
	dir := t.TempDir()
	s := section{id: "x", title: "<script>", header: []string{"a"}, rows: [][]string{{"<b>"}}}
	path, err := writeReport(dir, defaultConfig(), []section{s})
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(b), "<script>") || strings.Contains(string(b), "<b>"))
}
