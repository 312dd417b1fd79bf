// Command retrylab reproduces retry storms on loopback and shows what
// retryhttp's defaults (jittered backoff and a retry budget) do to them.
//
// It runs ten scenarios, each with real HTTP servers and clients on
// 127.0.0.1, a fresh server and fresh clients per policy:
//
//   - herd: many clients, a server that fails for a while and recovers;
//     immediate retries, exponential backoff without jitter, full jitter
//     and retryhttp's defaults compared by the load the server sees, and
//     by when they recovered: every caller caught in the outage answered,
//     every later request a success (settle.go).
//   - chain: client → S1 → … → S5 with S5 dead or flaky; the requests S5
//     receives per client request, naive retries at every hop against the
//     defaults.
//   - overload: a server with a fixed capacity shedding the excess with 503
//     and Retry-After; goodput and amplification.
//   - shed: a server that pays for the work it accepts and queues without
//     limit, with and without inbound.LoadShedder in front (shed.go).
//   - metastable: a server with a queue, working for clients who left,
//     whose capacity halves for a second; which policies let it recover
//     when the trigger ends, and which keep it down (useful responses per
//     second, how long until they reach 90% of the offered load, and
//     recovery as in herd).
//   - flaky: a host failing 30% of requests at random, whatever its load;
//     what each policy spends in retries, and what it gets.
//   - replica: one bad replica of three behind a round robin, failing fast:
//     a third of the attempts fail, whatever the load.
//   - deadline: client → S1 → S2 with S2's capacity halved for a while;
//     S2's work for callers who had gone, with and without deadlines that
//     travel (deadline.go).
//   - ratelimit: a rate-limited API (a token bucket answering 429 with
//     Retry-After beyond its rate) and closed loops: batch jobs whose
//     workers wait for each answer; success, time against the physical
//     limit, attempts per request, retries sent before the stated pause,
//     the latency of an unlimited path of the same host; and an open loop
//     at 1.5× the rate (ratelimit.go, limiter.go).
//   - blip: a worker pool whose host answers 503 for 300ms, warm or
//     cold; failures, and how soon the last request ends after the blip
//     (blip.go).
//   - random (not part of all): storms nobody named, drawn at random from
//     -seed: open and closed loops, outages in spells, hosts failing at
//     random, rate limiters, capacity-limited servers, slow spells, caller
//     deadlines; each policy's run of each storm in a process of its own;
//     a verdict per storm on the defaults, and how many they hold
//     (random.go, random_run.go). 24 storms take 8-15 minutes, so
//     -scenario all leaves it out; -storms runs fewer, -storm K runs storm
//     K alone.
//   - quota (not part of all): a server that advertises its quota on every
//     response and closed-loop batches, one client with an interactive
//     caller beside it, and 4 client processes sharing the quota; 429s,
//     time against the quota's limit, the interactive caller's p99
//     (quota.go). Its servers: 50 per 2s window in the IETF fields of
//     draft-11 and draft-07, a token bucket of 50 refilling 25/s in
//     draft-11, and the window in draft-11 whose 429s carry Retry-After
//     (the fleet: draft-11's window); -quota-all runs every combination
//     (window and bucket, the five dialects, 429 with and without
//     Retry-After, each with a fleet; about 5 minutes). Every client is a
//     process of its own; about 30s.
//
// Their rows are retryhttp's defaults, full jitter without a budget, and a
// policy mimicking go-retryablehttp's defaults. They run in real time at any
// -timescale: a Retry-After is whole seconds, and the retry budget's own
// times are not scaled. A run smaller than the default shrinks them instead:
// their sizes (requests, workers, callers, runs) scale with
// -clients/200 × -duration/4s, down to floors that keep each regime
// (config.loopScale).
//
// Every load scenario checks that the machine kept up (scheduler lag, and
// the metastable server's achieved capacity) and says so when it did not.
//
// It prints a table per scenario and writes SVG charts and an index.html to
// the -out directory. The whole default run takes about three and a half
// minutes on a quiet machine, of which ratelimit and blip about a minute; the run of the
// tests' scale (-clients 40 -duration 2s -timescale 0.25) about 30-40s, of
// which ratelimit and blip under 10s.
//
// Usage:
//
//	go run ./cmd/retrylab [-scenario herd|chain|overload|shed|metastable|flaky|replica|deadline|ratelimit|blip|all]
//	    [-clients 200] [-duration 4s] [-seed 1] [-out retrylab-out] [-timescale 1] [-runs 5]
//	go run ./cmd/retrylab -scenario random [-seed 1] [-storms 24] [-storm K] [-out retrylab-out]
//	go run ./cmd/retrylab -scenario quota [-quota-all] [-out retrylab-out]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

