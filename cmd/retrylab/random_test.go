package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrawStorm: a seed and an index give the same storm every time, other
// indexes and seeds other storms, and every parameter lies in the
// distribution's documented ranges, over many draws.
func TestDrawStorm(t *testing.T) {
	assert.Equal(t, drawStorm(7, 13), drawStorm(7, 13))
	assert.NotEqual(t, drawStorm(7, 13), drawStorm(7, 14))
	assert.NotEqual(t, drawStorm(7, 13), drawStorm(8, 13))

	kinds := map[string]int{}
	open, deadlines, resets, withRetryAfter := 0, 0, 0, 0
	const n = 2000
	for i := range n {
		s := drawStorm(uint64(i/100), i%100+1)
		if testing.Verbose() && i < randomStorms {
			t.Logf("storm %d: %s", s.Index, s)
		}
		kinds[s.Fault]++
		assert.Equal(t, i%100+1, s.Index)
		assert.True(t, s.Work >= time.Millisecond && s.Work <= 300*time.Millisecond, "work %v", s.Work)
		if s.Open {
			open++
			assert.True(t, s.Rate >= randomMinRate && s.Rate <= randomMaxRate, "rate %v", s.Rate)
			assert.True(t, s.Load >= randomMinLoad && s.Load <= randomMaxSpan, "load %v", s.Load)
			assert.Zero(t, s.Workers)
		} else {
			assert.True(t, s.Workers >= randomMinWorkers && s.Workers <= randomMaxWorkers, "workers %d", s.Workers)
			assert.GreaterOrEqual(t, s.Requests, s.Workers)
			assert.LessOrEqual(t, float64(s.Workers)/(s.Work+s.Think).Seconds(), randomMaxRate*1.01, "a closed loop's pace")
			assert.True(t, s.Cap >= 10*time.Second && s.Cap <= 2*randomMaxSpan+11*time.Second, "cap %v", s.Cap)
		}
		if s.Deadline > 0 {
			deadlines++
			assert.True(t, s.Deadline >= time.Second && s.Deadline <= 5*time.Second, "deadline %v", s.Deadline)
		}
		assert.True(t, s.FailShare >= 0 && s.FailShare <= randomMaxFail, "fail share %v", s.FailShare)
		for _, sp := range s.Spells {
			assert.True(t, sp.From >= 0 && sp.From < sp.To && sp.To <= randomMaxSpan, "spell %v", sp)
		}
		switch s.Fault {
		case faultOutage:
			require.NotEmpty(t, s.Spells)
			for _, sp := range s.Spells[:len(s.Spells)-1] { // the last may be cut by the span
				assert.True(t, sp.To-sp.From >= randomMinSpell && sp.To-sp.From <= randomMaxSpell, "outage spell %v", sp)
			}
			if s.Reset {
				resets++
				assert.Zero(t, s.RetryAfter)
			}
		case faultRateLimit:
			assert.True(t, s.LimitRate >= 1 && s.LimitBurst >= 5 && s.LimitBurst <= 50, "limiter %v %d", s.LimitRate, s.LimitBurst)
			assert.True(t, s.RetryAfter >= 0 && s.RetryAfter <= 3)
			if s.RetryAfter > 0 {
				withRetryAfter++
			}
		case faultCapacity:
			assert.True(t, s.CapWorkers >= 1 && s.CapQueue >= 1, "capacity %d %d", s.CapWorkers, s.CapQueue)
		case faultSlow:
			require.NotEmpty(t, s.Spells)
			assert.True(t, s.SlowBy >= 200*time.Millisecond && s.SlowBy <= 2*time.Second, "slow by %v", s.SlowBy)
		case faultRandom:
			assert.Empty(t, s.Spells)
		default:
			t.Fatalf("unknown fault %q", s.Fault)
		}
	}
	// Every kind, loop and caller is drawn, at about its probability.
	for _, f := range faultWeights {
		assert.InDelta(t, f.weight, float64(kinds[f.kind])/n, 0.05, f.kind)
	}
	assert.InDelta(t, randomOpenShare, float64(open)/n, 0.05)
	assert.InDelta(t, 0.5, float64(deadlines)/n, 0.05)
	assert.Positive(t, resets)
	assert.Positive(t, withRetryAfter)
}

