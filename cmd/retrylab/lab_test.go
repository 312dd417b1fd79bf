package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// server, client and handler of the lab must be gone when a run returns.
//
// Started as a child of the random scenario (childArg), the test binary
// runs that child instead of the tests, as the lab's binary does.
func TestMain(m *testing.M) {
	if code, ok := mainChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// tiny is a run small enough for the race detector: 2s of model time, run
// four times faster.
func tiny(t *testing.T, scenario string) config {
	cfg := defaultConfig()
	cfg.scenario = scenario
	cfg.duration = 2 * time.Second
	cfg.timescale = 0.25
	cfg.rerun = false // the race detector slows the machine down: a re-run would be too
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
	return runConfig(t, cfg)
}

// runConfig runs cfg and checks its report as runTiny does.
func runConfig(t *testing.T, cfg config) results {
	var out bytes.Buffer
	res, err := run(context.Background(), &out, cfg)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "Report: ")

	html, err := os.ReadFile(res.report)
	require.NoError(t, err)
	svgs, err := filepath.Glob(filepath.Join(cfg.out, "*.svg"))
	require.NoError(t, err)
	require.NotEmpty(t, svgs)
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
	// The outage is defined on the wall clock: a scheduler stall under the
	// race detector moves requests out of it (fewer fail), into the
	// server's capacity limit (more fail, shed), or past the clients' 2s
	// limit (500ms at this scale). So the policies are not judged by their
	// amplification alone, which depends on how many requests failed, but
	// by what they did with the failures they got, counted by attempt
	// number (retryhttp.AttemptHeader): the assertions hold at any load.
	rows := map[string]herdRow{}
	for _, r := range res.herd.rows {
		rows[r.policy.name] = r
		t.Logf("%s: %d requests, %d attempts, by attempt number %+v, %d gave up",
			r.policy.name, r.sum.requests, r.attempts, r.tries, r.gaveUp)
		assert.Equal(t, 40*4, r.sum.requests, r.policy.name) // 40 clients, 2s / 500ms, sent whatever the timing
		// Every first attempt reaches the server, but for those whose
		// client gave up first (a stall of 500ms).
		assert.GreaterOrEqual(t, r.tries[0].arrived, int64(r.sum.requests-r.gaveUp), r.policy.name)
		assert.InDelta(t, 0.5, r.sum.success, 0.5, r.policy.name)
		// Only a request whose first attempt failed retries, at most 3
		// times: with f the share of requests whose first attempt failed,
		// at most 1 + 3f attempts per request.
		f := float64(r.tries[0].failed) / float64(max(r.sum.requests, 1))
		assert.LessOrEqual(t, r.amplification, 1+3*f+1e-9, r.policy.name)
	}
	immediate, defaults := rows[immediatePolicy().name], rows[defaultsPolicy().name]

	// Immediate retries, no budget: every failure whose client is still
	// waiting (live) is retried at once, up to 3 times, and nothing else
	// is; a retry sent does not arrive only if its client gives up first,
	// which ends the request: at most one per request that gave up. So
	// during an outage, where every attempt fails, each request costs 4
	// attempts: 1 + 3·7/20 ≈ 2.05 per request over the run when the outage
	// falls as planned (buckets 5 to 12 of 20), less when a stall moves
	// requests out of it.
	assertRetriedLive(t, "immediate", immediate.tries, immediate.gaveUp)

	// The defaults: a request whose first attempt failed gets at most one
	// second attempt, sent at once with a token or parked until the host
	// answers again (F requests, the first attempts that failed). Later
	// retries follow a failed retry: sent with a token (the bucket's 10,
	// plus 0.1 per successful attempt, S of them), or parked again and
	// released as a probe (at most probes per outage, docs/budget-algorithm.md). So
	// at most F + 10 + 0.1·S + probes retries: 1 + f + (10 + 0.1·S +
	// probes)/n attempts per request, which is 1 + 0.35 + (10 + 16 + 9)/160
	// ≈ 1.57 when the outage falls as planned (f = 7/20 of the first
	// attempts, S ≈ n): the bar of 1.6.
	for _, r := range []herdRow{defaults, rows[defaultsPerClientPolicy().name]} {
		assertBudgeted(t, r.policy.name, r.attempts, r.tries)
	}
	// Peaks are not compared: at this scale one bucket is 25ms, and a
	// scheduler stall under the race detector moves requests from one
	// bucket to the next. The counts do not depend on such timing.
	assert.Positive(t, defaults.peak)
	assert.Greater(t, res.herd.normal, 0.0)
}

// assertRetriedLive checks what immediate retries without a budget do
// with the failures they get: every failure whose client is still waiting
// (live) is retried at once, up to 3 times, and nothing else is; a retry
// sent does not arrive only if its client gives up first, which ends the
// request: at most one per request that gave up (gaveUp).
func assertRetriedLive(t *testing.T, name string, tries [maxTry]tries, gaveUp int) {
	t.Helper()
	for k := range maxTry - 1 {
		assert.LessOrEqual(t, tries[k+1].arrived, tries[k].live, "%s: attempt %d", name, k+2)
	}
	live, retries := tries[0].live+tries[1].live+tries[2].live, tries[1].arrived+tries[2].arrived+tries[3].arrived
	assert.GreaterOrEqual(t, retries, live-int64(gaveUp), "%s: retries of live failures", name)
}