// scenarios are the names -scenario accepts, besides all, in the order all
// runs them.
var scenarios = []string{"herd", "chain", "overload", "shed", "metastable", "flaky", "replica", "deadline", "ratelimit", "blip"}

// randomScenario is the name of the storms drawn at random: -scenario
// accepts it, all does not run it (24 storms take 8-15 minutes).
const randomScenario = "random"

// quotaScenario is the name of the advertised quota's scenario: -scenario
// accepts it, all does not run it (its client processes take about 30s).
const quotaScenario = "quota"

// config is what a lab run is told by its flags.
type config struct {
	scenario  string
	clients   int
	duration  time.Duration // of the load of herd and overload, model time
	seed      uint64
	out       string
	timescale float64   // real time per model time
	runs      int       // of each variant of blip; 0: blipDefault, scaled by loopScale (blipRuns)
	rerun     bool      // rows the machine was too loaded for may be run again (untilCalm)
	began     time.Time // when the run began, set by run; bounds the re-runs
	storms    int       // random: how many storms
	storm     int       // random: run this storm alone (from 1); 0: storms 1 to storms
	quotaAll  bool      // quota: every combination of server, not the default run's rows
	// draw draws the random scenario's storms; nil: drawStorm. The
	// tests' seam for a storm small enough for them.
	draw func(seed uint64, index int) storm
}

func defaultConfig() config {
	return config{scenario: "all", clients: 200, duration: 4 * time.Second, seed: 1, out: "retrylab-out", timescale: 1, rerun: true, storms: randomStorms}
}

// loopScale is the size of the closed-loop scenarios (ratelimit, blip)
// against the default run's: -clients/200 × -duration/4s, at most 1. They
// run in real time at any -timescale, so that a small run, the tests' and
// CI's, would otherwise spend most of its time in them; 1 for the default
// run, whose sizes it keeps exactly.
func (c config) loopScale() float64 {
	return min(1, float64(c.clients)/200*(float64(c.duration)/float64(4*time.Second)))
}

// blipRuns is how many times blip runs each variant: -runs if given, else
// blipDefault scaled by loopScale, at least 1.
func (c config) blipRuns() int {
	if c.runs > 0 {
		return c.runs
	}
	return scaledBlipRuns(c.loopScale())
}

// scale converts a model duration to real time.
func (c config) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.timescale)
}

// model converts a real duration to model time.
func (c config) model(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.timescale)
}

// scaleNote says, if the run is not in real time, that every time was
// scaled.
func (c config) scaleNote() []string {
	if c.timescale == 1 {
		return nil
	}
	return []string{fmt.Sprintf("Run at -timescale %g: every time of the lab (pace, work, waits, timeouts, buckets) ran %g× as long; "+
		"the times shown are model times. Times inside retryhttp that no option sets are not scaled: the retry budget's "+
		"(a parked retry's 2s MaxWait) among them, so the defaults rows read worse than at -timescale 1.", c.timescale, c.timescale)}
}

