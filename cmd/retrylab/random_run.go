package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// The verdict on the defaults in a storm (judge): LOST when another policy
// at a similar load (amplification at most verdictAmpRatio times the
// defaults', or verdictAmpPlus more) gets verdictPoint more success, or the
// same success (within verdictPoint) verdictFaster times faster: a p99
// latency (open loops, when the defaults' is over verdictP99Floor) or a
// closed loop's time to finish.
const (
	verdictAmpRatio = 1.25
	verdictAmpPlus  = 0.3
	verdictPoint    = 0.01
	verdictFaster   = 1.5
	verdictP99Floor = 100 * time.Millisecond
	verdictEpsilon  = 1e-9 // shares are ratios of counts: equal ones compare equal
)

// randomStorms is the default number of storms of a run (-storms).
const randomStorms = 24

// stormResult is one storm of the random scenario: its parameters, each
// policy's run (the defaults first), and the verdict. It is a line of the
// JSON lines file.
type stormResult struct {
	Storm   storm      `json:"params"`
	Command string     `json:"command"` // runs the storm alone
	Runs    []stormRun `json:"runs"`
	Held    bool       `json:"held"`
	Reasons []string   `json:"reasons,omitempty"` // why it was lost
	Loaded  []string   `json:"loaded,omitempty"`  // policies whose run the machine was too loaded for
}

// randomResult is the random scenario's outcome.
type randomResult struct {
	seed   uint64
	storms []stormResult
	jsonl  string // path of the JSON lines file
	took   time.Duration
}

// held counts the storms the defaults held.
func (r randomResult) held() int {
	n := 0
	for _, s := range r.storms {
		if s.Held {
			n++
		}
	}
	return n
}

// judge returns the verdict on the defaults (runs[0]) against the other
// policies of a storm: held, or the reasons it was lost, one per policy
// that beat it.
func judge(open bool, runs []stormRun) (bool, []string) {
	if len(runs) == 0 {
		return true, nil
	}
	d := runs[0]
	dAmp, dOK := d.amplification(), d.success()
	var reasons []string
	for _, o := range runs[1:] {
		oAmp, oOK := o.amplification(), o.success()
		if oAmp > max(verdictAmpRatio*dAmp, dAmp+verdictAmpPlus)+verdictEpsilon {
			continue
		}
		at := fmt.Sprintf("at %.2fx vs %.2fx", oAmp, dAmp)
		switch gain := oOK - dOK; {
		case gain >= verdictPoint-verdictEpsilon:
			reasons = append(reasons, fmt.Sprintf("%s: %s vs %s success (+%.1f points) %s", o.Policy, pct(oOK), pct(dOK), 100*gain, at))
		case gain < -verdictPoint-verdictEpsilon:
			// less success: no match, however fast
		case open && d.P99 > verdictP99Floor && float64(d.P99) >= verdictFaster*float64(o.P99):
			reasons = append(reasons, fmt.Sprintf("%s: p99 %s vs %s (%.1fx shorter), success %s vs %s, %s",
				o.Policy, ms(o.P99), ms(d.P99), float64(d.P99)/float64(max(o.P99, 1)), pct(oOK), pct(dOK), at))
		case !open && float64(d.Finish) >= verdictFaster*float64(o.Finish):
			reasons = append(reasons, fmt.Sprintf("%s: finished in %s vs %s (%.1fx shorter), success %s vs %s, %s",
				o.Policy, secs(o.Finish), secs(d.Finish), float64(d.Finish)/float64(max(o.Finish, 1)), pct(oOK), pct(dOK), at))
		}
	}
	return len(reasons) == 0, reasons
}

// secs formats a duration in seconds, to the hundredth.
func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// stormCommand is the command line that runs storm index of seed alone.
func stormCommand(seed uint64, index int) string {
	return fmt.Sprintf("go run ./cmd/retrylab -scenario random -seed %d -storm %d", seed, index)
}