// assertBudgeted checks the retries of retryhttp's defaults, by attempt
// number: a request whose first attempt failed gets at most one second
// attempt (F requests, the first attempts that failed), and all the retries
// together are at most F + 10 + 0.1·S + probes, S the successful attempts
// (see TestHerd).
func assertBudgeted(t *testing.T, name string, attempts int64, tries [maxTry]tries) {
	t.Helper()
	var failed int64
	for _, c := range tries {
		failed += c.failed
	}
	first, s := tries[0].failed, attempts-failed
	assert.LessOrEqual(t, tries[1].arrived, first, name)
	assert.LessOrEqual(t, float64(attempts-tries[0].arrived), float64(first+10+probes)+0.1*float64(s), name)
}

// probes bounds the retries a budget's parked retries send to a dead host
// as probes, per outage: one per 250ms for the 2s a host is waited for, and
// the first (docs/budget-algorithm.md).
const probes = 9

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
			// Each hop adds at most its budget's 10 retries and the probes
			// of its parked retries.
			assert.LessOrEqual(t, r.perRequest(), float64(r.requests+(10+probes)*hops)/float64(r.requests))
			assert.Zero(t, r.sum.success)
		case r.policy.name == crossHopPolicy().name && r.tail == "dead":
			// Only S4, the hop above the dead tail, retries; the hops above
			// it are told not to: S1 … S4 see each request once, and S5
			// sees it plus at most S4's budget of 10 retries and its probes.
			n := int64(r.requests)
			assert.Equal(t, [hops - 1]int64{n, n, n, n}, [hops - 1]int64(r.hits[:hops-1]))
			assert.LessOrEqual(t, r.hits[hops-1], n+10+probes)
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
		t.Logf("%s: %d requests, %d attempts, by attempt number %+v, %d gave up",
			r.policy.name, r.sum.requests, r.attempts, r.tries, r.gaveUp)
		assert.Positive(t, r.goodput, r.policy.name)
		assert.Equal(t, 40*4, r.sum.requests, r.policy.name) // 40 clients, 2s / 500ms
	}
	// How many first attempts the server shed depends on the timing, which
	// a loaded machine changes (a stall delays requests into one burst, or
	// past their clients' limit): the amplifications are not compared, but
	// what each policy did with the failures it got, as in TestHerd.
	immediate, defaults := rows[immediatePolicy().name], rows[defaultsPolicy().name]
	assertRetriedLive(t, immediate.policy.name, immediate.tries, immediate.gaveUp)
	assertBudgeted(t, defaults.policy.name, defaults.attempts, defaults.tries)
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
		t.Logf("%s: %d requests, %d attempts, by attempt number %+v", name, r.sum.requests, r.attempts, r.tries)
		if r.policy.name == defaultsPolicy().name {
			// The budget, counted by attempt number, so that the replays
			// net/http makes on its own (on a reused connection that dies
			// before answering) do not count as retries.
			assertBudgeted(t, name, r.attempts, r.tries)
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
		{"metastable", func(c *config) { c.scenario = "metastable" }, ""},
		{"flaky", func(c *config) { c.scenario = "flaky" }, ""},
		{"replica", func(c *config) { c.scenario = "replica" }, ""},
		{"ratelimit", func(c *config) { c.scenario = "ratelimit" }, ""},
		{"blip", func(c *config) { c.scenario = "blip" }, ""},
		{"random", func(c *config) { c.scenario = randomScenario }, ""},
		{"random, one storm", func(c *config) { c.scenario, c.storm = randomScenario, 13 }, ""},
		{"quota, every combination", func(c *config) { c.scenario, c.quotaAll = quotaScenario, true }, ""},
		{"-quota-all without quota", func(c *config) { c.scenario, c.quotaAll = "herd", true }, "-quota-all"},
		{"no storms", func(c *config) { c.storms = 0 }, "-storms"},
		{"negative storm", func(c *config) { c.storm = -1 }, "-storm"},
		{"runs scaled", func(c *config) { c.runs = 0 }, ""},
		{"negative runs", func(c *config) { c.runs = -1 }, "-runs"},
		{"too many runs", func(c *config) { c.runs = blipMaxRuns + 1 }, "-runs"},
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
			lines:  []line{{name: "a & b", ys: []float64{0, 1, 5, 2}, note: "<note>", mark: 0.2}, {name: "c", ys: []float64{3}}},
			bands:  []band{{0.1, 0.2, "<outage>"}},
			hlines: []hline{{4, "capacity"}},
		}.svg()},
		{"empty line chart", lineChart{title: "empty"}.svg()},
		{"zero line chart", lineChart{dx: 1, lines: []line{{name: "z", ys: []float64{0, 0}}}}.svg()},
		{"bar chart", barChart{title: "bars", bars: []bar{{label: "x<y", value: 243}, {label: "one", value: 1}, {label: "zero", value: 0}}}.svg()},
		{"linear bar chart", barChart{title: "bars", linear: true, bars: []bar{{label: "a", value: 1.2, policy: "full jitter"}, {label: "zero", value: 0}}}.svg()},
		{"empty bar chart", barChart{}.svg()},
		{"empty linear bar chart", barChart{linear: true}.svg()},
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