// TestJudge: the verdict on the defaults, row by row of its rule.
func TestJudge(t *testing.T) {
	// run is a run of 1000 requests with ok successes and attempts
	// attempts, a p99 and a time to finish.
	run := func(policy string, ok int, attempts int64, p99, finish time.Duration) stormRun {
		return stormRun{Policy: policy, Requests: 1000, Sent: 1000, OK: ok, Attempts: attempts, P99: p99, Finish: finish}
	}
	def := run("defaults", 900, 1200, time.Second, 4*time.Second)
	tests := []struct {
		name   string
		open   bool
		other  stormRun
		held   bool
		reason string // in the reasons, if lost
	}{
		{"a point more at the same load", true, run("x", 910, 1200, time.Second, 0), false, "+1.0 points"},
		{"under a point more", true, run("x", 909, 1200, time.Second, 0), true, ""},
		{"more success at 1.25x", true, run("x", 990, 1500, time.Second, 0), false, "x: 99.0% vs 90.0% success"},
		{"more success above 1.25x and +0.3", true, run("x", 990, 1501, time.Second, 0), true, ""},
		{"p99 1.5x shorter, same success", true, run("x", 895, 1200, 666*time.Millisecond, 0), false, "p99"},
		{"p99 1.5x shorter, 2 points less", true, run("x", 880, 1200, 100*time.Millisecond, 0), true, ""},
		{"p99 1.4x shorter", true, run("x", 900, 1200, 715*time.Millisecond, 0), true, ""},
		{"finish: an open loop's is not judged", true, run("x", 900, 1200, time.Second, time.Second), true, ""},
		{"closed loop 1.5x faster", false, run("x", 900, 1200, time.Second, 2666*time.Millisecond), false, "finished in 2.67s vs 4.00s"},
		{"closed loop 1.4x faster", false, run("x", 900, 1200, time.Second, 2900*time.Millisecond), true, ""},
		{"closed loop: p99 not judged", false, run("x", 900, 1200, time.Millisecond, 4*time.Second), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held, reasons := judge(tt.open, []stormRun{def, tt.other})
			assert.Equal(t, tt.held, held, "%v", reasons)
			if !tt.held {
				require.Len(t, reasons, 1)
				assert.Contains(t, reasons[0], tt.reason)
			} else {
				assert.Empty(t, reasons)
			}
		})
	}

	// +0.3 is the bound when it is above 1.25x: defaults at 1.0x.
	low := run("defaults", 500, 1000, time.Second, 0)
	held, _ := judge(true, []stormRun{low, run("x", 600, 1300, time.Second, 0)})
	assert.False(t, held, "1.3x is within +0.3 of 1.0x")
	held, _ = judge(true, []stormRun{low, run("x", 600, 1310, time.Second, 0)})
	assert.True(t, held, "1.31x is over both bounds")
	// A p99 at most 100ms is not judged.
	fast := run("defaults", 900, 1000, 90*time.Millisecond, 0)
	held, _ = judge(true, []stormRun{fast, run("x", 900, 1000, 10*time.Millisecond, 0)})
	assert.True(t, held)
	// Every policy that beats the defaults is named.
	held, reasons := judge(true, []stormRun{def, run("a", 990, 1200, time.Second, 0), run("b", 990, 1200, time.Second, 0)})
	assert.False(t, held)
	assert.Len(t, reasons, 2)
}