// runRandom runs the random scenario: cfg.storms storms of cfg.seed (or
// storm cfg.storm alone), each policy's run in a child process, one after
// the other; it prints each storm's table as it ends, then the summary, and
// writes the JSON lines file.
func runRandom(ctx context.Context, w io.Writer, cfg config) (randomResult, error) {
	r := randomResult{seed: cfg.seed}
	exe, err := selfExe()
	if err != nil {
		return r, fmt.Errorf("the lab's own binary, to run the storms' children: %w", err)
	}
	indexes := make([]int, 0, cfg.storms)
	name := fmt.Sprintf("random-seed%d.jsonl", cfg.seed)
	if cfg.storm > 0 {
		indexes = append(indexes, cfg.storm)
		name = fmt.Sprintf("random-seed%d-storm%d.jsonl", cfg.seed, cfg.storm)
	} else {
		for i := range cfg.storms {
			indexes = append(indexes, i+1)
		}
	}
	r.jsonl = filepath.Join(cfg.out, name)
	f, err := os.Create(r.jsonl)
	if err != nil {
		return r, err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	reruns := rerunBudget{}
	if cfg.rerun {
		reruns.left = len(indexes)/4 + 1
	}
	draw := cfg.draw
	if draw == nil {
		draw = drawStorm
	}
	began := time.Now()
	for _, i := range indexes {
		s := draw(cfg.seed, i)
		sr, err := runStorm(ctx, exe, s, &reruns)
		if err != nil {
			return r, fmt.Errorf("storm %d: %w", i, err)
		}
		r.storms = append(r.storms, sr)
		printStorm(w, sr, len(indexes), cfg.storm > 0)
		if err := enc.Encode(sr); err != nil {
			return r, err
		}
	}
	r.took = time.Since(began)
	printRandomSummary(w, r)
	return r, f.Close()
}

// selfExe returns the path that starts this very binary again: on Linux
// /proc/self/exe, which stays this process's binary even when its file is
// replaced during the run (go build -o to the same path, say); elsewhere
// os.Executable.
func selfExe() (string, error) {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self, nil
	}
	return os.Executable()
}

// runStorm runs storm s with every policy, each in a child process of exe,
// one after the other, and judges the defaults. A run the machine was too
// loaded for is run again while reruns allows.
func runStorm(ctx context.Context, exe string, s storm, reruns *rerunBudget) (stormResult, error) {
	sr := stormResult{Storm: s, Command: stormCommand(s.Seed, s.Index)}
	for _, p := range randomPolicies() {
		run, runs, err := untilCalm(ctx, reruns, func() (stormRun, error) { return runChild(ctx, exe, s, p.name) },
			func(r stormRun) machineCheck { return r.check() })
		if err != nil {
			return sr, err
		}
		run.Runs = runs
		if !run.check().ok() {
			sr.Loaded = append(sr.Loaded, p.name)
		}
		sr.Runs = append(sr.Runs, run)
	}
	sr.Held, sr.Reasons = judge(s.Open, sr.Runs)
	return sr, nil
}

// runChild runs policy of storm s in a child process of exe (childArg) and
// returns its run. The child is killed if it outlives the storm's bound.
func runChild(ctx context.Context, exe string, s storm, policy string) (stormRun, error) {
	in, err := json.Marshal(s)
	if err != nil {
		return stormRun{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.span()+randomClientGuard+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, childArg, policy)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &errb
	if err := cmd.Run(); err != nil {
		return stormRun{}, fmt.Errorf("%w: %s: %v: %s", errChild, childCommandLine(exe, policy), err, strings.TrimSpace(errb.String()))
	}
	var r stormRun
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return stormRun{}, fmt.Errorf("%w: %s: its output: %v", errChild, childCommandLine(exe, policy), err)
	}
	return r, nil
}

// stormHeader is the header of a storm's table.
func stormHeader(open bool) []string {
	last := "finish"
	if open {
		last = "p99"
	}
	return []string{"policy", "requests", "success", "amplification", "p50", last, "refused", "machine"}
}

// stormRows are the rows of a storm's table.
func stormRows(sr stormResult) [][]string {
	var rows [][]string
	for _, run := range sr.Runs {
		last := ms(run.P99)
		if !sr.Storm.Open {
			last = secs(run.Finish)
			if run.Stopped {
				last += " (stopped)"
			}
		}
		rows = append(rows, []string{run.Policy, fmt.Sprint(run.Requests), pct(run.success()),
			fmt.Sprintf("%.2fx", run.amplification()), ms(run.P50), last, fmt.Sprint(run.Refused), run.check().cell()})
	}
	return rows
}

// verdictLine is the storm's verdict in a line.
func (sr stormResult) verdictLine() string {
	if sr.Held {
		return "HELD"
	}
	return "LOST: " + strings.Join(sr.Reasons, "; ")
}