func TestMetastable(t *testing.T) {
	cfg := tiny(t, "metastable")
	cfg.clients = 40
	cfg.duration = time.Second
	res := runConfig(t, cfg)
	require.NotNil(t, res.meta)
	r := res.meta
	// 40 clients offer 80 requests/s: 2 workers of 20ms serve 100/s,
	// behind 50 places (0.5s of work). The load lasts twice -duration, 2s;
	// the trigger starts at 3/16 of it and lasts an eighth.
	assert.Equal(t, 2, r.workers)
	assert.Equal(t, 50, r.queue)
	assert.Equal(t, 20, r.buckets)
	assert.Equal(t, [2]int{3, 2}, [2]int{r.triggerFrom, r.trigger})
	require.Len(t, r.rows, len(metastablePolicies()))
	for _, row := range r.rows {
		name := row.policy.name
		assert.Equal(t, 40*4, row.sum.requests, name) // 2s / 500ms each
		// At most 3 retries per request. (An attempt may time out before
		// it reaches the server on a loaded machine: no lower bound.)
		assert.LessOrEqual(t, row.attempts, int64(4*row.sum.requests), name)
		assert.LessOrEqual(t, row.shed, row.attempts, name)
		// Every success is an answer the server counted useful: it checks
		// that the client is there before the answer leaves. An answer
		// counted useful may still reach a client that just gave up.
		useful := 0.0
		for _, v := range row.useful {
			useful += v
		}
		ok := math.Round(row.sum.success * float64(row.sum.requests))
		assert.GreaterOrEqual(t, useful, ok, name)
		assert.LessOrEqual(t, useful, float64(row.attempts-row.shed), name)
		assert.GreaterOrEqual(t, row.usefulAfter, 0.0, name)
		assert.Len(t, row.useful, r.buckets+loadTail, name)
		assert.False(t, math.IsNaN(row.amplification), name)
	}
	// Without retries, every request is at most one attempt.
	none := r.rows[0]
	require.Equal(t, noRetriesPolicy().name, none.policy.name)
	assert.LessOrEqual(t, none.attempts, int64(none.sum.requests))
}