// command returns the command line that reproduces the run.
func (c config) command() string {
	if c.scenario == randomScenario {
		if c.storm > 0 {
			return stormCommand(c.seed, c.storm)
		}
		return fmt.Sprintf("go run ./cmd/retrylab -scenario random -seed %d -storms %d", c.seed, c.storms)
	}
	if c.scenario == quotaScenario {
		if c.quotaAll {
			return "go run ./cmd/retrylab -scenario quota -quota-all"
		}
		return "go run ./cmd/retrylab -scenario quota"
	}
	return fmt.Sprintf("go run ./cmd/retrylab -scenario %s -clients %d -duration %v -seed %d -timescale %g -runs %d",
		c.scenario, c.clients, c.duration, c.seed, c.timescale, c.blipRuns())
}

func (c config) validate() error {
	switch {
	case c.scenario != "all" && c.scenario != randomScenario && c.scenario != quotaScenario && !slices.Contains(scenarios, c.scenario):
		return fmt.Errorf("unknown -scenario %q: want %s, %s, %s or all", c.scenario, strings.Join(scenarios, ", "), randomScenario, quotaScenario)
	case c.clients < 1 || c.clients > 5000:
		return errors.New("-clients must be in [1, 5000]")
	case c.duration < time.Second || c.duration > time.Minute:
		return errors.New("-duration must be in [1s, 1m]")
	case !(c.timescale >= 0.05 && c.timescale <= 10):
		return errors.New("-timescale must be in [0.05, 10]")
	case c.runs < 0 || c.runs > blipMaxRuns:
		return fmt.Errorf("-runs must be in [0, %d]", blipMaxRuns)
	case c.storms < 1 || c.storms > 1000:
		return errors.New("-storms must be in [1, 1000]")
	case c.storm < 0:
		return errors.New("-storm must be 0 (all of -storms) or a storm's number, from 1")
	case c.quotaAll && c.scenario != quotaScenario:
		return errors.New("-quota-all is a flag of -scenario quota")
	}
	return nil
}

func main() {
	if code, ok := mainChild(); ok {
		os.Exit(code)
	}
	cfg := defaultConfig()
	flag.StringVar(&cfg.scenario, "scenario", cfg.scenario, "scenario to run: "+strings.Join(scenarios, ", ")+" or all; or "+
		randomScenario+", storms drawn at random from -seed (not part of all: 24 storms take 8-15 minutes); or "+
		quotaScenario+", a server advertising its quota (not part of all: about 30s)")
	flag.IntVar(&cfg.clients, "clients", cfg.clients, "number of clients (herd, overload; the chain derives its request count from it; "+
		"below 200, ratelimit and blip shrink in proportion, with -duration below 4s)")
	flag.DurationVar(&cfg.duration, "duration", cfg.duration, "how long the clients send requests, per policy (herd, overload; "+
		"see -clients for ratelimit and blip)")
	flag.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed of the clients' phases and the flaky tail; random: of the storms")
	flag.IntVar(&cfg.storms, "storms", cfg.storms, "random: how many storms to draw and run")
	flag.IntVar(&cfg.storm, "storm", cfg.storm, "random: run only this storm (from 1) of -seed")
	flag.StringVar(&cfg.out, "out", cfg.out, "directory for the report: SVG charts and index.html")
	flag.Float64Var(&cfg.timescale, "timescale", cfg.timescale, "real time per model time: 0.5 runs every time (pace, waits, work, timeouts) twice as fast")
	flag.IntVar(&cfg.runs, "runs", cfg.runs, "how many times blip runs each of its variants; 0: 5, fewer when -clients and -duration shrink the run")
	flag.BoolVar(&cfg.quotaAll, "quota-all", cfg.quotaAll, "quota: run every combination (window and bucket, each dialect, 429 with and "+
		"without Retry-After), each with a fleet of 4, instead of the default run's rows (about 5 minutes)")
	// go run builds the program in a cache directory, whose path os.Args[0]
	// would print as the program's name: the usage names it as it is run.
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./cmd/retrylab [flags]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "retrylab:", err)
		stop()
		os.Exit(1)
	}
}