// tinyStorm is an open loop small enough for the tests: 30 arrivals in
// 200ms, an outage of 50ms (503), a deadline of 400ms per request.
func tinyStorm(seed uint64, index int) storm {
	return storm{
		Seed: seed, Index: index, Open: true, Rate: 150, Load: 200 * time.Millisecond, Warm: true,
		Deadline: 400 * time.Millisecond, Work: time.Millisecond, Fault: faultOutage,
		Spells: []spell{{50 * time.Millisecond, 100 * time.Millisecond}},
	}
}

// TestRandomScenario runs the scenario at its smallest, through run: one
// tiny storm, each policy in a child process (the test binary, started
// with childArg, runs the child: TestMain), as the lab does. Every
// policy's run comes back with its counts; the table, the summary, the
// JSON line and the report are written.
func TestRandomScenario(t *testing.T) {
	cfg := defaultConfig()
	cfg.scenario = randomScenario
	cfg.out = t.TempDir()
	cfg.rerun = false
	cfg.seed, cfg.storm, cfg.draw = 3, 2, tinyStorm
	var out bytes.Buffer
	res, err := run(context.Background(), &out, cfg)
	require.NoError(t, err)
	require.NotNil(t, res.random)
	require.Len(t, res.random.storms, 1)
	assert.Contains(t, out.String(), "defaults hold ")
	assert.Contains(t, out.String(), stormCommand(3, 2))

	sr := res.random.storms[0]
	require.Len(t, sr.Runs, len(randomPolicies()))
	for i, p := range randomPolicies() {
		r := sr.Runs[i]
		assert.Equal(t, p.name, r.Policy)
		assert.Positive(t, r.Requests)
		assert.Equal(t, r.Requests, r.Sent)
		assert.GreaterOrEqual(t, r.Attempts, int64(r.Sent), "%s: every request reached the host", p.name)
		assert.Positive(t, r.OK, p.name)
		assert.Positive(t, r.Took)
	}
	none := sr.Runs[slices.IndexFunc(sr.Runs, func(r stormRun) bool { return r.Policy == noRetriesPolicy().name })]
	assert.Equal(t, int64(none.Requests), none.Attempts, "no retries: one attempt per request")
	assert.Less(t, none.OK, none.Requests, "no retries: the outage's arrivals fail")

	b, err := os.ReadFile(res.random.jsonl)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cfg.out, "random-seed3-storm2.jsonl"), res.random.jsonl)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 1)
	var got stormResult
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &got))
	assert.Equal(t, tinyStorm(3, 2), got.Storm)
	assert.Equal(t, sr.Runs, got.Runs)
	html, err := os.ReadFile(res.report)
	require.NoError(t, err)
	assert.Contains(t, string(html), "Storms drawn at random")
	svg, err := os.ReadFile(filepath.Join(cfg.out, "random.svg"))
	require.NoError(t, err)
	assertXML(t, svg)
	assert.Contains(t, string(html), "<svg")
}

// TestRandomChild runs a closed loop's child process (the test binary, as
// in TestRandomScenario) for one policy, and the protocol's error: an
// unknown policy fails the child, and the error names it.
func TestRandomChild(t *testing.T) {
	exe, err := selfExe()
	require.NoError(t, err)
	s := storm{Seed: 1, Index: 2, Workers: 4, Requests: 12, Cap: 5 * time.Second, Work: time.Millisecond,
		Deadline: 300 * time.Millisecond, Fault: faultRandom, FailShare: 0.5}
	r, err := runChild(context.Background(), exe, s, fullJitterPolicy().name)
	require.NoError(t, err)
	assert.Equal(t, fullJitterPolicy().name, r.Policy)
	assert.Equal(t, 12, r.Requests)
	assert.Equal(t, 12, r.Sent)
	assert.Greater(t, r.Attempts, int64(12), "half fail: full jitter retries some")
	assert.Positive(t, r.Finish)
	assert.False(t, r.Stopped)

	_, err = runChild(context.Background(), exe, s, "no such policy")
	require.ErrorIs(t, err, errChild)
	assert.Contains(t, err.Error(), "no such policy")
}