func TestRecovery(t *testing.T) {
	// 40 requests per 100ms offered: a window of 1s needs 0.9·400 = 360
	// useful answers.
	ok, bad := 40.0, 10.0
	series := func(parts ...any) []float64 { // value, count, value, count...
		var s []float64
		for i := 0; i < len(parts); i += 2 {
			for range parts[i+1].(int) {
				s = append(s, parts[i].(float64))
			}
		}
		return s
	}
	tests := []struct {
		name      string
		give      []float64
		from      int
		want      time.Duration
		recovered bool
	}{
		{"never failed", series(ok, 14), 2, 0, true},
		// Down until bucket 6: the window from bucket 5 holds one bad
		// bucket and passes (10 + 9·40 = 370).
		{"recovers 300ms after", series(bad, 6, ok, 12), 2, 300 * time.Millisecond, true},
		{"a backlog answered in time counts", series(bad, 4, 0.0, 2, 80.0, 1, ok, 10), 2, 200 * time.Millisecond, true},
		{"a dip of 100ms does not undo it", series(bad, 4, ok, 6, 0.0, 1, ok, 6), 2, 200 * time.Millisecond, true},
		{"relapses", series(ok, 12, bad, 10), 1, 0, false},
		{"never recovers", series(bad, 15), 0, 0, false},
		{"too short", series(ok, 9), 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, recovered := recovery(tt.give, tt.from, ok)
			assert.Equal(t, tt.recovered, recovered)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestQueueServer checks the metastable server's accounting on loopback: a
// request whose client leaves is still worked on (and not counted useful),
// one that waits gets 200, and a request finding the queue full is shed with
// 503 and costs work.
func TestQueueServer(t *testing.T) {
	start := time.Now()
	const work = 50 * time.Millisecond
	q := newQueueServer(1, 1, work, 5*time.Millisecond, nil, start, time.Hour, 1)
	defer q.close()
	srv, err := startServer(q.serve, start, time.Hour, 1)
	require.NoError(t, err)
	defer srv.close()
	base := newBase()
	defer base.CloseIdleConnections()

	// A client that leaves once its request is taken by the worker: the
	// worker still spends 50ms on it.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- get(ctx, &http.Client{Transport: base}, srv.URL) }()
	require.Eventually(t, func() bool { return srv.requests.Load() == 1 && len(q.queue) == 0 }, 10*time.Second, time.Millisecond)
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	// A patient client queues behind it and gets its answer.
	patient := &http.Client{Transport: base}
	require.NoError(t, get(context.Background(), patient, srv.URL))
	assert.EqualValues(t, 1, srv.useful[0].Load())
	assert.EqualValues(t, 2, srv.requests.Load())
	assert.Zero(t, q.shedded.Load())
	// Both requests' work was done: 100ms in all.
	assert.EqualValues(t, 2*work, q.done[0].Load())
}

// TestQueueServerSheds fills the queue of a server whose worker is stuck,
// and checks that the next request is shed with 503 at once.
func TestQueueServerSheds(t *testing.T) {
	start := time.Now()
	q := newQueueServer(1, 1, time.Hour, time.Millisecond, nil, start, time.Hour, 1)
	defer q.close()
	srv, err := startServer(q.serve, start, time.Hour, 1)
	require.NoError(t, err)
	defer srv.close()
	base := newBase()
	defer base.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for range 2 { // one for the worker, one for the queue
		go func() { errs <- get(ctx, &http.Client{Transport: base}, srv.URL) }()
	}
	require.Eventually(t, func() bool { return srv.requests.Load() == 2 && len(q.queue) == 1 }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, get(context.Background(), &http.Client{Transport: base}, srv.URL), errStatus)
	assert.EqualValues(t, 1, q.shedded.Load())
	assert.EqualValues(t, 1, srv.failed[0].Load())
	cancel()
	for range 2 {
		assert.Error(t, <-errs)
	}
}

// flakyRows runs a flaky-like scenario (flaky, replica) at 40 clients and
// returns its rows by policy, each checked for what every row must show:
// 40 requests (500ms / 500ms each), with at most 3 retries each.
func flakyRows(t *testing.T, scenario string, r func(results) *flakyResult) map[string]flakyRow {
	res := r(runTiny(t, scenario, 40))
	require.NotNil(t, res)
	require.Len(t, res.rows, len(metastablePolicies()))
	rows := map[string]flakyRow{}
	for _, row := range res.rows {
		name := row.policy.name
		rows[name] = row
		assert.Equal(t, 40*1, row.sum.requests, name)
		assert.GreaterOrEqual(t, row.attempts, int64(row.sum.requests), name)
		assert.LessOrEqual(t, row.attempts, int64(4*row.sum.requests), name)
		// A request refused a retry is one that failed.
		failed := math.Round(float64(row.sum.requests) * (1 - row.sum.success))
		assert.LessOrEqual(t, float64(row.refused), failed, name)
	}
	return rows
}

func TestFlaky(t *testing.T) {
	rows := flakyRows(t, "flaky", func(r results) *flakyResult { return r.flaky })
	none, full := rows[noRetriesPolicy().name], rows[fullJitterPolicy().name]
	assert.Equal(t, int64(none.sum.requests), none.attempts)
	assert.InDelta(t, 0.7, none.sum.success, 0.25) // 40 draws of 70%
	// 3 retries without a budget: 1 + 0.3 + 0.09 + 0.027 attempts per
	// request, and 1 - 0.3^4 success.
	assert.InDelta(t, 1.42, full.amplification, 0.3)
	assert.Greater(t, full.sum.success, none.sum.success)
	assert.Zero(t, full.refused, "no budget, no refusal")
	// Retries that succeed give their tokens back: the defaults retry
	// about as much as no budget, and succeed as often.
	defaults := rows[defaultsPolicy().name]
	assert.LessOrEqual(t, defaults.amplification, full.amplification+0.2)
	assert.GreaterOrEqual(t, defaults.sum.success, none.sum.success)
}

func TestReplica(t *testing.T) {
	rows := flakyRows(t, "replica", func(r results) *flakyResult { return r.replica })
	// A third of the attempts fail, in turn: without retries, a third of
	// the requests (one of every three, give or take the order in which
	// they arrive).
	none := rows[noRetriesPolicy().name]
	assert.InDelta(t, 2.0/3, none.sum.success, 0.1)
	// Every retry that pays gives its token back: the defaults get what
	// retries without a budget get, 1 - (1/3)^4, at about 1.48 attempts
	// per request.
	for _, p := range []policy{fullJitterPolicy(), defaultsPolicy(), defaultsPerClientPolicy()} {
		row := rows[p.name]
		assert.GreaterOrEqual(t, row.sum.success, 0.95, p.name)
		assert.InDelta(t, 1.48, row.amplification, 0.15, p.name)
	}
}

func TestMachineCheck(t *testing.T) {
	cfg := defaultConfig()
	cfg.timescale = 2
	lags := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 60 * time.Millisecond}
	m := newMachineCheck(cfg, lags)
	// Real lags halve in model time at -timescale 2.
	assert.Equal(t, 30*time.Millisecond, m.lagP99)
	assert.Equal(t, 30*time.Millisecond, m.lagMax)
	assert.True(t, math.IsNaN(m.capacity))
	assert.False(t, m.ok())
	assert.Contains(t, m.cell(), "TOO LOADED")

	fine := machineCheck{lagP99: time.Millisecond, capacity: 0.98}
	assert.True(t, fine.ok())
	assert.Equal(t, "ok", fine.cell())
	slow := machineCheck{lagP99: time.Millisecond, capacity: 0.7}
	assert.False(t, slow.ok())
	stalled := machineCheck{lagP99: time.Millisecond, lagMax: 300 * time.Millisecond, capacity: 1}
	assert.False(t, stalled.ok())
	second := machineCheck{lagP99: time.Millisecond, capacity: 1, runs: 2}
	assert.Contains(t, second.cell(), "run again")

	var sec section
	sec.addMachineChecks(cfg, []machineCheck{fine, slow, m}, []string{"a", "b", "c"}, "times")
	require.Len(t, sec.notes, 2)
	assert.Equal(t, []string{"b", "c"}, sec.loaded)
	assert.Contains(t, sec.notes[0], "worst of a row: p99 30ms, max 30ms")
	assert.Contains(t, sec.notes[1], "WARNING")
	assert.Contains(t, sec.notes[1], "b, c: those rows' times do not")
	assert.Contains(t, sec.notes[1], "-timescale 4")
	var calm section
	calm.addMachineChecks(cfg, []machineCheck{fine}, []string{"a"}, "times")
	assert.Len(t, calm.notes, 1)
	assert.Empty(t, calm.loaded)
	assert.Empty(t, newMachineCheck(cfg, nil).lagMax)
}

func TestUntilCalm(t *testing.T) {
	loaded, calm := machineCheck{lagP99: time.Second, capacity: 1}, machineCheck{capacity: 1}
	tests := []struct {
		name       string
		give       []machineCheck // the checks of successive runs
		reruns     int
		wantRuns   int
		wantOK     bool
		wantReruns int // left
	}{
		{"calm at once", []machineCheck{calm, loaded}, 1, 1, true, 1},
		{"calm the second time", []machineCheck{loaded, calm}, 1, 2, true, 0},
		{"loaded all along", []machineCheck{loaded, loaded, calm}, 3, 2, false, 2},
		{"no reruns left", []machineCheck{loaded, calm}, 0, 1, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, b := 0, rerunBudget{left: tt.reruns}
			got, runs, err := untilCalm(context.Background(), &b, func() (machineCheck, error) {
				n++
				return tt.give[n-1], nil
			}, func(m machineCheck) machineCheck { return m })
			require.NoError(t, err)
			assert.Equal(t, tt.wantRuns, runs)
			assert.Equal(t, tt.wantRuns, n)
			assert.Equal(t, tt.wantOK, got.ok())
			assert.Equal(t, tt.wantReruns, b.left)
		})
	}
	// An error ends the runs, and so does the end of the budget's time.
	loadedOnce := func() (machineCheck, error) { return loaded, nil }
	identity := func(m machineCheck) machineCheck { return m }
	b := rerunBudget{left: 1}
	_, runs, err := untilCalm(context.Background(), &b, func() (machineCheck, error) { return loaded, errStopped }, identity)
	assert.ErrorIs(t, err, errStopped)
	assert.Equal(t, 1, runs)
	b = rerunBudget{left: 1, until: time.Now().Add(-time.Second)}
	_, runs, err = untilCalm(context.Background(), &b, loadedOnce, identity)
	require.NoError(t, err)
	assert.Equal(t, 1, runs)
	// Half of a scenario's rows may be run again, until 2 minutes (model
	// time) after the lab began; none if told not to.
	cfg := defaultConfig()
	cfg.timescale = 0.5
	cfg.began = time.Now()
	assert.Equal(t, rerunBudget{left: 3, until: cfg.began.Add(time.Minute)}, cfg.reruns(6))
	cfg.rerun = false
	assert.Zero(t, cfg.reruns(6).left)
}

// TestLagProbe checks that a probe records sorted lags. On a loaded machine
// its goroutine may not run at all within 20ms: a probe that saw no tick is
// tried again, up to 50 times (a second of the machine not running it).
func TestLagProbe(t *testing.T) {
	var lags []time.Duration
	for i := 0; i < 50 && len(lags) == 0; i++ {
		p := startLagProbe(time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		lags = p.finish()
	}
	assert.NotEmpty(t, lags)
	assert.True(t, slices.IsSorted(lags))
}

func TestDeadline(t *testing.T) {
	// In real time: at a quarter of it, the race detector's cost is a large
	// part of a 62ms deadline.
	cfg := tiny(t, "deadline")
	cfg.clients, cfg.timescale = 40, 1
	res := runConfig(t, cfg)
	require.NotNil(t, res.deadline)
	require.Len(t, res.deadline.rows, 2)
	assert.Equal(t, 2, res.deadline.workers) // 40 clients, 80 requests/s, 75% of capacity, 20ms each
	without, with := res.deadline.rows[0], res.deadline.rows[1]
	assert.False(t, without.propagate)
	assert.True(t, with.propagate)
	for _, r := range res.deadline.rows {
		assert.Equal(t, 40*8, r.sum.requests, r.name) // 40 clients, 4s / 500ms
		assert.Positive(t, r.work, r.name)
		assert.LessOrEqual(t, r.wasted, r.work, r.name)
		assert.LessOrEqual(t, r.late, r.shed, r.name)
	}
	assert.Zero(t, without.late, "no deadline reaches S2 without propagation")
	t.Logf("wasted: %s without, %s with; success %s, %s", pct(without.wastedShare), pct(with.wastedShare), pct(without.sum.success), pct(with.sum.success))
	// With deadlines, S2 works for gone callers only when a request takes
	// longer than its usual latency: the bar of issue 26, 5% (0.0% in a
	// run of this test; 17% without propagation).
	assert.LessOrEqual(t, with.wastedShare, 0.05)
	assert.LessOrEqual(t, with.wastedShare, without.wastedShare)
}

func TestLimiterEarly(t *testing.T) {
	l := newLimiter(1, 1, 2)
	t0 := time.Unix(1000, 0)
	l.note("a", t0, false) // a 429 asking a to wait 2s
	l.note("a", t0.Add(1999*time.Millisecond), true)
	assert.Equal(t, int64(1), l.early.Load(), "before the pause")
	l.note("a", t0.Add(2*time.Second), true) // a 200 records nothing: still measured from t0
	assert.Equal(t, int64(1), l.early.Load(), "at the pause's end")
	l.note("b", t0, true) // a first attempt, answered 200
	l.note("b", t0, true)
	l.note("", t0, false) // no logical request: not tracked
	l.note("", t0, false)
	assert.Equal(t, int64(1), l.early.Load())
	l.note("a", t0.Add(3*time.Second), false) // a second 429 restarts the pause
	l.note("a", t0.Add(4*time.Second), false)
	assert.Equal(t, int64(2), l.early.Load())
}

func TestRetryablehttpPolicy(t *testing.T) {
	res := func(code int, retryAfter string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		if retryAfter != "" {
			r.Header.Set("Retry-After", retryAfter)
		}
		return r
	}
	get, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	require.NoError(t, err)
	post, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := get.WithContext(ctx)

	retries := []struct {
		name string
		give retryhttp.Attempt
		want bool
	}{
		{"transport error", retryhttp.Attempt{Req: get, Err: io.ErrUnexpectedEOF}, true},
		{"transport error, POST", retryhttp.Attempt{Req: post, Err: io.ErrUnexpectedEOF}, true},
		{"429", retryhttp.Attempt{Req: get, Res: res(429, "")}, true},
		{"500, POST", retryhttp.Attempt{Req: post, Res: res(500, "")}, true},
		{"501", retryhttp.Attempt{Req: get, Res: res(501, "")}, false},
		{"503", retryhttp.Attempt{Req: get, Res: res(503, "")}, true},
		{"599", retryhttp.Attempt{Req: get, Res: res(599, "")}, true},
		{"404 with Retry-After", retryhttp.Attempt{Req: get, Res: res(404, "1")}, false},
		{"200", retryhttp.Attempt{Req: get, Res: res(200, "")}, false},
		{"context done", retryhttp.Attempt{Req: gone, Res: res(503, "")}, false},
	}
	for _, tt := range retries {
		assert.Equal(t, tt.want, retryablehttpShouldRetry(tt.give), tt.name)
	}

	delays := []struct {
		name string
		give retryhttp.Attempt
		want time.Duration
	}{
		{"first retry", retryhttp.Attempt{Count: 1, Res: res(500, "")}, time.Second},
		{"fourth retry", retryhttp.Attempt{Count: 4, Err: io.ErrUnexpectedEOF}, 8 * time.Second},
		{"capped", retryhttp.Attempt{Count: 6, Res: res(500, "")}, 30 * time.Second},
		{"429, Retry-After", retryhttp.Attempt{Count: 3, Res: res(429, "3")}, 3 * time.Second},
		{"503, Retry-After 0", retryhttp.Attempt{Count: 2, Res: res(503, "0")}, 0},
		{"502 ignores Retry-After", retryhttp.Attempt{Count: 1, Res: res(502, "7")}, time.Second},
		{"Retry-After not seconds", retryhttp.Attempt{Count: 2, Res: res(429, "soon")}, 2 * time.Second},
		{"Retry-After negative", retryhttp.Attempt{Count: 1, Res: res(429, "-1")}, time.Second},
		{"Retry-After beyond the cap", retryhttp.Attempt{Count: 1, Res: res(429, "120")}, 2 * time.Minute},
	}
	for _, tt := range delays {
		assert.Equal(t, tt.want, retryablehttpDelay(tt.give), tt.name)
	}
}

// TestRateLimit runs the ratelimit scenario at a small scale. It asserts
// what the policies without a budget do, and what every row must satisfy
// (the bucket's physical law, the counts), but no bar for the defaults.
func TestRateLimit(t *testing.T) {
	setup := rateSetup{
		batches: []batch{
			{name: "wide", n: 4, workers: 4, rate: 1, burst: 1, retryAfter: 1},
			{name: "pool", n: 6, workers: 2, rate: 4, burst: 2, retryAfter: 1, probe: true},
		},
		open: openLoop{rate: 10, burst: 2, offered: 15, retryAfter: 1, duration: time.Second},
	}
	cfg := tiny(t, "ratelimit")
	r, err := rateLimitRun(context.Background(), cfg, setup)
	require.NoError(t, err)
	require.Len(t, r.batches, 2*len(rateLimitPolicies()))
	for _, row := range r.batches {
		name := row.batch.name + ", " + row.policy.name
		t.Logf("%s: %d of %d in %v, %d attempts, %d early, /free %+v", name, row.ok, row.sent, row.elapsed, row.arrivals, row.early, row.free)
		assert.False(t, row.stopped, name)
		assert.Equal(t, row.batch.n, row.sent, name)
		assert.GreaterOrEqual(t, row.arrivals, int64(row.sent), name)
		// The bucket allows at most its burst, and its rate after.
		assert.LessOrEqual(t, float64(row.ok), float64(row.batch.burst)+row.batch.rate*row.elapsed.Seconds()+1e-6, name)
		if row.policy.name == retryablehttpPolicy().name {
			assert.Zero(t, row.early, "%s: waits exactly Retry-After", name)
		}
		if row.batch.probe {
			assert.Positive(t, row.free.gets, name)
			assert.Positive(t, row.free.p99, name)
			if row.policy.name != freshDefaultsPolicy().name {
				assert.Zero(t, row.free.failed, name)
			}
		} else {
			assert.Zero(t, row.free.gets, name)
		}
	}
	// wide: 4 requests at once, a burst of 1, 1 per second. Without a
	// budget, every 429 is retried: more than one attempt per request; the
	// go-retryablehttp policy's 4 retries, 1s apart, get every request
	// through, one per second.
	for _, row := range r.batches[:len(closedLoopPolicies())] {
		if row.policy.name == freshDefaultsPolicy().name {
			continue
		}
		assert.Greater(t, row.arrivals, int64(row.batch.n), row.policy.name)
	}
	rh := r.batches[len(closedLoopPolicies())-1]
	require.Equal(t, retryablehttpPolicy().name, rh.policy.name)
	assert.Equal(t, rh.batch.n, rh.ok)
	assert.GreaterOrEqual(t, rh.elapsed, rh.batch.limit())

	// The open loop: 15 arrivals in 1s at 10 per second and a burst of 2:
	// at least 3 are limited, and retried without a budget.
	require.Len(t, r.open, len(rateLimitPolicies()))
	for _, row := range r.open {
		assert.Equal(t, 15, row.sum.requests, row.policy.name)
		assert.GreaterOrEqual(t, row.arrivals, int64(row.sum.requests), row.policy.name)
		if row.policy.name != freshDefaultsPolicy().name && row.policy.name != holdPolicy().name {
			assert.Greater(t, row.amplification, 1.0, row.policy.name)
		}
		if row.policy.name == retryablehttpPolicy().name {
			assert.Zero(t, row.early, row.policy.name)
		}
	}

	sections := rateSections(r)
	require.Len(t, sections, 2)
	assert.Len(t, sections[0].rows, len(r.batches))
	assert.Len(t, sections[1].rows, len(r.open))
	assert.Equal(t, "—", sections[0].rows[0][7], "no /free probe in wide")
	assert.Contains(t, sections[0].rows[len(rateLimitPolicies())][8], "of", "the /free probe in pool")
}

// TestLoopScale checks that the default run keeps the closed-loop
// scenarios' sizes, and how a small run (CI's) scales them down to their
// floors.
func TestLoopScale(t *testing.T) {
	cfg := defaultConfig()
	assert.Equal(t, 1.0, cfg.loopScale())
	assert.Equal(t, blipDefault, cfg.blipRuns())
	assert.Equal(t, defaultRateSetup(), scaledRateSetup(cfg.loopScale()))
	cfg.clients = 1000
	assert.Equal(t, 1.0, cfg.loopScale(), "never scaled up")

	cfg.clients, cfg.duration = 40, 2*time.Second
	assert.InDelta(t, 0.1, cfg.loopScale(), 1e-9)
	assert.Equal(t, 1, cfg.blipRuns())
	cfg.runs = 3
	assert.Equal(t, 3, cfg.blipRuns(), "-runs wins")
	small := scaledRateSetup(cfg.loopScale())
	type size struct{ n, workers int }
	var got []size
	for _, b := range small.batches {
		got = append(got, size{b.n, b.workers})
		assert.Greater(t, b.n, b.burst, "%s: requests beyond the burst", b.name)
	}
	assert.Equal(t, []size{{20, 20}, {60, 5}, {12, 4}, {10, 5}}, got)
	assert.Equal(t, time.Second, small.open.duration)
	def := defaultRateSetup()
	for i, b := range small.batches {
		d := def.batches[i]
		assert.Equal(t, []any{d.rate, d.burst, d.retryAfter}, []any{b.rate, b.burst, b.retryAfter}, b.name)
	}
}

// TestEarlyRetries checks that early counts retries sent at once after a
// 429 that asked for a second.
func TestEarlyRetries(t *testing.T) {
	row, err := runBatch(context.Background(), batch{name: "now", n: 3, workers: 3, rate: 1, burst: 1, retryAfter: 1}, immediatePolicy())
	require.NoError(t, err)
	t.Logf("%d attempts, %d early", row.arrivals, row.early)
	// At least two of the three first attempts got a 429; each was
	// retried at once, three times, or until a retry got through.
	assert.Positive(t, row.early)
	assert.LessOrEqual(t, row.early, row.arrivals-int64(row.batch.n))
}

// TestBlip runs each variant once. It asserts what the go-retryablehttp
// policy does (its first retry comes 1s after a 503, after the blip) and
// what every row must satisfy, but no bar for the defaults.
func TestBlip(t *testing.T) {
	cfg := tiny(t, "blip")
	cfg.runs = 1
	var out bytes.Buffer
	res, err := run(context.Background(), &out, cfg)
	require.NoError(t, err)
	require.NotNil(t, res.blip)
	assert.Contains(t, out.String(), "A worker pool through a blip")
	require.Len(t, res.blip.rows, len(blipVariants)*len(closedLoopPolicies()))
	for _, row := range res.blip.rows {
		name := row.variant.name + ", " + row.policy.name
		t.Logf("%s: %d of %d failed, %d attempts, drains %v", name, row.failed, row.requests, row.attempts, row.drains())
		require.Len(t, row.runs, 1, name)
		assert.Equal(t, res.blip.callers*row.variant.gets, row.requests, name)
		assert.Zero(t, row.warmFailed, name)
		assert.Len(t, row.drains(), 1, "%s: the blip started", name)
		assert.GreaterOrEqual(t, row.attempts, int64(row.requests), name)
		switch row.policy.name {
		case fullJitterPolicy().name:
			assert.Greater(t, row.attempts, int64(row.requests), "%s: the first request met the blip, and was retried", name)
			assert.LessOrEqual(t, row.attempts, int64(4*row.requests), name)
		case retryablehttpPolicy().name:
			assert.Greater(t, row.attempts, int64(row.requests), name)
			assert.LessOrEqual(t, row.attempts, int64(2*row.requests), "%s: one retry, 1s later, gets through", name)
			assert.Zero(t, row.failed, name)
			// The blip's first request is retried 1s after it began.
			assert.GreaterOrEqual(t, row.drains()[0], time.Second-blipLength, name)
		}
	}
	assert.Len(t, blipSection(*res.blip).rows, len(res.blip.rows))
}

// tinyQuotaSetup is the quota scenario at a scale for the tests: 10
// requests per 1s window (or a bucket of 10 refilling 10/s), a batch of 20
// from 5 workers (2 processes of 10 in the fleet rows), an interactive GET
// every 500ms; a window in draft-11, a bucket in X-RateLimit-*, and a
// window in the LLM fields whose 429s carry Retry-After.
func tinyQuotaSetup() quotaSetup {
	return quotaSetup{limit: 10, window: time.Second, n: 20, workers: 5, every: 500 * time.Millisecond, fleet: 2,
		cases: []quotaCase{{dialect: "draft-11"}, {dialect: "x-ratelimit", bucket: true}, {dialect: "llm", retryAfter: true}}}
}

// TestQuota runs the quota scenario at a small scale, each client in a
// child process of the test binary (quotaChildArg, which TestMain runs).
// It asserts the server's law (a window's quota per window; a bucket's
// tokens and their refill) and the counts of every row, and what the
// policies that do not read the fields meet, but no bar for the defaults
// beyond their success.
func TestQuota(t *testing.T) {
	q := tinyQuotaSetup()
	r, err := quotaRun(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, r.rows, (len(q.cases)+1)*len(quotaPolicies()), "every case's one-client rows, the first's fleet rows")
	byName := map[string]quotaRow{}
	for _, row := range r.rows {
		name := fmt.Sprintf("%s %s, %d clients, %s", row.dialect, row.server(), row.clients, row.policy.name)
		t.Logf("%s: %d of %d ok, %d served, %d refused, took %v, interactive %d (%d failed) p99 %v",
			name, row.ok, row.n, row.served, row.refused, row.took, row.interGets, row.interFailed, row.interP99)
		assert.Equal(t, q.n, row.n, name)
		assert.LessOrEqual(t, row.ok, int(row.served), name)
		assert.Positive(t, row.took, name)
		if row.bucket {
			// A bucket serves at most its tokens and what refilled
			// meanwhile (the row's time from the first request, and a
			// window of slack: the interactive calls may outlast it).
			assert.LessOrEqual(t, float64(row.served), float64(q.limit)+q.rate()*(row.took+q.window).Seconds(), name)
		} else {
			// A fixed window serves at most its quota in each window
			// the row's requests touched.
			windows := int64(row.took/q.window) + 2
			assert.LessOrEqual(t, row.served, windows*int64(q.limit), name)
		}
		if row.clients == 1 {
			assert.Positive(t, row.interGets, name)
			assert.GreaterOrEqual(t, row.served+row.refused, int64(row.ok+row.interGets-row.interFailed), name)
		} else {
			assert.Zero(t, row.interGets, name)
		}
		if row.policy.name == defaultsPolicy().name {
			assert.Equal(t, q.n, row.ok, name)
		}
		byName[name] = row
	}
	// Five workers that do not read the quota meet its end in every
	// window; the defaults, paced to it, meet fewer.
	jitter, defaults := byName["draft-11 window, 1 clients, full jitter"], byName["draft-11 window, 1 clients, retryhttp defaults"]
	assert.Positive(t, jitter.refused)
	assert.Less(t, defaults.refused, jitter.refused)

	s := quotaSection(r)
	assert.Len(t, s.rows, len(r.rows))
	assert.Equal(t, []string{"bucket", "x-ratelimit"}, s.rows[3][:2], "the server and dialect columns")
	assert.Equal(t, "window, Retry-After", s.rows[6][0])
	assert.Equal(t, "—", s.rows[len(s.rows)-1][7], "no interactive caller in the fleet rows")
	require.Len(t, s.charts, 2)
	for _, c := range s.charts {
		assertXML(t, c.svg)
	}
}

// TestQuotaChild checks the quota child's protocol: a bad job or policy
// is refused with a message, not run.
func TestQuotaChild(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, quotaChildMain(nil, strings.NewReader(`{"policy":"no such policy","n":1,"workers":1,"cap":1000000000}`), &out, &errb))
	assert.Contains(t, errb.String(), "bad job")
	errb.Reset()
	assert.Equal(t, 2, quotaChildMain(nil, strings.NewReader(`{`), &out, &errb))
	assert.Contains(t, errb.String(), "reading the job")
	assert.Equal(t, 2, quotaChildMain([]string{"x"}, strings.NewReader(`{}`), &out, &errb))
	assert.Empty(t, out.String())
}