// printStorm prints a storm's parameters, table and verdict.
func printStorm(w io.Writer, sr stormResult, of int, alone bool) {
	s := sr.Storm
	if alone {
		fmt.Fprintf(w, "\n== storm %d (seed %d): %s\n", s.Index, s.Seed, s)
	} else {
		fmt.Fprintf(w, "\n== storm %d of %d (seed %d): %s\n", s.Index, of, s.Seed, s)
	}
	fmt.Fprintf(w, "   alone: %s\n\n", sr.Command)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(stormHeader(s.Open), "\t"))
	for _, row := range stormRows(sr) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "defaults: %s\n", sr.verdictLine())
	if len(sr.Loaded) > 0 {
		fmt.Fprintf(w, "WARNING: the machine was too loaded for %s: their latencies do not mean much.\n", strings.Join(sr.Loaded, ", "))
	}
}

// shape names a storm's loop and fault: "open, outage".
func (s storm) shape() string {
	if s.Open {
		return "open, " + s.Fault
	}
	return "closed, " + s.Fault
}

// printRandomSummary prints the run's summary: the storms held, and why
// the others were lost.
func printRandomSummary(w io.Writer, r randomResult) {
	fmt.Fprintf(w, "\n== Storms drawn at random, seed %d: defaults hold %d of %d (ran in %v)\n", r.seed, r.held(), len(r.storms),
		r.took.Round(time.Second))
	for _, s := range r.storms {
		if !s.Held {
			fmt.Fprintf(w, "lost: storm %d (%s): %s\n", s.Storm.Index, s.Storm.shape(), strings.Join(s.Reasons, "; "))
		}
	}
	var loaded []string
	for _, s := range r.storms {
		if len(s.Loaded) > 0 {
			loaded = append(loaded, fmt.Sprintf("storm %d (%s)", s.Storm.Index, strings.Join(s.Loaded, ", ")))
		}
	}
	if len(loaded) > 0 {
		fmt.Fprintf(w, "WARNING: the machine was too loaded (scheduler lag over %v at p99 or %v at most, or a capacity's server "+
			"under %s of its nominal capacity while saturated) for %s.\n", maxLagP99, maxLag, pct(minCapacity), strings.Join(loaded, ", "))
	}
	fmt.Fprintf(w, "JSON lines (one storm a line, every number): %s\n", r.jsonl)
}

// randomSection is the random scenario's section of the report: a row per
// storm.
func randomSection(r randomResult) section {
	s := section{
		id:    "random",
		title: fmt.Sprintf("Storms drawn at random, seed %d: the defaults hold %d of %d", r.seed, r.held(), len(r.storms)),
		notes: []string{
			"Each storm is drawn from the seed and its index (docs/retrylab.md#storms-drawn-at-random has the distribution); " +
				"each policy's run of it is a process of its own, one after the other.",
			fmt.Sprintf("Verdict: LOST when another policy whose amplification is at most %.2fx the defaults' or %.1f more gets %.0f point more "+
				"success, or the same success (within a point) with a p99 (open loops, when the defaults' is over %v) or a time to finish "+
				"(closed loops) %.1fx shorter; else HELD.", verdictAmpRatio, verdictAmpPlus, 100*verdictPoint, verdictP99Floor, verdictFaster),
			"Cells: success, amplification (attempts at the server per request sent), and the p99 latency (open loops) or the " +
				"batch's time to finish (closed loops).",
			fmt.Sprintf("JSON lines with every number: %s. The storms took %v.", r.jsonl, r.took.Round(time.Second)),
		},
		header: []string{"storm", "shape"},
	}
	policies := randomPolicies()
	for _, p := range policies {
		s.header = append(s.header, p.name)
	}
	s.header = append(s.header, "defaults")
	for _, sr := range r.storms {
		row := []string{fmt.Sprint(sr.Storm.Index), sr.Storm.shape()}
		for _, run := range sr.Runs {
			last := ms(run.P99)
			if !sr.Storm.Open {
				last = secs(run.Finish)
			}
			row = append(row, fmt.Sprintf("%s, %.2fx, %s", pct(run.success()), run.amplification(), last))
		}
		v := "HELD"
		if !sr.Held {
			v = "LOST"
		}
		if len(sr.Loaded) > 0 {
			v += " (loaded)"
			s.loaded = append(s.loaded, fmt.Sprintf("storm %d", sr.Storm.Index))
		}
		s.rows = append(s.rows, append(row, v))
	}
	for _, sr := range r.storms {
		s.notes = append(s.notes, fmt.Sprintf("Storm %d: %s. %s.", sr.Storm.Index, sr.Storm, sr.verdictLine()))
	}
	s.policies = policies
	s.charts = []chart{{file: "random.svg", svg: randomChart(r)}}
	return s
}