// results are the outcomes of the scenarios of a run; nil for those not run.
type results struct {
	herd     *herdResult
	chain    *chainResult
	overload *overloadResult
	shed     *shedResult
	meta     *metaResult
	flaky    *flakyResult
	replica  *flakyResult
	deadline *deadlineResult
	rate     *rateResult
	blip     *blipResult
	random   *randomResult
	quota    *quotaResult
	report   string // path of index.html
}

// run runs the scenarios cfg selects, prints their tables to w and writes the
// report files.
func run(ctx context.Context, w io.Writer, cfg config) (results, error) {
	var res results
	if err := cfg.validate(); err != nil {
		return res, err
	}
	// Fail now, not after a minute of scenarios, if the report cannot be
	// written.
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return res, fmt.Errorf("-out: %w", err)
	}
	fmt.Fprintf(w, "retrylab: %s\n", cfg.command())
	began := time.Now()
	cfg.began = began
	var sections []section
	add := func(s section) {
		s.print(w)
		sections = append(sections, s)
	}
	want := func(name string) bool { return cfg.scenario == "all" || cfg.scenario == name }
	if want("herd") {
		r, err := runHerd(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("herd: %w", err)
		}
		res.herd = &r
		add(herdSection(r, cfg))
	}
	if want("chain") {
		r, err := runChain(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("chain: %w", err)
		}
		res.chain = &r
		add(chainSection(r, cfg))
	}
	if want("overload") {
		r, err := runOverload(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("overload: %w", err)
		}
		res.overload = &r
		add(overloadSection(r, cfg))
	}
	if want("shed") {
		r, err := runShed(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("shed: %w", err)
		}
		res.shed = &r
		add(shedSection(r, cfg))
	}
	if want("metastable") {
		r, err := runMetastable(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("metastable: %w", err)
		}
		res.meta = &r
		add(metaSection(r, cfg))
	}
	if want("flaky") {
		r, err := runFlaky(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("flaky: %w", err)
		}
		res.flaky = &r
		add(flakySection(r, cfg))
	}
	if want("replica") {
		r, err := runReplica(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("replica: %w", err)
		}
		res.replica = &r
		add(replicaSection(r, cfg))
	}
	if want("deadline") {
		r, err := runDeadline(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("deadline: %w", err)
		}
		res.deadline = &r
		add(deadlineSection(r, cfg))
	}
	if want("ratelimit") {
		r, err := runRateLimit(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("ratelimit: %w", err)
		}
		res.rate = &r
		for _, s := range rateSections(r) {
			add(s)
		}
	}
	if want("blip") {
		r, err := runBlip(ctx, cfg)
		if err != nil {
			return res, fmt.Errorf("blip: %w", err)
		}
		res.blip = &r
		add(blipSection(r))
	}
	if cfg.scenario == quotaScenario {
		r, err := runQuota(ctx, cfg.quotaAll)
		if err != nil {
			return res, fmt.Errorf("quota: %w", err)
		}
		res.quota = &r
		add(quotaSection(r))
	}
	if cfg.scenario == randomScenario {
		r, err := runRandom(ctx, w, cfg)
		if err != nil {
			return res, fmt.Errorf("random: %w", err)
		}
		res.random = &r
		sections = append(sections, randomSection(r)) // printed storm by storm
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	path, err := writeReport(cfg.out, cfg, sections)
	if err != nil {
		return res, err
	}
	res.report = path
	for _, s := range sections {
		if len(s.loaded) > 0 {
			fmt.Fprintf(w, "\nWARNING: %s: this machine was too loaded for some figures of %s to mean anything (see the notes).",
				s.id, strings.Join(s.loaded, ", "))
		}
	}
	fmt.Fprintf(w, "\nReport: %s (ran in %v)\n", path, time.Since(began).Round(100*time.Millisecond))
	return res, nil
}
